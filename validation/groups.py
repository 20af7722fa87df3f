"""Rows run group by group, as the decode and varlen phases run them (validation/decode.py,
validation/varlen.py): a group's rows share one set of inputs and one float32 reference, made once; every
row is checked against it, on disk before any timing, then the rows that passed are timed together,
interleaved in the sweep's rounds, each share of a round queued behind a GPU sleep (``queue_ahead`` in
validation/timing.py).  A failure fails a row, or a group's rows, never the run.

What differs between the phases is a ``GroupPhase``: how a row is recorded and logged, how its group's
inputs and its callable are made, and what is derived from the timed rows (decode's bandwidth, varlen's
ratios to the dense rows); optionally the check's bound (``tolerance``) and whether shares are queued
ahead (``queue_ahead``).  The backward phase (validation/backward.py) groups the rows of one shape too.  The device side (``impl``: ``make_inputs``, ``reference``, ``runner``,
``check``) is the environment's, as ``GroupPhase.device`` gets it.
"""
from __future__ import annotations

import itertools
from typing import Any, Hashable, Protocol

from iomodel.algo_peers import algo_flops
from iomodel.results import ResultRow

from .records import NOT_TIMED, TOLERANCE, record_error, recover, short_error

__all__ = ["GroupPhase", "run_groups"]


class GroupPhase(Protocol):
    """A phase's part in ``run_groups``."""

    #: the algorithm whose FLOPs a row's TFLOP/s count (``iomodel.algo_peers.algo_flops``)
    algo: str
    #: the record's own object (``rec.extra[extra]``), where ``how`` a peer ran is kept
    extra: str

    def device(self) -> Any:
        """The environment's device side of the phase, set up for its first group; may raise."""

    def record(self, row) -> ResultRow:
        """A planned row's record, its prediction filled in."""

    def progress(self, i: int, n: int, rec: ResultRow, elapsed_s: float) -> str:
        """The row's line in the log."""

    def group_key(self, row) -> Hashable:
        """What the rows of one group share (a group's rows are adjacent in the plan)."""

    def make_inputs(self, impl, rows: list, seed: int) -> list:
        """The group's input sets (``impl.make_inputs``); may raise."""

    def runner(self, impl, row) -> Any:
        """The row's callable on one input set (``impl.runner``); may raise."""

    def timed(self, recs: list[ResultRow]) -> None:
        """After a group's timing, with every record it timed (ok or not): what they derive."""


def _tolerance(phase: GroupPhase, rec: ResultRow) -> float:
    """The check's bound: the phase's own (``tolerance(rec)``, optional), else the dtype's."""
    own = getattr(phase, "tolerance", None)
    return own(rec) if own is not None else TOLERANCE.get(rec.shape.get("dtype", "bf16"), 1e-2)


def _log(run, phase: GroupPhase, i: int, rec: ResultRow) -> None:
    run.log(phase.progress(i, run.n, rec, run.elapsed()))


def _fail_all(run, phase: GroupPhase, recs: list[tuple[int, ResultRow]], why: str) -> None:
    for i, rec in recs:
        rec.error = why
        run.rows.append(rec)
        _log(run, phase, i, rec)
    run.save()


def _check(run, phase: GroupPhase, impl, row, rec: ResultRow, inputs, ref) -> Any:
    """Run the row once against the reference; the callable to time, or None (the record says why)."""
    fn = None
    try:
        fn = phase.runner(impl, row)
        err, finite = impl.check(row.kernel, fn, inputs, ref)
    except Exception as exc:  # noqa: BLE001 - e.g. a peer refusing GQA, or missing: its row says so, the others run
        record_error(rec, exc)
        recover(run.env)
    else:
        rec.max_rel_err = err if finite else None
        tol = _tolerance(phase, rec)
        rec.error = ("output has NaN or Inf" if not finite else
                     f"wrong result: max_rel_err {err:.3g} >= {tol:g}" if not err < tol else None)
    if getattr(fn, "how", None):   # how a peer ran (GQA, mask, causal argument), also when it failed
        rec.extra[phase.extra]["peer"] = dict(fn.how)
    if rec.error:
        return None
    rec.error = NOT_TIMED
    return fn


def _time_group(run, phase: GroupPhase, to_time: list[tuple[int, ResultRow, Any]], inputs) -> None:
    """Time the rows that passed together.  Queued ahead unless the phase says otherwise (``queue_ahead``,
    optional): a decode call takes microseconds, less than Python may take to launch it, and a peer's
    Python overhead must stay out of the GPU time."""
    if to_time:
        try:
            outcomes = run.env.timer.time_interleaved([fn for _i, _r, fn in to_time], inputs, run.opts.rounds,
                                                      on_error=lambda: recover(run.env),
                                                      queue_ahead=getattr(phase, "queue_ahead", True))
        except Exception as exc:  # noqa: BLE001 - the timer itself failed: every row of the group says so
            recover(run.env)
            outcomes = [exc] * len(to_time)
        for (_i, rec, _fn), outcome in zip(to_time, outcomes):
            if isinstance(outcome, Exception):
                record_error(rec, outcome)
            else:
                rec.error, rec.ok = None, True
                rec.measured_ms = outcome.median_s * 1e3
                rec.measured_tflops = algo_flops(phase.algo, rec.shape) / outcome.median_s / 1e12
                rec.timing = outcome.as_dict()
        phase.timed([rec for _i, rec, _fn in to_time])
        for i, rec, _fn in to_time:
            _log(run, phase, i, rec)
    run.save()


def _run_group(run, phase: GroupPhase, impl, group: list[tuple[int, Any]], seed: int) -> None:
    """One group's rows: inputs and reference once, check every row, time those that passed together."""
    recs = [(i, phase.record(row)) for i, row in group]
    if run.out_of_time():
        _fail_all(run, phase, recs, f"skipped: time budget of {run.opts.budget_s:.0f}s used up")
        return
    try:
        inputs = phase.make_inputs(impl, [row for _i, row in group], seed + group[0][0])
        ref = impl.reference(inputs[0][0])
        run.env.sync()
    except Exception as exc:  # noqa: BLE001 - e.g. out of memory: the group's rows say so, the next group runs
        recover(run.env)
        _fail_all(run, phase, recs, f"could not make inputs/reference: {short_error(exc)}")
        return
    to_time = []
    for (i, rec), (_i, row) in zip(recs, group):
        fn = _check(run, phase, impl, row, rec, inputs, ref)
        run.rows.append(rec)
        if fn is None:
            _log(run, phase, i, rec)
        else:
            to_time.append((i, rec, fn))
        run.save()
    del ref   # the timing needs only the inputs: the reference's memory goes back first
    _time_group(run, phase, to_time, inputs)


def run_groups(run, phase: GroupPhase, rows: list, first: int, seed: int) -> None:
    """Every row of a phase, numbered from ``first``, group by group.  Never raises for a row."""
    if not rows:
        return
    try:
        impl = phase.device()
    except Exception as exc:  # noqa: BLE001 - e.g. no kernels package: every row says so
        _fail_all(run, phase, [(i, phase.record(r)) for i, r in enumerate(rows, first)], short_error(exc))
        return
    for _key, group in itertools.groupby(enumerate(rows, first), key=lambda ir: phase.group_key(ir[1])):
        run.env.release()   # the previous group's tensors are gone: give their memory back first
        _run_group(run, phase, impl, list(group), seed)
