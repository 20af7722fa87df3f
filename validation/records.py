"""What a run records: each row's ResultRow as it fills in, the progress line, the calibration made
of the measured ceilings, and where the files go."""
from __future__ import annotations

import datetime as _dt
import os
import re
import traceback
from pathlib import Path
from typing import Any

from iomodel.problems import conventional_flops
from iomodel.results import ResultRow, config_dict, jsonable

from .timing import TimingOutcome

__all__ = ["TOLERANCE", "NOT_TIMED", "recover", "short_error", "new_record", "unrun_record", "fill_prediction",
           "record_error", "fill_timing", "progress_line", "calibration_from_ceilings", "device_slug",
           "RESULTS_DIR", "default_out_path", "default_calibration_out", "owned_folder"]

#: max relative error allowed, by dtype (max |out - ref| / max |ref|)
TOLERANCE = {"bf16": 1e-2, "fp16": 5e-3}

#: ``error`` of a row that passed its check and waits for its shape's timing;
#: it stays in the JSON only if the run stops before that
NOT_TIMED = "passed the check; not timed (yet)"


def short_error(exc: BaseException, limit: int = 600) -> str:
    """An exception in one line of at most ``limit`` characters (compiler logs run to pages)."""
    text = f"{type(exc).__name__}: {exc}".strip()
    text = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- rows

def new_record(row, pass_: str | None = "fwd") -> ResultRow:
    """The record of a planned row before it runs: not ok, nothing measured; ``pass_`` the attention pass
    it times (the attention sweep's rows: the forward)."""
    return ResultRow(kernel=row.kernel, config=jsonable(config_dict(row.config)) if row.config is not None else None,
                     config_label=row.label, why=row.why, predicted_rank=row.predicted_rank, shape=dict(row.shape),
                     pass_=pass_)


def unrun_record(row, why: str) -> ResultRow:
    """The record of a row that did not run, ``why`` as its error."""
    rec = new_record(row)
    rec.error = why
    return rec


def fill_prediction(rec: ResultRow, pred: dict | None, err: str | None, peer: bool = False) -> None:
    if pred is not None and pred.get("time_s"):
        rec.predicted_ms = pred["time_s"] * 1e3
        rec.predicted_tflops = pred.get("tflops")
        rec.predicted_bottleneck = pred.get("bottleneck")
        if peer:
            rec.peer_prediction = pred
        else:
            rec.prediction = pred
    if err:
        rec.prediction_error = err


def record_error(rec: ResultRow, exc: BaseException) -> None:
    rec.error = short_error(exc)
    rec.traceback_tail = "".join(traceback.format_exception(exc)[-3:])[-1500:]


def fill_timing(rec: ResultRow, outcome: TimingOutcome) -> None:
    """Put a row's timing (or the exception its timing raised) into its record."""
    if isinstance(outcome, Exception):
        record_error(rec, outcome)
        return
    rec.error = None
    rec.measured_ms = outcome.median_s * 1e3
    rec.measured_tflops = conventional_flops(rec.shape) / outcome.median_s / 1e12
    rec.timing = outcome.as_dict()
    rec.ok = True


def progress_line(i: int, n: int, rec: ResultRow, elapsed_s: float) -> str:
    s = rec.shape
    head = (f"[{i}/{n}] {rec.kernel} {rec.config_label or '-'} d{s['d']} N{s['N_q']}"
            f"{' causal' if s.get('causal') else ''}")
    body = f"{rec.measured_tflops:.1f} TFLOP/s" if rec.ok else f"FAILED ({rec.error or '?'})"
    pred = f" (pred {rec.predicted_tflops:.1f})" if rec.predicted_tflops else " (pred -)"
    return f"{head}: {body}{pred}  [{elapsed_s:.0f}s]"


# --------------------------------------------------------------------------- calibration and files

def calibration_from_ceilings(spec, device_name: str, res, date: str):
    """The Calibration of a run's measured ceilings (``validation.ceilings.CeilingResult``)."""
    from iomodel.hardware import CAL_FIELDS, Calibration

    v = res.values
    return Calibration(
        gpu_key=spec.key,
        device_name=device_name,
        date=date,
        source=f"python -m validation run on {device_name}, {date}",
        **{f.name: v.get(f.name) for f in CAL_FIELDS},
        sources={k: s for k, s in res.sources.items() if v.get(k) is not None},
    )


#: the harness's own results folder: the one folder it creates when missing (iomodel.files refuses others)
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def owned_folder(path: Any) -> bool:
    """Whether ``path`` goes directly in the harness's own results folder, which may be created."""
    return Path(path).resolve().parent == RESULTS_DIR


def device_slug(name: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "gpu"


def default_out_path(device_name: str, date: str | None = None) -> Path:
    """``$OUT/<device>-<date>.json`` when ``$OUT`` is set (the device machine
    sends back what lands there), else ``validation/results/<device>-<date>.json``."""
    date = date or _dt.date.today().isoformat()
    base = os.environ.get("OUT")
    folder = Path(base) if base else RESULTS_DIR
    return folder / f"{device_slug(device_name)}-{date}.json"


def default_calibration_out(out: Any, key: str) -> Path:
    """``$OUT/calibration-<key>.toml`` when ``$OUT`` is set, else beside the results file."""
    base = os.environ.get("OUT")
    if base:
        return Path(base) / f"calibration-{key}.toml"
    out = Path(out)
    return out.with_name(out.stem + f".calibration-{key}.toml")


def recover(env) -> None:
    """After a row's failure: synchronise (a sticky CUDA error is the next rows' to report) and free the
    environment's cached inputs."""
    try:
        env.sync()
    except Exception:  # noqa: BLE001 - a sticky CUDA error; the next rows say so
        pass
    env.release()
