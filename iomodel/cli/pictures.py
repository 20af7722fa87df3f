"""`pseudocode`, `draw` and `roofline`: the algorithm's loop nest, its diagram, and the roofline page."""
from __future__ import annotations

import sys

from .diagram_args import USER_ALGO, diagram_families, is_diagram_algo
from .problem import (ALGO_FAMILIES, DECODE_ALGOS, FLASH, MATMUL_SIZES, calibration_for, checked, is_causal, is_gqa,
                      no_attention_options, problem, refuse_gpu_options, score_mod_fields, uses_diagram,
                      window_fields)
from .reports import PAGE_FORMATS

DRAW_FORMATS = {".svg": "svg", ".html": "html", ".htm": "html"}


def _shown_family(args) -> str:
    """The family whose loop nest pseudocode and draw show: --kernel (checked to be one of the
    algorithm's), else the first (flash_sm80's warp-level nest for FlashAttention; a diagram
    algorithm's mma_sync style)."""
    if uses_diagram(args):
        return diagram_families(args, None)[0]
    return args.kernel if args.kernel != "auto" else ALGO_FAMILIES[args.algo][0]


def _diagram_for(args):
    from diagrams import library
    no_attention_options(args)
    if uses_diagram(args):
        from .. import families
        return families.get(_shown_family(args)).build_for_dtype(getattr(args, "dtype", None) or "bf16")
    if args.algo == "matmul":
        return library.tiled_matmul(warps="w")
    if args.algo == "softmax":
        return library.softmax().online_softmax().group("n", "rb").group("n", 1, "reg").stream("m", 128, "reg")
    if args.algo == "attention-unfused":
        _variant_shape(args)   # (its family draws no window and no score modifier: refused by name)
        return library.unfused_attention()
    # the family's own diagram: its symbols are the ones the search sets (the Hopper one: warpgroups; the backward)
    return _variant_diagram(args)


def _variant_shape(args) -> dict:
    """The variant the options ask of the shown family (causal, grouped heads, a window, score modifiers; no sizes
    needed), a feature the family lacks refused by name."""
    from .. import families
    from ..problems import check_features

    shape = {"H": 2 if is_gqa(args) else 1, "H_kv": 1, "causal": is_causal(args),
             "dtype": getattr(args, "dtype", None) or "bf16", **window_fields(args), **score_mod_fields(args)}
    check_features(families.get(_shown_family(args)), shape)
    return shape


def _variant_diagram(args):
    """The shown family's diagram of the variant the options ask for: the one its model derives
    (``api.shape_diagram``)."""
    from ..api import shape_diagram

    return shape_diagram(_shown_family(args), _variant_shape(args))


def _values_for(args, spec, cal) -> dict:
    """Concrete sizes for pseudocode: the shape plus the best tiles of the searched family."""
    from ..api import symbol_values
    from ..tiles import search
    _, shape = problem(args)
    kernel = _shown_family(args)
    res = search(kernel, spec, shape, calibration=cal, top=1)
    vals = symbol_values(kernel, res.shape, [res.ranked[0].config])
    if uses_diagram(args):
        return {k: int(v[0]) if hasattr(v, "__len__") else int(v) for k, v in vals.items()}
    if args.algo == "matmul":
        vals = {"a": vals.pop("Ma"), "b": vals.pop("Kb"), "c": vals.pop("Nc"), **vals}
    if args.algo == "softmax":
        vals = {"n": vals.pop("R"), "m": vals.pop("C"), **vals}
    if not is_gqa(args) and args.algo not in DECODE_ALGOS:   # the decode diagram always packs a KV head's g heads
        vals.pop("Hk", None), vals.pop("g", None)
    return {k: int(v[0]) if hasattr(v, "__len__") else int(v) for k, v in vals.items()}


def cmd_pseudocode(args) -> int:
    from ..hardware import resolve_gpu
    from ..pseudocode import pseudocode

    if args.symbolic:
        refuse_gpu_options(args, "--symbolic keeps every size a symbol")
    checked(args)
    d = _diagram_for(args)
    values = None
    if not args.symbolic:
        spec = resolve_gpu(args.gpu)
        values = _values_for(args, spec, calibration_for(args.calibration, spec, args.force_calibration))
    print(pseudocode(d, values), end="")
    return 0


