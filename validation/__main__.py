"""``python -m validation``: run the GPU sweep, or evaluate results on any machine.

  python -m validation run [--gpu-spec KEY] [--quick] [--only flash_sm80,peers] [--out FILE.json]
  python -m validation run --dry-run            # the same sweep with fake kernels, no torch, no GPU
  python -m validation report RESULTS.json ... [--html page.html]

``--help`` works without torch: torch, CuPy and the kernels are imported only
when a real run starts.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

FAMILIES = ("flash_sm80", "flash_sm90", "unfused", "peers")


def _parse_only(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    bad = [p for p in parts if p not in FAMILIES]
    if bad or not parts:
        raise argparse.ArgumentTypeError(
            f"--only takes a comma list of {', '.join(FAMILIES)}; got {text!r}")
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
    from .run import make_shape

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
        description="Check iomodel's predictions against measured kernels and peers.")
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="measure ceilings, then build, check and time kernels and peers (GPU)",
                       description="Measure ceilings, then predict, build, check and time every kernel x "
                                   "config x shape row and the SDPA peers; write a results JSON.")
    r.add_argument("--gpu-spec", metavar="KEY|PATH",
                   help="GPU spec key (e.g. h100-sxm) or TOML path; default: matched from the device name")
    r.add_argument("--quick", action="store_true", help="two shapes only, shorter ceilings")
    r.add_argument("--only", type=_parse_only, default=FAMILIES, metavar="LIST",
                   help=f"comma list of {','.join(FAMILIES)} (default: all)")
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

    e = sub.add_parser("report", help="evaluate results JSON with the current model (CPU)",
                       description="Recompute predictions for results JSON files with the current model and "
                                   "print error statistics; optionally write an HTML page.")
    e.add_argument("results", nargs="+", type=Path, help="results JSON file(s)")
    e.add_argument("--calibration", metavar="FILE.toml",
                   help="calibration to predict with (default: the one stored in each results file)")
    e.add_argument("--stored", action="store_true",
                   help="use the predictions stored in the files instead of recomputing")
    e.add_argument("--html", type=Path, metavar="PAGE.html", help="also write a self-contained HTML page")
    e.add_argument("--gpu-spec", metavar="KEY|PATH", help="spec for the page's roofline (default: from the file)")
    return p


def _cmd_run(args) -> int:
    from iomodel.hardware import HardwareError, load_calibration, load_spec, spec_for_device

    from .run import DEFAULT_BUDGET_S, FakeEnv, SweepOptions, default_out_path, run_sweep

    if args.dry_run:
        try:
            spec = load_spec(args.gpu_spec or "h100-sxm")
        except HardwareError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        env = FakeEnv(spec)
        out = args.out or Path(os.environ.get("OUT") or tempfile.gettempdir()) / "validation-dry-run.json"
    else:
        from .run import TorchEnv

        try:
            env = TorchEnv()
        except Exception as exc:  # noqa: BLE001
            print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        try:
            spec = load_spec(args.gpu_spec) if args.gpu_spec else spec_for_device(env.device_name)
        except HardwareError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        out = args.out or default_out_path(env.device_name)
    cal_in = None
    if args.calibration:
        try:
            cal_in = load_calibration(args.calibration)
        except HardwareError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    opts = SweepOptions(
        out=Path(out),
        calibration_out=args.calibration_out,
        quick=args.quick,
        only=tuple(args.only),
        shapes=args.shape,
        measure_ceilings=not args.no_ceilings,
        calibration_in=cal_in,
        budget_s=args.budget_s if args.budget_s is not None else DEFAULT_BUDGET_S,
        seed=args.seed,
        dry_run=args.dry_run,
        rounds=args.rounds,
    )
    print(f"{'DRY RUN: ' if args.dry_run else ''}{env.device_name} as {spec.key}; results -> {opts.out}",
          file=sys.stderr)
    results = run_sweep(env, spec, opts)
    try:
        from iomodel.validate import evaluate, format_report

        print(format_report(evaluate([results])))
    except Exception as exc:  # noqa: BLE001 - the results are safe on disk already
        print(f"(no report: {type(exc).__name__}: {exc})", file=sys.stderr)
    return 0


def _cmd_report(args) -> int:
    from iomodel.hardware import HardwareError, load_spec
    from iomodel.validate import evaluate, format_report, load_results

    try:
        results = load_results(args.results)
        report = evaluate(results, calibration=args.calibration, recompute=not args.stored)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    if args.html:
        from iomodel.report import validation_html

        try:
            spec = load_spec(args.gpu_spec or report.gpu_key)
        except HardwareError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        args.html.write_text(validation_html(report, spec), encoding="utf-8")
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.cmd == "run":
        return _cmd_run(args)
    return _cmd_report(args)


if __name__ == "__main__":
    sys.exit(main())
