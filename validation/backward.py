"""The attention backward's rows in the algorithm phase, shape by shape: the rows of one shape (the SDPA
backends' and ours) are a group (``validation.groups.run_groups``): one set of inputs and one float32
reference for them all, every row checked against it, then the rows that passed timed together,
interleaved in the sweep's rounds.  Timed one after another, each row met the GPU in its own clock and
power state: on the H100 both our backward and cuDNN's move by 6 to 13% within a minute under the 700 W
cap (validation/results/profile-bwd-sm90-h100-2026-11-25/spread.json), so a ratio of two rows timed apart
swung by several percent from run to run.  Interleaved, a drift falls on every row of the shape alike,
as in the attention sweep, decode and varlen.  Shares are not queued ahead: a backward call takes a
millisecond or more, far longer than Python takes to launch it.

The device side is the environment's ``algorithms()`` object: ``make_backward_group``, ``group_runner``,
``reference`` and ``check(kernel, fn, inputs, ref)`` (``validation.algo_torch``; ``validation.fake_env``
in a dry run).
"""
from __future__ import annotations

from typing import Any

from iomodel.algo_peers import default_pass
from iomodel.results import ResultRow, shape_key

from .algorithms import BACKWARD_TOLERANCE, AlgoRow, _predict, _progress
from .groups import run_groups
from .records import TOLERANCE, new_record

__all__ = ["BACKWARD", "run_backward"]

BACKWARD = "attention-backward"   # the rows' algorithm (``iomodel.algo_peers.algo_of``)


class _BackwardPhase:
    """The backward rows' part in ``validation.groups.run_groups``: a group is a shape."""

    algo, extra = BACKWARD, "backward"
    queue_ahead = False
    progress = staticmethod(_progress)

    def __init__(self, run):
        self.run = run

    def device(self):
        return self.run.env.algorithms()

    def record(self, row: AlgoRow) -> ResultRow:
        rec = new_record(row, default_pass(row.kernel))   # "bwd"
        _predict(rec, self.run, row.config)
        return rec

    def group_key(self, row: AlgoRow):
        return shape_key(row.shape)

    def make_inputs(self, impl, rows: list[AlgoRow], seed: int) -> list:
        return impl.make_backward_group(rows[0].shape, [row.kernel for row in rows], self.run.opts.input_sets, seed)

    def runner(self, impl, row: AlgoRow) -> Any:
        return impl.group_runner(row.kernel, row.config)

    def tolerance(self, rec: ResultRow) -> float:
        """bf16 gradients: looser than a forward's bound (``BACKWARD_TOLERANCE``)."""
        return max(TOLERANCE.get(rec.shape.get("dtype", "bf16"), 1e-2), BACKWARD_TOLERANCE)

    def timed(self, recs: list[ResultRow]) -> None:
        pass


def run_backward(run, rows: list[AlgoRow], first: int, seed: int) -> None:
    """Every backward row, numbered from ``first``, shape by shape (a shape's rows are adjacent, as
    ``validation.algorithms.algorithm_rows`` plans them).  Never raises for a row."""
    run_groups(run, _BackwardPhase(run), rows, first, seed)
