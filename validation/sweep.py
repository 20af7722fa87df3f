"""The validation sweep: measure ceilings, then predict, build, check and time every (kernel family x
tile configuration x shape) row, and the peers (SDPA's backends, FlashAttention-4 where installed) on the same
inputs in the same process.

It runs in phases: the ceilings (a calibration), the plan (rows in the model's order), then shape by
shape a check of every row and one interleaved timing of the rows that passed, and the finish.  The
results file is rewritten after every step, so an interrupted run leaves every row done so far.
The device is an environment object: ``TorchEnv`` on a GPU, ``FakeEnv`` for a dry run.
"""
from __future__ import annotations

import datetime as _dt
import itertools
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from iomodel.algo_peers import DECODE, VARLEN
from iomodel.files import OutputError
from iomodel.results import SCHEMA_VERSION, ResultRow, save_results, shape_key

from .algorithms import ALGORITHMS, algorithm_rows, backward_skips, run_algorithms
from .plan import DEFAULT_ONLY, PlannedRow, build_plan, default_shapes
from .predictor import Predictor
from .records import (NOT_TIMED, recover, TOLERANCE, calibration_from_ceilings, default_calibration_out, fill_prediction,
                      fill_timing, new_record, owned_folder, progress_line, record_error, short_error,
                      unrun_record)
from .timing import ROUND_ORDER

__all__ = ["DEFAULT_BUDGET_S", "SweepOptions", "SweepInterrupted", "run_sweep", "check_row"]

