"""`python -m iomodel` / `iomodel`: predict, tiles, pseudocode, draw, roofline, validate, gpus.

Every error a user can cause ends in one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ALGOS = ("flash-attention", "flash-attention-causal", "gqa", "attention-unfused", "matmul", "softmax")
DEFAULT_GPU = "h100-sxm"


class UsageError(ValueError):
    pass


def _errors():
    from diagrams.core import DiagramError
    from .hardware import HardwareError
    from .errors import ModelError
    return (UsageError, DiagramError, HardwareError, ModelError, FileNotFoundError, json.JSONDecodeError)


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def _add_problem_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--algo", default="flash-attention", choices=ALGOS, help="algorithm (default: flash-attention)")
    p.add_argument("--gpu", default=DEFAULT_GPU, help="spec key (h100-sxm, a100-sxm-80gb, ...), device name, or a TOML path")
    p.add_argument("--kernel", default="auto",
                   help="kernel family: flash_sm80, flash_sm90, unfused, matmul_sm80, softmax (auto: best for the GPU)")
    p.add_argument("--batch", type=_positive, default=4)
    p.add_argument("--heads", type=_positive, default=16)
    p.add_argument("--kv-heads", type=_positive, default=None, help="K/V heads (GQA); default = heads (4 for --algo gqa)")
    p.add_argument("--seqlen", type=_positive, default=4096, help="query length N_q")
    p.add_argument("--kv-seqlen", type=_positive, default=None, help="key length N_k (default = seqlen)")
    p.add_argument("--head-dim", type=_positive, default=128)
    p.add_argument("--m", type=_positive, default=8192, help="matmul rows")
    p.add_argument("--n", type=_positive, default=8192, help="matmul columns")
    p.add_argument("--k", type=_positive, default=8192, help="matmul contraction")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    p.add_argument("--calibration", default="auto", help="auto (shipped measurements for the GPU), none, or a TOML path")


def problem(args) -> tuple[list[str], dict]:
    """Kernel families to consider and the shape for the chosen algorithm."""
    if args.algo == "matmul":
        return ["matmul_sm80"], dict(M=args.m, N=args.n, K=args.k, dtype=args.dtype)
    if args.algo == "softmax":
        return ["softmax"], dict(rows=args.batch * args.heads * args.seqlen,
                                 cols=args.kv_seqlen or args.seqlen, dtype=args.dtype)
    kv = args.kv_heads or (max(1, args.heads // 4) if args.algo == "gqa" else args.heads)
    if args.heads % kv:
        raise UsageError(f"--heads ({args.heads}) must be a multiple of --kv-heads ({kv})")
    shape = dict(B=args.batch, H=args.heads, H_kv=kv, N_q=args.seqlen, N_k=args.kv_seqlen or args.seqlen,
                 d=args.head_dim, causal=args.algo == "flash-attention-causal", dtype=args.dtype)
    if args.algo == "attention-unfused":
        return ["unfused"], shape
    return ["flash_sm80", "flash_sm90"], shape


def _families(args, spec) -> list[str]:
    fams, _ = problem(args)
    if args.kernel != "auto":
        from . import families
        families.get(args.kernel)
        return [args.kernel]
    return [f for f in fams if not (f == "flash_sm90" and spec.wgmma is None)]


def _calibration(args):
    return None if args.calibration == "none" else args.calibration


def _fmt_time(t: float) -> str:
    return f"{t * 1e3:.3f} ms" if t >= 1e-4 else f"{t * 1e6:.1f} us"


def describe_prediction(pred, spec, evaluated: int | None = None) -> str:
    from . import families
    lines = []
    peak = spec.peak_tensor_flops(pred.shape.get("dtype", "bf16"))
    shape = ", ".join(f"{k}={v}" for k, v in pred.shape.items())
    lines.append(f"{pred.kernel} on {spec.name} ({spec.key})")
    lines.append(f"  shape        {shape}")
    lines.append(f"  calibration  {pred.calibration_used or 'none (datasheet rates)'}")
    how = f"best of {evaluated} searched" if evaluated else "given"
    fam = families.get(pred.kernel)
    lines.append(f"  tiles        {fam.label(pred.config)}   ({how}: "
                 + ", ".join(f"{k}={v}" for k, v in fam.tiles(pred.config).items()) + ")")
    lines.append(f"  predicted    {_fmt_time(pred.time_s)}, {pred.tflops:.1f} TFLOP/s "
                 f"({100 * pred.fraction_of_peak:.0f}% of the {peak / 1e12:.0f} TFLOP/s {pred.shape.get('dtype')} peak); "
                 f"bottleneck: {pred.bottleneck}")
    lines.append(f"  occupancy    {pred.blocks_per_sm:.0f} block(s)/SM (limited by {pred.occupancy_limit}), "
                 f"{pred.waves:.0f} wave(s) over {spec.sm_count} SMs; {pred.regs_per_thread:.0f} regs/thread, "
                 f"SMEM {pred.smem_bytes / 1024:.1f} KiB/block")
    terms = "  ".join(f"{k} {_fmt_time(v)}" for k, v in pred.terms.items())
    lines.append(f"  terms        {terms}   (busiest SM)")
    work = ", ".join(f"{u} {v / 1e9:.2f} G" for u, v in pred.executed_flops.items())
    lines.append(f"  work         {work}; HBM {pred.hbm_bytes / 1e6:.1f} MB compulsory, "
                 f"global traffic {pred.global_bytes / 1e6:.1f} MB")
    if len(pred.kernels) > 1:
        for k in pred.kernels:
            lines.append(f"    kernel {k['name']:<10} {_fmt_time(k['time_s'])}  bottleneck {k['bottleneck']}, "
                         f"{k['regs']:.0f} regs, SMEM {k['smem_bytes'] / 1024:.1f} KiB, {k['occupancy']:.0f} blocks/SM")
    if not pred.feasible:
        lines.append(f"  INFEASIBLE   {pred.reason}")
    return "\n".join(lines)


def cmd_predict(args) -> int:
    from .api import predict
    from .hardware import resolve_gpu
    from .peers import peer_prediction
    from .tiles import parse_tiles, search
    spec = resolve_gpu(args.gpu)
    _, shape = problem(args)
    fams = _families(args, spec)
    cal = _calibration(args)
    results = []
    for fam in fams:
        if args.tiles:
            pred = predict(fam, spec, shape, parse_tiles(fam, args.tiles), cal)
            if not pred.feasible:
                raise UsageError(f"tiles do not fit {spec.key}: {pred.reason}")
            results.append((pred, None))
        else:
            res = search(fam, spec, shape, calibration=cal, top=1)
            results.append((res.ranked[0], res.evaluated))
    results.sort(key=lambda r: r[0].time_s)
    if args.json:
        print(json.dumps([r[0].as_dict() for r in results], indent=2, default=float))
        return 0
    for pred, n in results:
        print(describe_prediction(pred, spec, n))
    if results[0][0].kernel.startswith("flash"):
        peer = peer_prediction("sdpa_flash", spec, results[0][0].shape, cal)
        if peer is not None:
            print(f"peer FlashAttention-2 (its stated tiles {peer.config.as_dict()}): predicted {peer.tflops:.1f} TFLOP/s, "
                  f"bottleneck {peer.bottleneck}")
    return 0


def cmd_tiles(args) -> int:
    from . import families
    from .hardware import resolve_gpu
    from .tiles import search
    spec = resolve_gpu(args.gpu)
    _, shape = problem(args)
    for fam in _families(args, spec):
        label = families.get(fam).label
        res = search(fam, spec, shape, calibration=_calibration(args), top=args.top,
                     progress=lambda m: print(m, file=sys.stderr))
        rejected = res.rejected()
        print(f"{fam} on {spec.key}: {res.evaluated} configurations, {len(rejected)} rejected, "
              f"{res.evaluated / max(res.seconds, 1e-9):,.0f} configs/s")
        print(f"  {'rank':>4}  {'tiles':<22} {'time':>10} {'TFLOP/s':>8}  {'bottleneck':<10} {'regs':>4} {'SMEM KiB':>8} {'blk/SM':>6}")
        for i, p in enumerate(res.ranked, 1):
            print(f"  {i:>4}  {label(p.config):<22} {_fmt_time(p.time_s):>10} {p.tflops:>8.1f}  "
                  f"{p.bottleneck:<10} {p.regs_per_thread:>4.0f} {p.smem_bytes / 1024:>8.1f} {p.blocks_per_sm:>6.0f}")
        if args.why:
            counts: dict[str, int] = {}
            for _c, r in rejected:
                key = r.split(" = ")[0]
                counts[key] = counts.get(key, 0) + 1
            print("  rejected:")
            for c, r in rejected[: args.why_limit]:
                print(f"    {label(c):<22} {r}")
            print("  rejections by reason: " + "; ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))
    return 0


def _shown_family(args) -> str:
    """The family whose loop nest pseudocode and draw show: --kernel when it is one of the algorithm's
    families, else the first (flash_sm80's warp-level nest for FlashAttention)."""
    fams, _ = problem(args)
    return args.kernel if args.kernel in fams else fams[0]


def _diagram_for(args):
    from diagrams import library
    if args.algo == "matmul":
        return library.tiled_matmul(warps="w")
    if args.algo == "softmax":
        return library.softmax().online_softmax().group("n", "rb").group("n", 1, "reg").stream("m", 128, "reg")
    if args.algo == "attention-unfused":
        return library.unfused_attention()
    fam = _shown_family(args)
    if fam != problem(args)[0][0]:  # another family asked for: its own diagram (the Hopper one: warpgroups)
        from . import families
        return families.get(fam).build(args.algo == "flash-attention-causal", args.algo == "gqa")
    kw = dict(kv_heads="Hk") if args.algo == "gqa" else {}
    return library.flash_attention(causal=args.algo == "flash-attention-causal", **kw)


def _values_for(args, spec) -> dict:
    """Concrete sizes for pseudocode: the shape plus the best tiles of the searched family."""
    from . import families
    from .problems import shape_symbols
    from .tiles import search
    _, shape = problem(args)
    fam = families.get(_shown_family(args))
    res = search(fam.name, spec, shape, calibration=_calibration(args), top=1)
    vals = {**shape_symbols(fam.problem, res.shape), **fam.symbol_values([res.ranked[0].config])}
    if args.algo == "matmul":
        vals = {"a": vals.pop("Ma"), "b": vals.pop("Kb"), "c": vals.pop("Nc"), **vals}
    if args.algo == "softmax":
        vals = {"n": vals.pop("R"), "m": vals.pop("C"), **vals}
    if args.algo != "gqa":
        vals.pop("Hk", None), vals.pop("g", None)
    return {k: int(v[0]) if hasattr(v, "__len__") else int(v) for k, v in vals.items()}


def cmd_pseudocode(args) -> int:
    from .hardware import resolve_gpu
    from .pseudocode import pseudocode
    d = _diagram_for(args)
    values = None if args.symbolic else _values_for(args, resolve_gpu(args.gpu))
    print(pseudocode(d, values), end="")
    return 0


def cmd_draw(args) -> int:
    from diagrams.render import render_html, render_svg
    d = _diagram_for(args)
    out = Path(args.out)
    text = render_html(d) if out.suffix.lower() in (".html", ".htm") else render_svg(d)
    out.write_text(text)
    print(f"wrote {out} ({len(text) / 1024:.0f} KiB)")
    return 0


def cmd_roofline(args) -> int:
    from . import families
    from .api import resolve_calibration
    from .hardware import resolve_gpu
    from .report import roofline_html
    from .tiles import search
    spec = resolve_gpu(args.gpu)
    cal = resolve_calibration(spec, _calibration(args))
    _, shape = problem(args)
    if "N_q" not in shape:
        raise UsageError("roofline draws attention points: use an attention --algo")
    points = []

    def add(label, pred, family):
        points.append(dict(label=label, flops=pred.flops, hbm_bytes=pred.hbm_bytes, time_s=pred.time_s,
                           kind="predicted", family=family))
    fams = ["flash_sm80"] + (["flash_sm90"] if spec.wgmma is not None else [])
    for fam in fams:
        res = search(fam, spec, shape, calibration=cal, top=args.top)
        for p in res.ranked:
            add(f"{fam} {families.get(fam).label(p.config)}", p, fam)
    ures = search("unfused", spec, {**shape, "H_kv": shape["H"]}, calibration=cal, top=1)
    add(f"unfused {families.get('unfused').label(ures.ranked[0].config)}", ures.ranked[0], "unfused")
    mres = search("matmul_sm80", spec, dict(M=args.m, N=args.n, K=args.k, dtype=args.dtype), calibration=cal, top=1)
    add(f"matmul {args.m}x{args.n}x{args.k} {families.get('matmul_sm80').label(mres.ranked[0].config)}",
        mres.ranked[0], "matmul")
    title = f"{spec.name}: attention B={shape['B']} H={shape['H']} N={shape['N_q']} d={shape['d']} {shape['dtype']}"
    Path(args.out).write_text(roofline_html(spec, points, title, calibration=cal))
    print(f"wrote {args.out}: {len(points)} points on the {spec.key} roofline")
    return 0


def cmd_validate(args) -> int:
    from .accuracy import evaluate
    from .accuracy_text import format_report
    from .results import ResultsError, load_results
    try:
        results = load_results(args.results)
    except ResultsError as exc:  # one line naming the file, like every other user error
        raise UsageError(str(exc)) from None
    report = evaluate(results, calibration=args.calibration, recompute=not args.stored)
    print(format_report(report))
    if args.html:
        from .files import write_text_atomic
        from .hardware import resolve_gpu
        from .report import validation_html
        spec = resolve_gpu(args.gpu or report.gpu_key or results[0].get("device", "?"))
        write_text_atomic(args.html, validation_html(report, spec))
        print(f"wrote {args.html}")
    return 0


def cmd_gpus(args) -> int:
    from .hardware import list_specs, load_spec
    for key in list_specs():
        print(load_spec(key).summary())
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (exit 2) instead of the usage block."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="iomodel", description="IO and performance models of diagrams on GPUs")
    sub = p.add_subparsers(dest="cmd", parser_class=_Parser)
    sp = sub.add_parser("predict", help="predict time and FLOP/s (default: FlashAttention forward on H100 SXM)")
    _add_problem_args(sp)
    sp.add_argument("--tiles", default=None, help="explicit tiles, e.g. block_m=128,block_n=64,warps=4,stages=2")
    sp.add_argument("--json", action="store_true", help="print the prediction(s) as JSON")
    sp.set_defaults(func=cmd_predict)
    st = sub.add_parser("tiles", help="search tile choices and rank them")
    _add_problem_args(st)
    st.add_argument("--top", type=_positive, default=10)
    st.add_argument("--why", action="store_true", help="also list rejected configurations and the reason")
    st.add_argument("--why-limit", type=_positive, default=30)
    st.set_defaults(func=cmd_tiles)
    ps = sub.add_parser("pseudocode", help="print the loop nest of the algorithm's partitioned diagram")
    _add_problem_args(ps)
    ps.add_argument("--symbolic", action="store_true", help="keep sizes as symbols")
    ps.set_defaults(func=cmd_pseudocode)
    dr = sub.add_parser("draw", help="draw the diagram as SVG or HTML")
    _add_problem_args(dr)
    dr.add_argument("--out", default="diagram.svg")
    dr.set_defaults(func=cmd_draw)
    rf = sub.add_parser("roofline", help="roofline page (self-contained plotly HTML)")
    _add_problem_args(rf)
    rf.add_argument("--out", default="roofline.html")
    rf.add_argument("--top", type=_positive, default=5)
    rf.set_defaults(func=cmd_roofline)
    va = sub.add_parser("validate", help="compare measured results with the current model (no GPU needed)")
    va.add_argument("results", nargs="+", help="results JSON files from python -m validation run")
    va.add_argument("--html", default=None, metavar="PAGE", help="also write a self-contained report page")
    va.add_argument("--gpu", "--gpu-spec", dest="gpu", default=None, metavar="KEY",
                    help="spec for the page's roofline (default: the GPU of the results)")
    va.add_argument("--calibration", default=None, metavar="FILE",
                    help="calibration to predict with (default: the one stored in each results file)")
    va.add_argument("--stored", action="store_true", help="use the predictions stored in the files, not recomputed")
    va.set_defaults(func=cmd_validate)
    gp = sub.add_parser("gpus", help="list the GPU spec files")
    gp.set_defaults(func=cmd_gpus)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cmd is None:
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except _errors() as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"iomodel: error: {msg}", file=sys.stderr)
        return 2
    except KeyError as e:
        print(f"iomodel: error: missing field {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
