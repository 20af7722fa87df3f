"""Pictures of diagrams: a self-contained SVG (or an HTML page around it).

Wires are arrays labeled with their axes and sizes, boxes are operations, colours give the
memory level each array lives at while the kernel runs, and a band above each kernel lists its
partitions (group or stream, size, level). Layout: topological layers left to right.
"""
from __future__ import annotations

import html

import networkx as nx

from .diagram import Diagram, Program, as_program

LEVEL_COLOURS = {"global": "#f4cccc", "smem": "#fff2cc", "reg": "#d9ead3"}
OP_COLOUR = "#cfe2f3"
COL_W, ROW_H, BOX_W, BOX_H = 230, 78, 200, 50


def _esc(x) -> str:
    return html.escape(str(x), quote=True)


def _kernel_svg(d: Diagram, x0: float, y0: float) -> tuple[list[str], float, float]:
    g = d.graph()
    layers = list(nx.topological_generations(g))
    parts: list[str] = []
    pos = {}
    for i, layer in enumerate(layers):
        for j, node in enumerate(sorted(layer, key=str)):
            pos[node] = (x0 + 20 + i * COL_W, y0 + 70 + j * ROW_H)
    height = 70 + max(len(layer) for layer in layers) * ROW_H + 20
    width = 40 + len(layers) * COL_W
    parts.append(f'<rect x="{x0}" y="{y0}" width="{width}" height="{height}" fill="none" stroke="#999" '
                 f'stroke-dasharray="4 3" rx="8"/>')
    parts.append(f'<text x="{x0 + 10}" y="{y0 + 20}" font-weight="bold">kernel {_esc(d.name)}</text>')
    band = "; ".join(f"{p.kind} {p.axis_name} by {p.size} @{p.level}" + (f" x{p.stages} stages" if p.kind == "stream" and p.stages != 1 else "")
                     for p in d.partitions) or "no partitions (one unit does everything)"
    if d.masks:
        band += "; " + "; ".join(m.describe() for m in d.masks)
    parts.append(f'<text x="{x0 + 10}" y="{y0 + 42}" font-size="12" fill="#444">{_esc(band)}</text>')
    for u, v in g.edges:
        (x1, y1), (x2, y2) = pos[u], pos[v]
        parts.append(f'<line x1="{x1 + BOX_W}" y1="{y1 + BOX_H / 2}" x2="{x2}" y2="{y2 + BOX_H / 2}" '
                     f'stroke="#555" marker-end="url(#arrow)"/>')
    for node, (x, y) in pos.items():
        data = g.nodes[node]
        if node[0] == "op":
            op = data["op"]
            parts.append(f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" fill="{OP_COLOUR}" stroke="#345" rx="3"/>')
            parts.append(f'<text x="{x + 8}" y="{y + 20}" font-weight="bold">{_esc(op.name)}</text>')
            parts.append(f'<text x="{x + 8}" y="{y + 38}" font-size="11">{_esc(op.describe())}</text>')
        else:
            arr = data["array"]
            level = d.level_of(arr)
            axes = ", ".join(f"{a.name}={a.size}" for a in arr.axes)
            parts.append(f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" fill="{LEVEL_COLOURS[level]}" '
                         f'stroke="#777" rx="18"/>')
            parts.append(f'<text x="{x + 10}" y="{y + 20}" font-weight="bold">{_esc(arr.name)} '
                         f'<tspan font-weight="normal" font-size="11">{_esc(arr.dtype)} @ {level}</tspan></text>')
            parts.append(f'<text x="{x + 10}" y="{y + 38}" font-size="11">{_esc(axes)}</text>')
    return parts, width, height


def render_svg(diagram: Diagram | Program) -> str:
    prog = as_program(diagram)
    body: list[str] = []
    y, width = 40.0, 0.0
    for k in prog.kernels:
        parts, w, h = _kernel_svg(k, 10, y)
        body += parts
        y += h + 20
        width = max(width, w + 20)
    legend_y = 22
    legend = [f'<text x="10" y="{legend_y}" font-weight="bold">{_esc(prog.name)}</text>']
    lx = 260
    for level, colour in LEVEL_COLOURS.items():
        legend.append(f'<rect x="{lx}" y="{legend_y - 12}" width="14" height="14" fill="{colour}" stroke="#777"/>'
                      f'<text x="{lx + 18}" y="{legend_y}" font-size="12">{level}</text>')
        lx += 90
    legend.append(f'<rect x="{lx}" y="{legend_y - 12}" width="14" height="14" fill="{OP_COLOUR}" stroke="#345"/>'
                  f'<text x="{lx + 18}" y="{legend_y}" font-size="12">operation</text>')
    width = max(width, lx + 120)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{y:.0f}" '
            f'font-family="Helvetica, Arial, sans-serif" font-size="13">'
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>'
            + "".join(legend) + "".join(body) + "</svg>\n")


def render_html(diagram: Diagram | Program) -> str:
    prog = as_program(diagram)
    rows = []
    for k in prog.kernels:
        for name, arr in k.arrays().items():
            rows.append(f"<tr><td>{_esc(k.name)}</td><td>{_esc(name)}</td><td>{_esc(arr.dtype)}</td>"
                        f"<td>{_esc(', '.join(f'{a.name}={a.size}' for a in arr.axes))}</td><td>{k.level_of(arr)}</td></tr>")
    table = ("<table border=1 cellpadding=4 style='border-collapse:collapse;font-family:sans-serif;font-size:13px'>"
             "<tr><th>kernel</th><th>array</th><th>dtype</th><th>axes</th><th>level</th></tr>" + "".join(rows) + "</table>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_esc(prog.name)}</title></head>"
            f"<body><h2 style='font-family:sans-serif'>{_esc(prog.name)}</h2>{render_svg(prog)}{table}</body></html>\n")