DEFAULT_BUDGET_S = 510  # whole run, ceilings included: inside 9 minutes on one H100


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by Ctrl-C after saving what it had done (marked incomplete); ``str()`` is one
    line saying what was saved and where.  A KeyboardInterrupt, so whatever stops on Ctrl-C still does."""

    def __init__(self, message: str, saved: int, planned: int | None, path: Path | None):
        super().__init__(message)
        self.saved, self.planned, self.path = saved, planned, path


@dataclass
class SweepOptions:
    out: Path
    calibration_out: Path | None = None
    quick: bool = False
    only: tuple[str, ...] = DEFAULT_ONLY
    shapes: list[dict[str, Any]] | None = None
    measure_ceilings: bool = True
    calibration_in: Any = None        # a Calibration or path used when not measuring
    budget_s: float = DEFAULT_BUDGET_S
    input_sets: int = 3
    seed: int | None = None
    dry_run: bool = False
    rounds: int = 5                   # timing rounds per shape; 1: each row timed in one block
    algo_peers: tuple[str, ...] | None = None   # the algorithm phase's peers to run (None: all)


@dataclass
class _Run:
    """A run in progress: the results header, the rows so far, the clock and what the plan needs."""

    env: Any
    spec: Any
    opts: SweepOptions
    log: Callable[[str], None]
    results: dict[str, Any]
    rows: list[ResultRow] = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)
    n: int = 0                        # rows planned
    families: dict = field(default_factory=dict)
    peer_fns: dict = field(default_factory=dict)
    predictor: Predictor | None = None
    algo_rows: list = field(default_factory=list)   # the algorithm phase's rows (validation.algorithms.AlgoRow)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def out_of_time(self) -> bool:
        return self.elapsed() > self.opts.budget_s

    def save(self) -> None:
        self.results["elapsed_s"] = self.elapsed()
        save_results(self.opts.out, {**self.results, "rows": self.rows}, create_parent=owned_folder(self.opts.out))

    def add(self, rec: ResultRow, i: int | None = None) -> None:
        """Record a row; with its number ``i``, it is final: print its progress line."""
        self.rows.append(rec)
        if i is not None:
            self.done(i, rec)

    def done(self, i: int, rec: ResultRow) -> None:
        self.log(progress_line(i, self.n, rec, self.elapsed()))

    def skipped(self, row: PlannedRow) -> ResultRow:
        """The record of a row not started because the time budget is used up."""
        return unrun_record(row, f"skipped: time budget of {self.opts.budget_s:.0f}s used up")


def _header(env, spec, opts: SweepOptions, date: str) -> dict[str, Any]:
    """The results file before any row: the device, the options, room for the calibration."""
    results: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "device": env.device_name, "gpu_key": spec.key,
        "sm_count": env.sm_count, "compute_capability": list(env.compute_capability),
        "torch": env.torch_version, "cuda": env.cuda_version, "date": date, "dry_run": bool(opts.dry_run),
        "complete": False, "rows_planned": None,   # until the finish; readers flag a partial file
        "options": {"quick": opts.quick, "only": list(opts.only), "input_sets": opts.input_sets,
                    "budget_s": opts.budget_s, "rounds": opts.rounds,
                    "algo_peers": list(opts.algo_peers) if opts.algo_peers is not None else None,
                    "lead_in_calls": env.timer.lead_in, "lead_in_s": getattr(env.timer, "lead_in_s", 0.0),
                    "round_order": ROUND_ORDER, "tolerance": TOLERANCE},
        "calibration": None, "ceilings": None, "notes": [], "skipped_families": {}, "rows": [],
    }
    if spec.sm_count != env.sm_count:
        results["notes"].append(
            f"spec {spec.key} has {spec.sm_count} SMs but the device reports {env.sm_count}: wrong --gpu?")
    return results


# --------------------------------------------------------------------------- phases 1 and 2

def _calibrate(run: _Run):
    """Phase 1: measure the ceilings and write them as a calibration, or take the one given."""
    from iomodel.hardware import calibration_to_dict, load_calibration, write_calibration

    env, spec, opts, results = run.env, run.spec, run.opts, run.results
    if opts.measure_ceilings:
        run.log(f"measuring ceilings on {env.device_name} ...")
        res = env.measure_ceilings(spec, quick=opts.quick, log=run.log)
        results["ceilings"] = res.as_dict()
        cal = calibration_from_ceilings(spec, env.device_name, res, results["date"])
        cal_out = opts.calibration_out or default_calibration_out(opts.out, spec.key)
        try:
            write_calibration(cal_out, cal, create_parent=owned_folder(cal_out))
            results["calibration_file"] = str(cal_out)
            run.log(f"calibration written to {cal_out}  [{run.elapsed():.0f}s]")
        except Exception as exc:  # noqa: BLE001 - the calibration is embedded in the results anyway
            results["notes"].append(f"could not write calibration: {short_error(exc)}")
    else:
        cal = opts.calibration_in if opts.calibration_in is not None else load_calibration(spec.key)
        if cal is not None and not hasattr(cal, "gpu_key"):
            cal = load_calibration(cal)
        results["notes"].append("ceilings not measured: " + (
            f"using calibration {cal.gpu_key} ({cal.date})" if cal is not None else "no calibration"))
    results["calibration"] = calibration_to_dict(cal) if cal is not None else None
    run.save()
    return cal


def _plan_algorithms(run: _Run) -> list:
    """The algorithm phase's rows (``--only decode`` or ``varlen`` without ``algorithms``: those rows
    alone); our backward kernels this device cannot run (the wgmma ones off sm_90) are left out and listed
    in ``skipped_families``, as the attention sweep's families are."""
    opts, results = run.opts, run.results
    algos = None if ALGORITHMS in opts.only else tuple(a for a in (DECODE, VARLEN) if a in opts.only)
    skip = backward_skips(run.env.compute_capability, opts.algo_peers) if algos is None else {}
    for name, why in skip.items():
        results["skipped_families"][name] = why
        run.log(f"skipping {name}: {why}")
    return algorithm_rows(opts.quick, peers=opts.algo_peers, predictor=run.predictor, notes=results["notes"],
                          skip=skip, algos=algos)


def _plan(run: _Run, cal, predictor_api: Any) -> list[PlannedRow]:
    """Phase 2: the families this device runs, and the rows in the model's order (fresh calibration)."""
    opts, results = run.opts, run.results
    run.predictor = Predictor(run.spec, cal, api=predictor_api)
    run.families = run.env.families()
    for name, fam in run.families.items():
        if fam.skip and name in opts.only:
            results["skipped_families"][name] = fam.skip
            run.log(f"skipping {name}: {fam.skip}")
    shapes = opts.shapes or default_shapes(opts.quick)
    plan = build_plan(shapes, run.families, run.predictor, only=opts.only, notes=results["notes"])
    run.peer_fns = run.env.peers() if "peers" in opts.only else {}
    results["notes"] += [f"{name}: {fn.version}" for name, (fn, _) in run.peer_fns.items() if hasattr(fn, "version")]
    run.algo_rows = _plan_algorithms(run) if {ALGORITHMS, DECODE, VARLEN} & set(opts.only) else []
    run.n = results["rows_planned"] = len(plan) + len(run.algo_rows)
    where = f" over {len(shapes)} shapes" if plan else ""   # --only algorithms, decode, varlen: no attention shape
    run.log(f"{run.n} rows{where}  [{run.elapsed():.0f}s]")
    return plan


