"""Self-contained HTML pages: rooflines and predicted-vs-measured comparisons.

Pages embed the plotly.js bundle (``include_plotlyjs=True``) so they open offline; each plot has an HTML table of
its numbers beside it.  plotly is imported inside the drawing functions only (it is not on the GPU machine).

``points`` given to :func:`roofline_html` are dicts with ``label``, ``flops`` (FLOPs of the run), ``hbm_bytes``
(bytes moved to and from HBM), ``time_s``, ``kind`` (``"predicted"`` or ``"measured"``) and ``family`` (legend
group).  A point sits at x = flops / hbm_bytes (FLOP per HBM byte) and y = flops / time_s (FLOP/s).
"""

from __future__ import annotations

import html
import math
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["roofline_html", "validation_html", "roofline_ceilings"]

_PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22"]
_KINDS = ("predicted", "measured")


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt(v: float | None, unit: str = "", digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    av = abs(v)
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if av >= scale:
            return f"{v / scale:.{digits}g} {prefix}{unit}"
    return f"{v:.{digits}g} {unit}".rstrip()


def _fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    if t >= 1:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    return f"{t * 1e6:.1f} µs"


def roofline_ceilings(spec, calibration=None, dtype: str = "bf16",
                      exp_head_dims: Sequence[int] = (64, 128)) -> dict[str, list[dict[str, Any]]]:
    """The roofs as data: ``{"bandwidth": [...], "compute": [...]}``.

    bandwidth roofs: ``{name, bytes_per_s, source}``, drawn as y = bytes_per_s * x;
    compute ceilings: ``{name, flops, source}``, horizontal lines."""
    from .problems import conventional_flops

    bw = [{"name": "HBM roof (datasheet)", "bytes_per_s": spec.hbm_bandwidth, "source": "datasheet", "style": "solid"},
          {"name": "SMEM roof (all SMs; x read as FLOP per SMEM byte)", "bytes_per_s": spec.peak_smem_bandwidth,
           "source": f"datasheet: {spec.smem_bytes_per_clk_per_sm:.0f} B/clk/SM x SMs x clock", "style": "dot"}]
    comp = [{"name": f"tensor core {dtype} (datasheet)", "flops": spec.peak_tensor_flops(dtype), "source": "datasheet",
             "style": "solid"}]
    clock = spec.clock_hz
    exp2_rate = spec.peak_exp2_per_s
    if calibration is not None:
        if calibration.clock_hz:
            clock = calibration.clock_hz
        if calibration.copy_bandwidth:
            bw.append({"name": "HBM copy (calibrated, read + write)", "bytes_per_s": calibration.copy_bandwidth,
                       "source": "calibration", "style": "dash"})
        if calibration.gemm_flops:
            comp.append({"name": "bf16 GEMM through torch (calibrated)", "flops": calibration.gemm_flops,
                         "source": "calibration", "style": "dash"})
        if calibration.mma_sync_flops_per_clk_per_sm:
            comp.append({"name": "mma.sync (calibrated)",
                         "flops": calibration.mma_sync_flops_per_clk_per_sm * spec.sm_count * clock,
                         "source": f"calibration, at {clock / 1e6:.0f} MHz", "style": "dashdot"})
        if calibration.exp2_per_clk_per_sm:
            exp2_rate = calibration.exp2_per_clk_per_sm * spec.sm_count * clock
    for d in exp_head_dims:
        # one exp per attention score, and the conventional FLOPs of one score (4d)
        per_score = conventional_flops({"B": 1, "H": 1, "N_q": 1, "N_k": 1, "d": d})
        comp.append({"name": f"exp2 bound, attention d={d} (4d FLOP per exp)", "flops": exp2_rate * per_score,
                     "source": "MUFU ex2 rate x 4d", "style": "longdash"})
    return {"bandwidth": bw, "compute": comp}


def _point_xy(p: Mapping[str, Any]) -> tuple[float | None, float | None]:
    try:
        x = float(p["flops"]) / float(p["hbm_bytes"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        x = None
    try:
        y = float(p["flops"]) / float(p["time_s"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        y = None
    if x is not None and not (math.isfinite(x) and x > 0):
        x = None
    if y is not None and not (math.isfinite(y) and y > 0):
        y = None
    return x, y


def _hover(p: Mapping[str, Any], x: float | None, y: float | None) -> str:
    bits = [f"<b>{_esc(p.get('label', '?'))}</b>", f"{_esc(p.get('kind', ''))} · {_esc(p.get('family', ''))}",
            f"FLOPs: {_fmt(p.get('flops'))}", f"HBM bytes: {_fmt(p.get('hbm_bytes'), 'B')}",
            f"intensity: {x:.4g} FLOP/B" if x else "intensity: -",
            f"time: {_fmt_time(p.get('time_s'))}",
            f"rate: {y / 1e12:.1f} TFLOP/s" if y else "rate: -"]
    for k, v in p.items():
        if k not in ("label", "kind", "family", "flops", "hbm_bytes", "time_s") and isinstance(v, (int, float, str)):
            bits.append(f"{_esc(k)}: {_esc(v)}")
    return "<br>".join(bits)


def _roofline_figure(spec, points: Sequence[Mapping[str, Any]], title: str, calibration=None, dtype: str = "bf16"):
    import plotly.graph_objects as go

    roofs = roofline_ceilings(spec, calibration, dtype)
    xy = [_point_xy(p) for p in points]
    xs = [x for x, _ in xy if x]
    ys = [y for _, y in xy if y]
    peak = max(c["flops"] for c in roofs["compute"] if "tensor" in c["name"])
    ridge = peak / spec.hbm_bandwidth
    xlo = min(xs + [ridge / 30.0]) / 3.0
    xhi = max(xs + [ridge * 30.0]) * 3.0
    ylo = min(ys + [peak / 1e3]) / 3.0
    yhi = max(ys + [c["flops"] for c in roofs["compute"]]) * 2.0

    fig = go.Figure()
    n = 64
    grid = [xlo * (xhi / xlo) ** (i / (n - 1)) for i in range(n)]
    for r in roofs["bandwidth"]:
        fig.add_trace(go.Scatter(
            x=grid, y=[r["bytes_per_s"] * g for g in grid], mode="lines", name=r["name"],
            line=dict(color="#444", dash=r["style"], width=1.5),
            hovertemplate=f"{_esc(r['name'])}: {r['bytes_per_s'] / 1e12:.3g} TB/s<br>x=%{{x:.3g}} FLOP/B, "
                          f"y=%{{y:.3g}} FLOP/s<extra></extra>"))
    for c in roofs["compute"]:
        color = "#aa3333" if "tensor" in c["name"] or "GEMM" in c["name"] or "mma" in c["name"] else "#7a5c00"
        fig.add_trace(go.Scatter(
            x=[xlo, xhi], y=[c["flops"], c["flops"]], mode="lines", name=c["name"],
            line=dict(color=color, dash=c["style"], width=1.5),
            hovertemplate=f"{_esc(c['name'])}: {c['flops'] / 1e12:.1f} TFLOP/s<extra></extra>"))
    families = []
    for p in points:
        fam = str(p.get("family", "?"))
        if fam not in families:
            families.append(fam)
    for fam_i, fam in enumerate(families):
        color = _PALETTE[fam_i % len(_PALETTE)]
        for kind in _KINDS + tuple(sorted({str(p.get("kind")) for p in points} - set(_KINDS))):
            sel = [(p, x, y) for p, (x, y) in zip(points, xy)
                   if str(p.get("family", "?")) == fam and str(p.get("kind")) == kind and x and y]
            if not sel:
                continue
            fig.add_trace(go.Scatter(
                x=[x for _, x, _ in sel], y=[y for _, _, y in sel], mode="markers", name=f"{fam} ({kind})",
                legendgroup=fam,
                marker=dict(color=color, size=9, symbol="circle-open" if kind == "predicted" else "circle",
                            line=dict(width=2, color=color)),
                text=[_hover(p, x, y) for p, x, y in sel], hovertemplate="%{text}<extra></extra>"))
    fig.update_layout(
        title=title, template="plotly_white", height=560,
        xaxis=dict(type="log", title="arithmetic intensity (FLOP per HBM byte)", range=[math.log10(xlo), math.log10(xhi)]),
        yaxis=dict(type="log", title="FLOP/s", range=[math.log10(ylo), math.log10(yhi)]),
        legend=dict(font=dict(size=10)), margin=dict(l=60, r=20, t=50, b=50))
    return fig, roofs


def _html_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "nums") -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "\n".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>'


_CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.pair { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
.plot { flex: 3 1 620px; min-width: 0; order: 1; }
.side { flex: 2 1 380px; min-width: 0; max-height: 620px; overflow: auto; order: 2; }
table.nums { border-collapse: collapse; font-size: 0.82em; }
table.nums th, table.nums td { border-bottom: 1px solid #ddd; padding: 2px 8px; text-align: right; white-space: nowrap; }
table.nums th:first-child, table.nums td:first-child { text-align: left; }
.note { color: #666; font-size: 0.85em; }
"""


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)}</title><style>{_CSS}</style></head>\n<body>\n<h1>{_esc(title)}</h1>\n"
            f"{body}\n</body></html>\n")


def _roofline_block(spec, points, title, calibration, dtype, include_js: bool) -> str:
    fig, roofs = _roofline_figure(spec, points, title, calibration, dtype)
    plot = fig.to_html(include_plotlyjs=True if include_js else False, full_html=False,
                       config={"displaylogo": False})
    ceil_rows = [[r["name"], f"{r['bytes_per_s'] / 1e12:.3f} TB/s", r["source"]] for r in roofs["bandwidth"]]
    ceil_rows += [[c["name"], f"{c['flops'] / 1e12:.1f} TFLOP/s", c["source"]] for c in roofs["compute"]]
    pt_rows = []
    for p in points:
        x, y = _point_xy(p)
        pt_rows.append([p.get("label", "?"), p.get("family", ""), p.get("kind", ""), _fmt(p.get("flops")),
                        _fmt(p.get("hbm_bytes"), "B"), f"{x:.4g}" if x else "-", _fmt_time(p.get("time_s")),
                        f"{y / 1e12:.1f}" if y else "-"])
    side = ("<h3>Ceilings</h3>" + _html_table(["roof", "value", "source"], ceil_rows)
            + "<h3>Points</h3>" + _html_table(["label", "family", "kind", "FLOPs", "HBM bytes", "FLOP/B",
                                                "time", "TFLOP/s"], pt_rows))
    # the table comes first in the page so that plotly sizes the plot to the space left beside it
    return f'<div class="pair"><div class="side">{side}</div><div class="plot">{plot}</div></div>'


def roofline_html(spec, points: Sequence[Mapping[str, Any]], title: str, calibration=None,
                  dtype: str = "bf16") -> str:
    """A full offline HTML page: log-log roofline of ``points`` on ``spec``
    (HBM and SMEM roofs, tensor-core ceiling from the datasheet and, with a
    calibration, the measured GEMM / mma.sync / copy ceilings; exp2 bounds of
    attention as FLOP/s-equivalents), with a table of every number beside it."""
    body = _roofline_block(spec, points, title, calibration, dtype, include_js=True)
    body += (f'<p class="note">{_esc(spec.name)} ({_esc(spec.key)}): {spec.sm_count} SMs at '
             f"{spec.clock_hz / 1e6:.0f} MHz, HBM {spec.hbm_bandwidth / 1e12:.2f} TB/s. Predicted points are "
             "hollow, measured points filled.</p>")
    return _page(title, body)


def _report_calibration(report):
    """The first calibration stored with the results, or None (also when it does not parse)."""
    from .hardware import HardwareError, calibration_from_dict

    if not report.calibrations:
        return None
    try:
        c = dict(report.calibrations[0])
        c.pop("source", None)
        return calibration_from_dict(c)
    except HardwareError:
        return None


def _validation_points(report) -> list[dict[str, Any]]:
    """Roofline points of the rows: each measured and, where there is one, its prediction."""
    from .results import shape_label

    points = []
    for r in report.rows:
        label = f"{r.kernel} {r.config_label} {shape_label(r.shape)}"
        extra = {"error %": round(r.err_pct, 1) if r.err_pct is not None else "-",
                 "bottleneck": r.bottleneck or "-"}
        if r.hbm_bytes:
            points.append({"label": label, "flops": r.flops, "hbm_bytes": r.hbm_bytes, "time_s": r.measured_s,
                           "kind": "measured", "family": r.kernel, **extra})
            if r.predicted_s:
                points.append({"label": label, "flops": r.flops, "hbm_bytes": r.hbm_bytes,
                               "time_s": r.predicted_s, "kind": "predicted", "family": r.kernel, **extra})
    return points


def _time_range_ms(rows) -> tuple[float, float]:
    """Axis range of the predicted-vs-measured plot: every time of `rows` with a margin."""
    if not rows:
        return 1e-2, 1e2
    lo = min(min(r.measured_s, r.predicted_s) for r in rows) * 1e3 / 1.5
    hi = max(max(r.measured_s, r.predicted_s) for r in rows) * 1e3 * 1.5
    return lo, hi


def _scatter_hover(r) -> str:
    from .results import shape_label

    return (f"<b>{_esc(r.kernel)} {_esc(r.config_label)}</b><br>{_esc(shape_label(r.shape))}<br>"
            f"measured {r.measured_s * 1e3:.3f} ms ({r.measured_tflops:.1f} TFLOP/s)<br>"
            f"predicted {r.predicted_s * 1e3:.3f} ms ({r.predicted_tflops:.1f} TFLOP/s)<br>"
            f"error {r.err_pct:+.1f}%<br>bottleneck {_esc(r.bottleneck or '-')}")


def _prediction_scatter_html(report) -> str:
    """Predicted against measured time of every predicted row, with the y = x and ±10% lines."""
    import plotly.graph_objects as go

    from .accuracy import OUR_KERNELS, PEER_KERNELS

    sc = go.Figure()
    rows = [r for r in report.rows if r.predicted_s]
    lo, hi = _time_range_ms(rows)
    for f, name, dash in ((1.0, "y = x", "solid"), (1.1, "+10%", "dot"), (0.9, "-10%", "dot")):
        sc.add_trace(go.Scatter(x=[lo, hi], y=[lo * f, hi * f], mode="lines", name=name,
                                line=dict(color="#888", dash=dash, width=1), hoverinfo="skip"))
    # our kernels and the peers in their usual order, then any other kernel the results name
    kernels = [k for k in OUR_KERNELS + PEER_KERNELS if any(r.kernel == k for r in rows)]
    kernels += sorted({r.kernel for r in rows} - set(kernels))
    for i, k in enumerate(kernels):
        sel = [r for r in rows if r.kernel == k]
        sc.add_trace(go.Scatter(
            x=[r.measured_s * 1e3 for r in sel], y=[r.predicted_s * 1e3 for r in sel], mode="markers", name=k,
            marker=dict(color=_PALETTE[i % len(_PALETTE)], size=8,
                        symbol="diamond" if k in PEER_KERNELS else "circle"),
            text=[_scatter_hover(r) for r in sel],
            hovertemplate="%{text}<extra></extra>"))
    sc.update_layout(title="Predicted vs measured time", template="plotly_white", height=560,
                     xaxis=dict(type="log", title="measured time (ms)"),
                     yaxis=dict(type="log", title="predicted time (ms)"), margin=dict(l=60, r=20, t=50, b=50))
    return sc.to_html(include_plotlyjs=False, full_html=False, config={"displaylogo": False})


def _tile_choice_html(report) -> str:
    """The section ranking every family's configurations of a shape together ("" without such groups)."""
    from .accuracy_text import group_cells
    from .results import shape_label

    if not report.shape_groups:
        return ""
    choice_rows = [[shape_label(g.shape), g.n, *group_cells(g)] for g in report.shape_groups]
    hits = sum(1 for g in report.shape_groups if g.top1)
    mean_all = "-" if report.pooled_spearman_all is None else f"{report.pooled_spearman_all:+.3f}"
    return ("<h2>Kernel and tile choice</h2><p class=\"note\">Every family's configurations of one shape "
            "ranked together: the choice <code>python -m iomodel predict</code> makes.</p>"
            + _html_table(["shape", "configs", "Spearman", "model's top", "best measured", "top-1 within 5%"],
                          choice_rows)
            + f"<p>mean Spearman: {mean_all}; top-1 within 5%: {hits}/{len(report.shape_groups)}</p>")


def _peers_html(report) -> str:
    """Each family's pick of each shape against each peer, then over the files ("" without peer rows)."""
    from .accuracy_text import OVER_THE_RUNS, parity_table, peer_ratio_summary, peer_ratio_table

    headers, rows, summary = parity_table(report)
    over = f"<h2>{_esc(OVER_THE_RUNS)}</h2>" + _html_table(headers, rows) + f"<p>{_esc(summary)}</p>" if rows else ""
    return "" if not report.peer_ratios else (
        "<h2>Against the peers</h2><p class=\"note\">Each peer's measured time over that of the row the model picks "
        "among a family's; above 1: ours faster.</p>" + _html_table(*peer_ratio_table(report))
        + f"<p>{_esc(peer_ratio_summary(report))}</p>" + over)


def _rows_table_html(report) -> str:
    """Every row: measured, predicted, error and where the prediction came from."""
    from .accuracy_text import row_cells

    row_rows = [row_cells(r) + [r.prediction_source or (r.prediction_error or "none")] for r in report.rows]
    return _html_table(["kernel", "config", "shape", "measured ms", "measured TFLOP/s", "predicted ms",
                        "predicted TFLOP/s", "error", "bottleneck", "prediction"], row_rows)


def _failed_and_notes_html(report) -> str:
    """The rows that did not run and the notes of the results ("" for each that is empty)."""
    from .accuracy_text import failed_cells

    failed = ""
    if report.failed:
        failed = "<h2>Rows not ok</h2>" + _html_table(["kernel", "config", "shape", "error"],
                                                        [failed_cells(f) for f in report.failed])
    notes = ""
    if report.notes:
        notes = "<h2>Notes</h2><ul>" + "".join(f"<li>{_esc(n)}</li>" for n in report.notes) + "</ul>"
    return failed + notes


def validation_html(report, spec, title: str | None = None) -> str:
    """The validation page: roofline with measured beside predicted points,
    predicted-vs-measured time (y = x and ±10% bands), and the statistics."""
    from .accuracy import MIN_GROUP
    from .accuracy_text import group_cells, stats_rows
    from .results import shape_label

    title = title or f"iomodel validation on {', '.join(report.devices) or spec.name}"
    cal = _report_calibration(report)
    points = _validation_points(report)
    roof = _roofline_block(spec, points, f"Roofline: {spec.name}", cal, "bf16", include_js=True)
    sc_html = _prediction_scatter_html(report)

    stats = _html_table(["rows", "n", "median |error|", "max |error|", "mean signed"], stats_rows(report))
    group_rows = [[g.kernel, shape_label(g.shape), g.n, *group_cells(g)] for g in report.groups]
    groups = _html_table(["kernel", "shape", "configs", "Spearman", "model's top", "best measured",
                          "top-1 within 5%"], group_rows)
    pooled = "-" if report.pooled_spearman is None else f"{report.pooled_spearman:+.3f}"
    choice = _tile_choice_html(report)
    rows_t = _rows_table_html(report)
    how = "recomputed with the current model" if report.recomputed else "as stored in the results"
    body = (
        f'<p class="note">Predictions {how}. Error = (predicted - measured) / measured time. '
        f"Rank statistics over each kernel x shape timed with at least {MIN_GROUP} configs.</p>"
        f"<h2>Accuracy</h2>{stats}"
        f"<h2>Tile ranking</h2>{groups}<p>pooled mean Spearman: {pooled}; top-1 within 5%: "
        f"{report.top1_hits}/{report.top1_total}</p>{choice}{_peers_html(report)}"
        f"<h2>Roofline</h2>{roof}"
        f'<h2>Predicted vs measured</h2><div class="pair"><div class="side">{rows_t}</div>'
        f'<div class="plot">{sc_html}</div></div>'
        f"{_algorithms_html(report)}{_failed_and_notes_html(report)}"
    )
    return _page(title, body)


def _algorithms_html(report) -> str:
    """The PyTorch peers of the library's algorithms, then our backward kernels ("" without such rows)."""
    from .accuracy_text import BACKWARD_TITLE, algo_sections, backward_ranking

    line = backward_ranking(report)
    return "".join(f"<h2>{_esc(title)}</h2>" + _html_table(headers, rows)
                   + (f"<p>{_esc(line)}</p>" if title == BACKWARD_TITLE and line else "")
                   for title, headers, rows in algo_sections(report))
