"""``python -m validation run``: the GPU sweep (or ``--dry-run``, the same sweep with fake kernels).

  python -m validation run [--gpu-spec KEY] [--quick] [--only flash_sm80,peers] [--out FILE.json]
  python -m validation run --dry-run            # no torch, no GPU

Reading the results (anywhere, CPU only) is ``python -m iomodel validate RESULTS.json ... [--html PAGE]``.
``--help`` works without torch: torch, CuPy and the kernels are imported only when a real run starts.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from .plan import ONLY_CHOICES, make_shape

REPORT_HINT = "to read results: python -m iomodel validate RESULTS.json ... [--html PAGE] (no GPU needed)"


def _parse_only(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    bad = [p for p in parts if p not in ONLY_CHOICES]
    if bad or not parts:
        raise argparse.ArgumentTypeError(
            f"--only takes a comma list of {', '.join(ONLY_CHOICES)}; got {text!r}")
    return parts


def _parse_rounds(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--rounds takes a whole number >= 1; got {text!r}")
    return n


def _parse_shape(text: str) -> dict:
    """``N:d[:causal][:fp16]``, e.g. ``4096:128:causal``; B and H keep B*N=16384, H*d=2048."""
    parts = text.split(":")
    try:
        N, d = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise argparse.ArgumentTypeError(f"--shape wants N:d[:causal][:bf16|fp16], got {text!r}") from None
    flags = set(parts[2:])
    unknown = flags - {"causal", "bf16", "fp16"}
    if unknown:
        raise argparse.ArgumentTypeError(f"--shape: unknown flag(s) {sorted(unknown)} in {text!r}")
    return make_shape(N, d, "causal" in flags, "fp16" if "fp16" in flags else "bf16")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m validation",
        description="Check iomodel's predictions against measured kernels and peers.", epilog=REPORT_HINT)
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="measure ceilings, then build, check and time kernels and peers (GPU)",
                       description="Measure ceilings, then predict, build, check and time every kernel x "
                                   "config x shape row and the SDPA peers; write a results JSON.",
                       epilog=REPORT_HINT)
    r.add_argument("--gpu-spec", metavar="KEY|PATH",
                   help="GPU spec key (e.g. h100-sxm) or TOML path; default: matched from the device name")
    r.add_argument("--quick", action="store_true", help="two shapes only, shorter ceilings")
    r.add_argument("--only", type=_parse_only, default=ONLY_CHOICES, metavar="LIST",
                   help=f"comma list of {','.join(ONLY_CHOICES)} (default: all)")
    r.add_argument("--shape", action="append", type=_parse_shape, metavar="N:d[:causal]",
                   help="replace the default shapes (repeatable); B*N = 16384, H*d = 2048")
    r.add_argument("--out", type=Path, metavar="FILE.json",
                   help="results JSON (default: $OUT/<device>-<date>.json if $OUT is set, "
                        "else validation/results/<device>-<date>.json)")
    r.add_argument("--calibration-out", type=Path, metavar="FILE.toml",
                   help="where the measured calibration goes (default: $OUT/calibration-<key>.toml, "
                        "else beside the results)")
    r.add_argument("--no-ceilings", action="store_true",
                   help="skip measuring ceilings; predict with --calibration or the shipped calibration")
    r.add_argument("--calibration", metavar="FILE.toml", help="calibration to use with --no-ceilings")
    r.add_argument("--budget-s", type=float, default=None,
                   help="stop starting new rows after this many seconds (default 510; rows left are "
                        "recorded as skipped)")
    r.add_argument("--rounds", type=_parse_rounds, default=5, metavar="N",
                   help="time the rows of one shape interleaved, in N rounds of each row's share of calls, "
                        "so clock or thermal drift falls on all configs alike (default 5; 1: each row in one block)")
    r.add_argument("--seed", type=int, default=None, help="random seed of the inputs (default: from the clock)")
    r.add_argument("--dry-run", action="store_true",
                   help="fake kernels and timer on the CPU (no torch): checks the sweep logic and the JSON")
    return p




class _Refused(Exception):
    """A run that cannot start (no torch, no CUDA device), in one line."""


def _device(args):
    """(environment, GPU spec, results path) of the run."""
    from iomodel.hardware import resolve_gpu

    if args.dry_run:
        from .fake_env import FakeEnv

        spec = resolve_gpu(args.gpu_spec or "h100-sxm")
        out = args.out or Path(os.environ.get("OUT") or tempfile.gettempdir()) / "validation-dry-run.json"
        return FakeEnv(spec), spec, out
    from .records import default_out_path
    from .torch_env import TorchEnv

    try:
        env = TorchEnv()
    except Exception as exc:  # noqa: BLE001 - no torch, no CUDA device: one line, exit 2
        raise _Refused(f"{type(exc).__name__}: {exc}") from None
    spec = resolve_gpu(args.gpu_spec or env.device_name)
    return env, spec, args.out or default_out_path(env.device_name)


def _options(args, out: Path):
    from iomodel.hardware import load_calibration

    from .sweep import DEFAULT_BUDGET_S, SweepOptions

    return SweepOptions(
        out=Path(out), calibration_out=args.calibration_out, quick=args.quick, only=tuple(args.only),
        shapes=args.shape, measure_ceilings=not args.no_ceilings,
        calibration_in=load_calibration(args.calibration) if args.calibration else None,
        budget_s=args.budget_s if args.budget_s is not None else DEFAULT_BUDGET_S,
        seed=args.seed, dry_run=args.dry_run, rounds=args.rounds)


def _cmd_run(args) -> int:
    from iomodel.hardware import HardwareError

    from .sweep import run_sweep

    try:
        env, spec, out = _device(args)
        opts = _options(args, out)
    except (_Refused, HardwareError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{'DRY RUN: ' if args.dry_run else ''}{env.device_name} as {spec.key}; results -> {opts.out}",
          file=sys.stderr)
    results = run_sweep(env, spec, opts)
    try:
        from iomodel.accuracy import evaluate
        from iomodel.accuracy_text import format_report

        print(format_report(evaluate([results])))
    except Exception as exc:  # noqa: BLE001 - the results are safe on disk already
        print(f"(no report: {type(exc).__name__}: {exc})", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return _cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