# --------------------------------------------------------------------------- one row's check

def row_callable(row: PlannedRow, run: Callable[..., Any], features: dict | None = None) -> Callable[..., Any]:
    """``fn(q, k, v)`` running this row's kernel (with its config) on one input set; `features`: the
    shape's window and score modifiers as the kernels take them (``validation.features``)."""
    causal = bool(row.shape.get("causal"))
    if row.is_peer:
        if features:   # a peer that takes the shape's features (validation.peers.peer_takes)
            return lambda q, k, v: run(q, k, v, causal, **features)
        return lambda q, k, v: run(q, k, v, causal)
    cfg = row.config
    if features:
        return lambda q, k, v: run(cfg, q, k, v, causal, **features)
    return lambda q, k, v: run(cfg, q, k, v, causal)


def _check_problem(env, rec: ResultRow, fn: Callable[..., Any], inputs, ref) -> str | None:
    """Run ``fn`` once on the first input set in the kernels' debug mode and check it against the
    reference; why it fails, or None.  Raises what the kernel raises."""
    problem = env.memory_problem(rec.kernel, rec.shape)
    if problem:
        return problem
    with env.checking(rec.kernel):
        out = fn(*inputs[0])
        env.sync()
    err, finite = env.check(out, ref)
    del out  # outputs are not kept: timing makes its own
    rec.max_rel_err = err if finite else None
    tol = TOLERANCE.get(rec.shape.get("dtype", "bf16"), 1e-2)
    if not finite:
        return "output has NaN or Inf"
    if not err < tol:
        return f"wrong result: max_rel_err {err:.3g} >= {tol:g}"
    return None


def check_row(env, row: PlannedRow, inputs, ref, run: Callable[..., Any],
              predictor: Predictor | None) -> tuple[ResultRow, Callable[..., Any] | None]:
    """Predict, run once and check one row.  Never raises.  Returns its record
    and the callable to time, or None when the row failed (the record says why)."""
    rec = new_record(row)
    if predictor is not None:
        if row.is_peer:
            fill_prediction(rec, *predictor.peer(row.kernel, row.shape), peer=True)
        else:
            fill_prediction(rec, *predictor.predict(row.kernel, row.shape, row.config))
    fn = row_callable(row, run, env.features(row.shape))
    try:
        rec.error = _check_problem(env, rec, fn, inputs, ref)
    except Exception as exc:  # noqa: BLE001 - one bad config must not end the sweep
        record_error(rec, exc)
        recover(env)
        return rec, None
    if rec.error:
        return rec, None
    rec.error = NOT_TIMED
    return rec, fn


# --------------------------------------------------------------------------- phases 3 and 4: shape by shape, finish

def _inputs(run: _Run, group: list[tuple[int, PlannedRow]], seed: int):
    """The shape's input sets and reference, or None when they cannot be made (every row says why)."""
    shape = group[0][1].shape
    try:
        inputs = run.env.make_inputs(shape, run.opts.input_sets, seed + group[0][0])
        ref = run.env.reference(*inputs[0], bool(shape.get("causal")), run.env.features(shape))
        run.env.sync()
        return inputs, ref
    except Exception as exc:  # noqa: BLE001 - e.g. out of memory: the shape's rows say so, the next shape runs
        why = f"could not make inputs/reference: {short_error(exc)}"
        recover(run.env)
        for i, row in group:
            run.add(unrun_record(row, why), i)
        run.save()
        return None


