"""``python -m validation run``: the GPU sweep (or ``--dry-run``, the same sweep with fake kernels).

  python -m validation run [--gpu KEY] [--quick] [--only flash_sm80,peers] [--out FILE.json]
  python -m validation run --dry-run            # no torch, no GPU

Reading the results (anywhere, CPU only) is ``python -m iomodel validate RESULTS.json ... [--html PAGE]``.
``--help`` works without torch: torch, CuPy and the kernels are imported only when a real run starts.
Errors go through :mod:`iomodel.boundary`, as ``iomodel``'s do: one line, exit status 2 (docs/cli.md).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

from iomodel import families as _registry
from iomodel.boundary import ArgParser, UsageError, package_version, run_main

from .plan import DEFAULT_ONLY, ONLY_CHOICES, make_shape

REPORT_HINT = "to read results: python -m iomodel validate RESULTS.json ... [--html PAGE] (no GPU needed)"
EXAMPLES = ("examples:\n  python -m validation run                      # every shape, on the GPU torch sees\n"
            "  python -m validation run --quick --only flash_sm90,peers --out run.json\n"
            "  python -m validation run --dry-run --json     # no torch, no GPU: the sweep with fake kernels\n"
            "  python -m validation run --no-ceilings --calibration h100-sxm --shape 8192:128:causal\n"
            "  python -m validation run --only decode      # decode over a KV cache: ours and SDPA's, a read roof\n"
            "  python -m validation run --only varlen      # packed variable-length prefill: ours, dense, torch's\n")
# the head dims some shipped kernel runs (the sweep's families)
HEAD_DIMS = sorted({d for f in _registry.FAMILIES.values() if f.problem == "attention" and f.shipped
                    for d in f.head_dims})


def _parse_only(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    bad = [p for p in parts if p not in ONLY_CHOICES]
    if bad or not parts:
        raise argparse.ArgumentTypeError(
            f"takes a comma list of {', '.join(ONLY_CHOICES)}; got {text!r}")
    return parts


def _parse_algo_peers(text: str) -> tuple[str, ...]:
    from iomodel.algo_peers import ALGO_KERNELS   # the peers and our backward kernels

    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    if not parts or any(p not in ALGO_KERNELS for p in parts):
        raise argparse.ArgumentTypeError(f"takes a comma list of {', '.join(ALGO_KERNELS)}; got {text!r}")
    return parts


MAX_ROUNDS = 100   # each round times every row of a shape once more: beyond this a run never ends


def _parse_rounds(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_ROUNDS:
        raise argparse.ArgumentTypeError(f"takes a whole number from 1 to {MAX_ROUNDS}; got {text!r}")
    return n


def _parse_budget(text: str) -> float:
    try:
        s = float(text)
    except ValueError:
        s = math.nan
    if not (math.isfinite(s) and s > 0):  # nan, inf or <= 0 would run nothing, or never stop
        raise argparse.ArgumentTypeError(f"takes a positive number of seconds; got {text!r}")
    return s


def _feature(flag: str, causal: bool) -> dict | None:
    """A shape flag's window or score modifier (``w4096``, ``w37,5``, ``softcap30``, ``alibi``), None if
    the flag is none of them."""
    try:
        if flag.startswith("w") and flag[1:2].isdigit():
            left, _, right = flag[1:].partition(",")
            right_i = 0 if causal else (int(right) if right else -1)
            return {"window_left": int(left), "window_right": right_i}
        if flag.startswith("softcap"):
            cap = float(flag[len("softcap"):])
            if not 0 < cap < float("inf"):
                raise ValueError
            return {"softcap": cap}
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad feature flag {flag!r}: w<LEFT>[,<RIGHT>] or softcap<CAP>") from None
    return {"alibi": True} if flag == "alibi" else None


def _parse_shape(text: str) -> dict:
    """``N:d[:causal][:fp16][:w<LEFT>[,<RIGHT>]][:softcap<CAP>][:alibi]``, e.g. ``32768:128:causal:w4096``; B
    and H keep B*N=16384, H*d=2048."""
    parts = text.split(":")
    try:
        N, d = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise argparse.ArgumentTypeError(f"wants N:d[:causal][:bf16|fp16], got {text!r}") from None
    if N <= 0:
        raise argparse.ArgumentTypeError(f"N must be a positive integer, got {N} in {text!r}")
    if d not in HEAD_DIMS:
        raise argparse.ArgumentTypeError(
            f"head dim {d} is not one the kernels run ({', '.join(map(str, HEAD_DIMS))}) in {text!r}")
    flags = set(parts[2:])
    features = {}
    for f in sorted(flags - {"causal", "bf16", "fp16"}):
        feat = _feature(f, "causal" in flags)
        if feat is None:
            raise argparse.ArgumentTypeError(f"unknown flag {f!r} in {text!r}")
        features.update(feat)
    return make_shape(N, d, "causal" in flags, "fp16" if "fp16" in flags else "bf16", **features)


def _add_run_options(r: argparse.ArgumentParser) -> None:
    from .sweep import DEFAULT_BUDGET_S

    r.add_argument("--gpu", metavar="KEY|PATH",
                   help="GPU spec key (e.g. h100-sxm) or TOML path (default: matched from the device name; "
                        "h100-sxm for --dry-run)")
    r.add_argument("--gpu-spec", dest="gpu", help=argparse.SUPPRESS)  # the old name, kept for scripts
    r.add_argument("--quick", action="store_true", help="two shapes only, shorter ceilings")
    r.add_argument("--only", type=_parse_only, default=DEFAULT_ONLY, metavar="LIST",
                   help=f"comma list of {','.join(ONLY_CHOICES)} (default: {','.join(DEFAULT_ONLY)}, the "
                        "attention sweep; algorithms: torch.matmul, cross-entropy, an MLP and the attention "
                        "backward as PyTorch runs them, our backward kernels beside them, decode and varlen; "
                        "decode: the decode rows alone, our flash_decode_sm80 and SDPA's backends over a KV "
                        "cache; varlen: the variable-length prefill rows alone, our flash_varlen_sm80 and flash_varlen "
                        "beside our dense forward on the same tokens and torch's varlen forwards)")
    r.add_argument("--algo-peers", type=_parse_algo_peers, default=None, metavar="LIST",
                   help="with --only algorithms (or decode, varlen): run only these kernels' rows (comma list of "
                        "peers and flash_bwd_sm80, flash_bwd_sm80_deterministic, flash_bwd_sm90, "
                        "flash_bwd_sm90_deterministic (sm_90 only), flash_decode_sm80, sdpa_flash_decode, "
                        "sdpa_cudnn_decode, sdpa_efficient_decode, flash_varlen_sm80, flash_varlen, "
                        "flash_dense_sm80, flash_dense, torch_varlen_attn, sdpa_flash_nested; default: all)")
    r.add_argument("--shape", action="append", type=_parse_shape, metavar="N:d[:causal][:fp16][:w4096][:softcap30][:alibi]",
                   help=f"replace the default shapes (repeatable); B*N = 16384, H*d = 2048, d one of "
                        f"{', '.join(map(str, HEAD_DIMS))} (default: N in 1024, 4096, 16384, d in 64, 128)")
    r.add_argument("--out", type=Path, metavar="FILE.json",
                   help="results JSON (default: $OUT/<device>-<date>.json if $OUT is set, "
                        "else validation/results/<device>-<date>.json)")
    r.add_argument("--calibration-out", type=Path, metavar="FILE.toml",
                   help="where the measured calibration goes (default: $OUT/calibration-<key>.toml, "
                        "else beside the results); not with --no-ceilings")
    r.add_argument("--no-ceilings", action="store_true",
                   help="skip measuring ceilings; predict with --calibration or the shipped calibration")
    r.add_argument("--calibration", metavar="auto|KEY|PATH",
                   help="calibration to predict with, only with --no-ceilings (default: auto, the GPU's shipped one)")
    r.add_argument("--force-calibration", action="store_true",
                   help="use a --calibration measured on another GPU than --gpu")
    r.add_argument("--budget-s", type=_parse_budget, default=DEFAULT_BUDGET_S, metavar="S",
                   help="stop starting new rows after this many seconds (rows left are recorded as skipped)")
    r.add_argument("--rounds", type=_parse_rounds, default=5, metavar="N",
                   help="time the rows of one shape interleaved, in N rounds of each row's share of calls, "
                        "so clock or thermal drift falls on all configs alike (1: each row in one block)")
    r.add_argument("--seed", type=int, default=None, help="random seed of the inputs (default: from the clock)")
    r.add_argument("--dry-run", action="store_true",
                   help="fake kernels and timer on the CPU (no torch): checks the sweep logic and the JSON")
    r.add_argument("--json", action="store_true",
                   help="print the summary report as JSON (the fields of iomodel.accuracy.Report)")


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog="python -m validation", description="Check iomodel's predictions against measured "
                  "kernels and peers.", epilog=EXAMPLES + REPORT_HINT)
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", required=True, parser_class=ArgParser)
    r = sub.add_parser("run", help="measure ceilings, then build, check and time kernels and peers (GPU)",
                       description="Measure ceilings, then predict, build, check and time every kernel x "
                                   "config x shape row and the peers (SDPA's backends; FlashAttention-4 where "
                                   "installed); write a results JSON.",
                       epilog=EXAMPLES + REPORT_HINT)
    _add_run_options(r)
    return p


def _check_options(args) -> None:
    """The options a run would not use, or could not honour, refused before anything starts."""
    from iomodel.cli.problem import check_force

    if args.calibration is not None and not args.no_ceilings:
        raise UsageError("--calibration not used without --no-ceilings (a run measures its own ceilings)")
    if args.calibration == "none":
        raise UsageError("--calibration none: a run always predicts with a calibration (auto, a key or a path)")
    if args.algo_peers is not None and "algorithms" not in args.only:
        _check_algo_peers(args.only, args.algo_peers)
    if args.calibration_out is not None and args.no_ceilings:
        raise UsageError("--calibration-out not used with --no-ceilings (no ceilings, no calibration to write)")
    check_force(args)


def _check_algo_peers(only, algo_peers) -> None:
    """--algo-peers without ``algorithms`` in --only: ``decode`` or ``varlen`` must be there, and the list
    must name one of their kernels (they run no other rows)."""
    from iomodel.algo_peers import ALGO_KERNELS, algo_of

    algos = [a for a in ("decode", "varlen") if a in only]
    if not algos:
        raise UsageError("--algo-peers not used without algorithms, decode or varlen in --only")
    if not any(algo_of(k) in algos for k in algo_peers):
        names = ", ".join(k for k, a in ALGO_KERNELS.items() if a in algos)
        raise UsageError(f"--algo-peers with --only {','.join(algos)} names no {' or '.join(algos)} kernel ({names})")


def _torch_env():
    """The real device, or one line saying what is missing."""
    try:
        import torch  # noqa: F401 - only to say clearly when it is missing
    except ImportError as exc:
        raise UsageError(f"a GPU run needs torch ({exc}): install the gpu extra, pip install -e \".[gpu]\", "
                         f"or check the sweep without a GPU with --dry-run") from None
    from .torch_env import TorchEnv

    return TorchEnv()


def _device(args):
    """(environment, GPU spec, default results path) of the run."""
    from iomodel.hardware import resolve_gpu

    if args.dry_run:
        from .fake_env import FakeEnv

        spec = resolve_gpu(args.gpu or "h100-sxm")
        return FakeEnv(spec), spec, Path(os.environ.get("OUT") or tempfile.gettempdir()) / "validation-dry-run.json"
    from .records import default_out_path

    env = _torch_env()
    return env, resolve_gpu(args.gpu or env.device_name), default_out_path(env.device_name)


def _options(args, spec, default_out: Path):
    """SweepOptions with every output path checked (nothing written yet)."""
    from iomodel.cli.problem import calibration_for
    from iomodel.files import check_output

    from .records import default_calibration_out, owned_folder
    from .sweep import SweepOptions

    path = args.out or default_out
    out = check_output(path, {".json": "json"}, what="--out", stdout_ok=False, create_parent=owned_folder(path))
    cal_out = None
    if not args.no_ceilings:
        path = args.calibration_out or default_calibration_out(out.path, spec.key)
        cal_out = check_output(path, {".toml": "toml"}, what="--calibration-out", stdout_ok=False,
                               create_parent=owned_folder(path)).path
    return SweepOptions(
        out=out.path, calibration_out=cal_out, quick=args.quick, only=tuple(args.only),
        shapes=args.shape, measure_ceilings=not args.no_ceilings,
        calibration_in=calibration_for(args.calibration or "auto", spec, args.force_calibration)
        if args.no_ceilings else None,
        budget_s=args.budget_s, seed=args.seed, dry_run=args.dry_run, rounds=args.rounds,
        algo_peers=args.algo_peers)


def _summary(results, as_json: bool) -> None:
    """The report of the run just made (its results are on disk already)."""
    from iomodel.accuracy import evaluate
    from iomodel.accuracy_text import format_report
    from iomodel.boundary import user_errors
    from iomodel.cli.reports import print_json

    try:
        report = evaluate([results])
    except user_errors() as exc:  # the run itself succeeded: say why there is no report, exit 0
        print(f"validation: no report: {exc}", file=sys.stderr)
        return
    if as_json:
        print_json(report)
    else:
        print(format_report(report))
    from .decode import decode_table
    from .varlen import varlen_table

    for table in (decode_table(results), varlen_table(results)):
        if table:   # after the report; beside --json's report on stdout, on stderr
            print(table, file=sys.stderr if as_json else sys.stdout)


def _cmd_run(args) -> int:
    from .sweep import run_sweep

    _check_options(args)
    env, spec, default_out = _device(args)
    opts = _options(args, spec, default_out)
    print(f"{'DRY RUN: ' if args.dry_run else ''}{env.device_name} as {spec.key}; results -> {opts.out}",
          file=sys.stderr)
    _summary(run_sweep(env, spec, opts), args.json)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_main("validation", lambda: _cmd_run(build_parser().parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
