"""`validate` (predicted vs measured over results files), `gpus`, and the JSON every command prints."""
from __future__ import annotations

import dataclasses
import json

from ..boundary import UsageError
from .problem import check_calibration_gpu, check_force

PAGE_FORMATS = {".html": "html", ".htm": "html"}


def print_json(obj) -> None:
    """`obj` as JSON on stdout: the Python API's field names, plain types, null for a non-finite number
    (strict JSON has no NaN)."""
    from ..results import jsonable

    print(json.dumps(jsonable(obj), indent=2, allow_nan=False))


def _check_validate_options(args, page) -> None:
    if args.gpu is not None and page is None:
        raise UsageError("--gpu not used without --html (it picks the spec of the page's roofline)")
    if args.calibration is not None and args.stored:
        raise UsageError("--calibration not used with --stored (the predictions are shown as recorded)")
    check_force(args)
    if args.json and page is not None and page.stdout:
        raise UsageError("--json and --html - both write to standard output; give --html a file")


def _calibration(args, results):
    """What evaluate predicts with: None (each file's stored calibration), 'auto', 'none', or the
    Calibration a key or path names, checked against every file's GPU."""
    from ..api import named_calibration

    if args.calibration in (None, "auto", "none"):
        return args.calibration
    cal = named_calibration(args.calibration)
    for res in results:
        if res.get("gpu_key"):
            check_calibration_gpu(cal, res["gpu_key"], args.force_calibration)
    return cal


def cmd_validate(args) -> int:
    from ..accuracy import evaluate
    from ..accuracy_text import format_report
    from ..files import check_output
    from ..hardware import resolve_gpu
    from ..results import load_results

    page = check_output(args.html, PAGE_FORMATS, what="--html") if args.html is not None else None
    _check_validate_options(args, page)
    spec = resolve_gpu(args.gpu) if args.gpu is not None else None
    results = load_results(args.results)
    report = evaluate(results, calibration=_calibration(args, results), recompute=not args.stored)
    if args.json:
        print_json(report)
    elif page is None or not page.stdout:  # `--html -`: the page is the output
        print(format_report(report))
    if page is not None:
        from ..report import validation_html

        spec = spec or resolve_gpu(report.gpu_key or results[0].get("device", "?"))
        page.write(validation_html(report, spec))
        if not page.stdout and not args.json:
            print(f"wrote {page}")
    return 0


def spec_dict(spec) -> dict:
    """A GpuSpec's fields (every number in base units), without the per-field sources."""
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name != "facts"}


def cmd_gpus(args) -> int:
    from ..hardware import list_specs, load_spec

    specs = [load_spec(key) for key in list_specs()]
    if args.json:
        print_json([spec_dict(s) for s in specs])
        return 0
    for spec in specs:
        print(spec.summary())
    return 0