def _check_shape(run: _Run, group: list[tuple[int, PlannedRow]], inputs, ref) -> list[tuple[int, ResultRow, Any]]:
    """Predict, run once and check every row of the shape, each on disk before any timing; the rows
    that passed, with their callables."""
    to_time = []
    for i, row in group:
        if run.out_of_time():
            run.add(run.skipped(row))
            continue
        if row.is_peer:
            fn, why = run.peer_fns.get(row.kernel, (None, "peer not available"))
            if fn is None:
                run.add(unrun_record(row, f"skipped: {why}"), i)
                run.save()
                continue
        else:
            fn = run.families[row.kernel].run
        rec, timed = check_row(run.env, row, inputs, ref, fn, run.predictor)
        run.add(rec, None if timed else i)
        if timed:
            to_time.append((i, rec, timed))
        run.save()
    return to_time


def _time_shape(run: _Run, to_time: list[tuple[int, ResultRow, Any]], inputs) -> None:
    """Time the rows that passed together, interleaved in rounds, so drift cannot favour one config."""
    if not to_time:
        return
    try:
        outcomes = run.env.timer.time_interleaved([fn for _i, _r, fn in to_time], inputs, run.opts.rounds,
                                                  on_error=lambda: recover(run.env))
    except Exception as exc:  # noqa: BLE001 - the timer itself failed: every row of the shape says so
        recover(run.env)
        outcomes = [exc] * len(to_time)
    for (i, rec, _fn), outcome in zip(to_time, outcomes):
        fill_timing(rec, outcome)
        run.done(i, rec)
    run.save()


def _run_shape(run: _Run, group: list[tuple[int, PlannedRow]], seed: int) -> None:
    """One shape: inputs and reference once, then check every row, then time those that passed.  Its
    tensors die when it returns, before the next shape makes its own."""
    if run.out_of_time():
        run.rows += [run.skipped(row) for _i, row in group]
        return
    made = _inputs(run, group, seed)
    if made is None:
        return
    inputs, ref = made
    to_time = _check_shape(run, group, inputs, ref)
    del made, ref  # not needed for timing
    _time_shape(run, to_time, inputs)


def _run_shapes(run: _Run, plan: list[PlannedRow], seed: int) -> None:
    """Phase 3: the rows shape by shape (the plan keeps a shape's rows together)."""
    for _key, group in itertools.groupby(enumerate(plan, 1), key=lambda ir: shape_key(ir[1].shape)):
        run.env.release()
        _run_shape(run, list(group), seed)


def run_sweep(env, spec, opts: SweepOptions, *, predictor_api: Any = None,
              log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the whole validation; returns the results dict (also written to ``opts.out``)."""
    if log is None:
        def log(msg: str) -> None:
            print(msg, file=sys.stderr, flush=True)

    run = _Run(env, spec, opts, log, _header(env, spec, opts, _dt.date.today().isoformat()))
    run.save()  # before any work: an output that cannot be written (OutputError) stops the run here
    try:
        cal = _calibrate(run)
        plan = _plan(run, cal, predictor_api)
        seed = opts.seed if opts.seed is not None else int(time.time()) % 1_000_000
        run.results["seed"] = seed
        _run_shapes(run, plan, seed)
        run_algorithms(run, run.algo_rows, len(plan) + 1, seed)
    except KeyboardInterrupt:
        raise _interrupted(run) from None
    return _finish(run)


def _interrupted(run: _Run) -> SweepInterrupted:
    """Ctrl-C: save the rows done so far (the file still says complete false) and say so in one line."""
    saved, planned = len(run.rows), run.results["rows_planned"]
    what = f"{saved} of {planned} rows" if planned is not None else f"{saved} rows (before the plan was made)"
    try:
        run.save()
        message = f"interrupted: {what} saved to {run.opts.out} (marked incomplete)"
    except OutputError as exc:
        message = f"interrupted: {what} not saved ({exc})"
    except KeyboardInterrupt:  # a second Ctrl-C: the atomic writer left the previous save whole
        message = f"interrupted twice: {run.opts.out} holds the rows of the last save (marked incomplete)"
    return SweepInterrupted(message, saved, planned, run.opts.out)


def _finish(run: _Run) -> dict[str, Any]:
    """Phase 4: give the device's memory back, write the file a last time (complete), say how it went."""
    run.env.release()
    run.results["complete"] = True
    run.save()
    ok = sum(1 for r in run.rows if r.ok)
    run.log(f"done: {ok}/{len(run.rows)} rows ok in {run.results['elapsed_s']:.0f}s; results in {run.opts.out}")
    return {**run.results, "rows": [r.as_dict() for r in run.rows]}