def cmd_draw(args) -> int:
    from diagrams.render import render_html, render_svg

    from ..files import check_output

    out = check_output(args.out, DRAW_FORMATS, what="--out")
    checked(args)
    d = _diagram_for(args)
    text = render_html(d) if out.format == "html" else render_svg(d)
    out.write(text)
    if not out.stdout:
        print(f"wrote {out} ({len(text) / 1024:.0f} KiB)")
    return 0


def _points(args, spec, cal, shape) -> list[dict]:
    """The roofline's points: the top flash configurations of every family the GPU runs, the unfused
    attention (when its N x N scores fit the GPU) and a matmul."""
    from .. import families
    from ..limits import fit_problem
    from ..tiles import search

    points = []

    def add(label, pred, family):
        points.append(dict(label=label, flops=pred.flops, hbm_bytes=pred.hbm_bytes, time_s=pred.time_s,
                           kind="predicted", family=family))
    for fam in (f for f in FLASH if not families.get(f).gpu_problem(spec)):
        for p in search(fam, spec, shape, calibration=cal, top=args.top).ranked:
            add(f"{fam} {families.get(fam).label(p.config)}", p, fam)
    unfused, ushape = families.get("unfused"), {**shape, "H_kv": shape["H"]}
    why = fit_problem(unfused, spec, ushape)
    if why:  # the flash points are what the page is for: it goes on without this one, and says so
        print(f"iomodel: note: no unfused point: {why}", file=sys.stderr)
    else:
        best = search("unfused", spec, ushape, calibration=cal, top=1).ranked[0]
        add(f"unfused {unfused.label(best.config)}", best, "unfused")
    mm = families.get("matmul_sm80")
    best = search(mm.name, spec, dict(M=args.m, N=args.n, K=args.k, dtype=args.dtype), calibration=cal, top=1).ranked[0]
    add(f"matmul {args.m}x{args.n}x{args.k} {mm.label(best.config)}", best, "matmul")
    return points


def _diagram_points(args, spec, cal, shape) -> list[dict]:
    """A diagram algorithm's points: the top configurations of each kernel style the GPU runs."""
    from .. import families
    from ..tiles import search

    points = []
    for fam in diagram_families(args, spec):
        for p in search(fam, spec, shape, calibration=cal, top=args.top).ranked:
            points.append(dict(label=f"{fam} {families.get(fam).label(p.config)}", flops=p.flops,
                               hbm_bytes=p.hbm_bytes, time_s=p.time_s, kind="predicted", family=fam))
    return points


def cmd_roofline(args) -> int:
    from ..files import check_output
    from ..hardware import resolve_gpu
    from ..report import roofline_html

    out = check_output(args.out, PAGE_FORMATS, what="--out")
    args.kernel = "auto"
    diagram = is_diagram_algo(args.algo or ("diagram" if args.diagram else ""))
    checked(args, reads_sizes=() if diagram else MATMUL_SIZES)
    spec = resolve_gpu(args.gpu)
    cal = calibration_for(args.calibration, spec, args.force_calibration)
    _, shape = problem(args)
    if diagram:
        points = _diagram_points(args, spec, cal, shape)
        sizes = " ".join(f"{k}={v}" for k, v in shape.items() if k not in ("dtype", "causal"))
        title = f"{spec.name}: {args.algo if args.algo != USER_ALGO else args.diagram} {sizes} {shape['dtype']}"
        out.write(roofline_html(spec, points, title, calibration=cal))
        if not out.stdout:
            print(f"wrote {out}: {len(points)} points on the {spec.key} roofline")
        return 0
    points = _points(args, spec, cal, shape)
    title = f"{spec.name}: attention B={shape['B']} H={shape['H']} N={shape['N_q']} d={shape['d']} {shape['dtype']}"
    out.write(roofline_html(spec, points, title, calibration=cal))
    if not out.stdout:
        print(f"wrote {out}: {len(points)} points on the {spec.key} roofline")
    return 0
