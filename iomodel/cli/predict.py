"""`predict` and `tiles`: the model's time for the best (or given) tiles, and the ranked search space."""
from __future__ import annotations

import sys

from ..boundary import UsageError
from .problem import ALGO_FAMILIES, FLASH, calibration_for, checked, families_for, problem
from .reports import print_json


def format_duration(t: float) -> str:
    """A time in the unit that keeps it short: ns, us, ms, s, min or h (never a 17-digit count of
    milliseconds).  Between 1 us and 1 s the units are the ones the model's terms always used; a zero
    term stays in microseconds, beside its neighbours."""
    if 0 < t < 1e-6:
        return f"{t * 1e9:.1f} ns"
    if t < 1e-4:
        return f"{t * 1e6:.1f} us"
    if t < 1.0:
        return f"{t * 1e3:.3f} ms"
    if t < 60.0:
        return f"{t:.3f} s"
    if t < 3600.0:
        return f"{t / 60:.1f} min"
    return f"{t / 3600:.4g} h"


def describe_prediction(pred, spec, evaluated: int | None = None) -> str:
    from .. import families
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
    lines.append(f"  predicted    {format_duration(pred.time_s)}, {pred.tflops:.1f} TFLOP/s "
                 f"({100 * pred.fraction_of_peak:.0f}% of the {peak / 1e12:.0f} TFLOP/s {pred.shape.get('dtype')} peak); "
                 f"bottleneck: {pred.bottleneck}")
    spill = f" ({pred.spilled_regs:.0f} more spill to local memory)" if pred.spilled_regs else ""
    lines.append(f"  occupancy    {pred.blocks_per_sm:.0f} block(s)/SM (limited by {pred.occupancy_limit}), "
                 f"{pred.waves:.3g} wave(s) over {spec.sm_count} SMs; {pred.regs_per_thread:.0f} regs/thread{spill}, "
                 f"SMEM {pred.smem_bytes / 1024:.1f} KiB/block")
    terms = "  ".join(f"{k} {format_duration(v)}" for k, v in pred.terms.items())
    lines.append(f"  terms        {terms}   (busiest SM)")
    work = ", ".join(f"{u} {v / 1e9:.2f} G" for u, v in pred.executed_flops.items())
    lines.append(f"  work         {work}; HBM {pred.hbm_bytes / 1e6:.1f} MB (what L2 does not serve), "
                 f"global traffic {pred.global_bytes / 1e6:.1f} MB (L2)")
    if len(pred.kernels) > 1:
        for k in pred.kernels:
            lines.append(f"    kernel {k['name']:<10} {format_duration(k['time_s'])}  bottleneck {k['bottleneck']}, "
                         f"{k['regs']:.0f} regs, SMEM {k['smem_bytes'] / 1024:.1f} KiB, {k['occupancy']:.0f} blocks/SM")
    if not pred.feasible:
        lines.append(f"  INFEASIBLE   {pred.reason}")
    return "\n".join(lines)


def _check_tiles_kernel(args) -> None:
    """--tiles are one family's sizes: with more than one family for the algorithm, --kernel says which."""
    from .. import families

    fams = ALGO_FAMILIES[args.algo]
    if args.tiles and args.kernel == "auto" and len(fams) > 1:
        sizes = "; ".join(f"{f}: {', '.join(families.get(f).space)}" for f in fams)
        raise UsageError(f"--tiles needs --kernel to say whose tiles they are ({sizes})")


def _predictions(args, spec, shape, cal) -> list:
    """(prediction, configs searched or None when the tiles were given) per family, fastest first."""
    from ..api import predict
    from ..tiles import parse_tiles, search

    from ..errors import ModelError

    results, nothing = [], []
    names = families_for(args, spec)
    for fam in names:
        if args.tiles:
            pred = predict(fam, spec, shape, parse_tiles(fam, args.tiles), cal)
            if not pred.feasible:
                raise UsageError(f"tiles do not fit {spec.key}: {pred.reason}")
            results.append((pred, None))
            continue
        try:
            res = search(fam, spec, shape, calibration=cal, top=1)
        except ModelError as exc:  # one family with nothing that fits: the others still answer
            if len(names) == 1:
                raise
            nothing.append(str(exc))
            continue
        results.append((res.ranked[0], res.evaluated))
    if not results:
        raise ModelError("; ".join(nothing))
    for why in nothing:
        print(f"iomodel: note: {why}", file=sys.stderr)
    return sorted(results, key=lambda r: r[0].time_s)


def cmd_predict(args) -> int:
    from ..hardware import resolve_gpu
    from ..peers import peer_prediction

    checked(args)
    _check_tiles_kernel(args)
    spec = resolve_gpu(args.gpu)
    _, shape = problem(args)
    cal = calibration_for(args.calibration, spec, args.force_calibration)
    results = _predictions(args, spec, shape, cal)
    if args.json:
        print_json([pred.as_dict() for pred, _n in results])
        return 0
    for pred, n in results:
        print(describe_prediction(pred, spec, n))
    if results[0][0].kernel in FLASH:   # the forward families the peer (FlashAttention-2's forward) is one of
        peer = peer_prediction("sdpa_flash", spec, results[0][0].shape, cal)  # a forward peer: not the backward's
        if peer is not None:
            print(f"peer FlashAttention-2 (its stated tiles {peer.config.as_dict()}): predicted {peer.tflops:.1f} TFLOP/s, "
                  f"bottleneck {peer.bottleneck}")
    return 0


def _search_dict(res, label, why_limit: int | None) -> dict:
    """A search as JSON: the SearchResult's fields, its ranked Predictions, and (with --why) the
    rejected configurations with their reasons."""
    out = {"kernel": res.kernel, "gpu": res.gpu, "shape": res.shape, "evaluated": res.evaluated,
           "seconds": res.seconds, "rejected_count": len(res.rejected()),
           "ranked": [p.as_dict() for p in res.ranked]}
    if why_limit is not None:
        out["rejected"] = [{"config": label(c), "reason": r} for c, r in res.rejected()[:why_limit]]
    return out


def _print_search(res, label, args) -> None:
    rejected = res.rejected()
    print(f"{res.kernel} on {res.gpu}: {res.evaluated} configurations, {len(rejected)} rejected, "
          f"{res.evaluated / max(res.seconds, 1e-9):,.0f} configs/s")
    print(f"  {'rank':>4}  {'tiles':<22} {'time':>10} {'TFLOP/s':>8}  {'bottleneck':<10} {'regs':>4} {'SMEM KiB':>8} {'blk/SM':>6}")
    for i, p in enumerate(res.ranked, 1):
        print(f"  {i:>4}  {label(p.config):<22} {format_duration(p.time_s):>10} {p.tflops:>8.1f}  "
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


WHY_LIMIT = 30


def cmd_tiles(args) -> int:
    from .. import families
    from ..hardware import resolve_gpu
    from ..tiles import search

    checked(args)
    if args.why_limit is not None and not args.why:
        raise UsageError("--why-limit not used without --why")
    args.why_limit = args.why_limit or WHY_LIMIT
    spec = resolve_gpu(args.gpu)
    _, shape = problem(args)
    cal = calibration_for(args.calibration, spec, args.force_calibration)
    found = []
    for fam in families_for(args, spec):
        res = search(fam, spec, shape, calibration=cal, top=args.top, progress=lambda m: print(m, file=sys.stderr))
        found.append((res, families.get(fam).label))
    if args.json:
        print_json([_search_dict(res, label, args.why_limit if args.why else None) for res, label in found])
        return 0
    for res, label in found:
        _print_search(res, label, args)
    return 0
