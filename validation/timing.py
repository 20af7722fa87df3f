"""Timing helpers: CUDA-event timing with rotated inputs, and a fake timer for dry runs.

Both timers time several callables *interleaved*: ``time_interleaved`` runs
every callable's repeats in ``rounds`` rounds, each round a share of every
callable's calls, so a slow drift of clock or temperature over the run falls
on all of them alike instead of on whichever ran last.

With ``queue_ahead`` (the decode rows: kernels of a few microseconds, whose Python call may take
longer than the GPU does), each callable's share of a round waits behind a GPU sleep
(``torch.cuda._sleep``) long enough for the CPU to queue the whole share first, so every event pair
times the GPU's work on a full queue, not the CPU's launch overhead.

Nothing here imports torch at module import time; ``CudaEventTimer`` imports it
when constructed.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

DEFAULT_LEAD_IN = 1  # untimed calls before each callable's share of a round, at least
#: seconds of untimed calls before each share, at least: under the board's power cap a kernel that follows a
#: hungrier one runs its first calls at the clock that one left, 5 to 25% slower for 60 to 100 ms (H100,
#: validation/results/profile-sm80-spread-h100-2026-11-25), so each share starts from the kernel's own
#: steady state instead of its neighbour's
DEFAULT_LEAD_IN_S = 0.1
MAX_LEAD_IN_CALLS = 1000   # kernels of a few microseconds: their lead-in is bounded by the host's launches
MAX_HOLD_S = 0.2           # the longest GPU sleep ahead of a queued share (``queue_ahead``)
#: how ``round_order`` orders the callables, as a results file records it (``options.round_order``; absent in files
#: before 2026-11-29, whose rounds were forward and backward in the callables' own order)
ROUND_ORDER = "pairs, shuffled after the first"

__all__ = ["DEFAULT_LEAD_IN", "DEFAULT_LEAD_IN_S", "ROUND_ORDER", "Timing", "TimingOutcome", "choose_repeats",
           "round_order", "round_share", "CudaEventTimer", "FakeTimer"]


@dataclass
class Timing:
    """Result of timing one callable: median seconds over ``repeats`` calls,
    made in ``rounds`` rounds (interleaved with other callables when > 1)."""

    median_s: float
    min_s: float
    max_s: float
    repeats: int
    input_sets: int
    rounds: int = 1
    interleaved: bool = False
    queued_ahead: bool = False          # each share launched behind a GPU sleep (``queue_ahead``)
    launch_cpu_s: float | None = None   # median CPU time of one call's launch (measured when queued ahead)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "median_ms": self.median_s * 1e3,
            "min_ms": self.min_s * 1e3,
            "max_ms": self.max_s * 1e3,
            "repeats": self.repeats,
            "input_sets": self.input_sets,
            "interleaved": self.interleaved,
            "rounds": self.rounds,
        }
        if self.queued_ahead:   # only then: the rows of earlier runs keep their keys
            out["queued_ahead"] = True
            out["launch_cpu_ms"] = self.launch_cpu_s * 1e3 if self.launch_cpu_s is not None else None
        return out


#: what ``time_interleaved`` gives for each callable: its Timing, or the
#: exception it raised (the others are timed all the same)
TimingOutcome = Timing | Exception


def choose_repeats(
    estimate_s: float,
    *,
    target_s: float = 0.12,
    min_repeats: int = 20,
    max_repeats: int = 200,
) -> int:
    """How many timed calls to make so the timed part lasts about ``target_s``.

    Never fewer than ``min_repeats`` (the median needs them), never more than
    ``max_repeats``.  A non-positive or non-finite estimate gives the minimum.
    """
    if not (estimate_s > 0) or not math.isfinite(estimate_s):
        return min_repeats
    n = int(math.ceil(target_s / estimate_s))
    return max(min_repeats, min(max_repeats, n))


def round_share(total: int, rounds: int, r: int) -> int:
    """Calls of round ``r`` when ``total`` calls are spread over ``rounds`` rounds."""
    return total // rounds + (1 if r < total % rounds else 0)


def round_order(n: int, r: int) -> list[int]:
    """Order of ``n`` callables in round ``r``: each pair of rounds runs one permutation forward, then backward, so
    under a linear drift the pair puts every callable at the same mean position; the first pair's permutation is
    the callables' own order, each later pair's a fresh one (seeded by the pair), so that no callable always
    follows the same one (a kernel's clock at the start of its share depends on the power the one before drew)."""
    order = list(range(n))
    if r >= 2:
        random.Random(r // 2).shuffle(order)
    return order if r % 2 == 0 else order[::-1]


def _outcomes(failed: Sequence[Exception | None], samples: Sequence[Sequence[float]], input_sets: int,
              rounds: int, queued_ahead: bool = False,
              launch_cpu: Sequence[float | None] | None = None) -> list[TimingOutcome]:
    """Each callable's exception, or the Timing of its samples."""
    cpu = launch_cpu or [None] * len(samples)
    return [exc if exc is not None else Timing(
        median_s=statistics.median(s),
        min_s=min(s),
        max_s=max(s),
        repeats=len(s),
        input_sets=input_sets,
        rounds=rounds,
        interleaved=rounds > 1 and len(samples) > 1,
        queued_ahead=queued_ahead,
        launch_cpu_s=c,
    ) for exc, s, c in zip(failed, samples, cpu)]


def _check_args(inputs: Sequence[Sequence[Any]], rounds: int) -> None:
    if not inputs:
        raise ValueError("need at least one input set")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")


class _Timer:
    """Timing one callable alone, through the subclass's ``time_interleaved``."""

    def __call__(self, fn: Callable[..., Any], inputs: Sequence[Sequence[Any]]) -> Timing:
        """Time one callable in one block; raises what it raises."""
        (outcome,) = self.time_interleaved([fn], inputs, rounds=1)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


class _EventRun:
    """The state of one ``CudaEventTimer.time_interleaved`` call: each callable's exception (None while it
    runs), repeats and samples, and the call counter that rotates the input sets over all callables."""

    def __init__(self, fns: Sequence[Callable[..., Any]], inputs: Sequence[Sequence[Any]],
                 on_error: Callable[[], None] | None, queue_ahead: bool = False):
        self.fns, self.inputs, self.on_error, self.queue_ahead = fns, inputs, on_error, queue_ahead
        self.failed: list[Exception | None] = [None] * len(fns)
        self.repeats = [0] * len(fns)
        self.samples: list[list[float]] = [[] for _ in fns]
        self.cpu_s: list[float | None] = [None] * len(fns)   # CPU seconds one call takes to launch
        self.call_s: list[float | None] = [None] * len(fns)  # GPU seconds of one call (the estimate)
        self.call = 1  # the estimate used set 0


class CudaEventTimer(_Timer):
    """Times ``fn(*inputs[i])`` with one pair of CUDA events per call.

    Inputs rotate among the given sets (one counter over all callables, so two
    consecutive calls never share a set) so that, with sets larger than L2
    together, each call reads its operands from HBM.  A few warm-up calls run
    first (they also trigger lazy compilation), then one call estimates the
    time so the number of repeats fits ``target_s``.  ``torch`` may be given
    (a stand-in, for tests); else it is imported.
    """

    def __init__(self, *, warmup: int = 3, min_repeats: int = 20, max_repeats: int = 200,
                 target_s: float = 0.12, lead_in: int = DEFAULT_LEAD_IN, lead_in_s: float = DEFAULT_LEAD_IN_S,
                 torch: Any = None):
        if torch is None:
            import torch  # (lazy: GPU side only)

        self.torch = torch
        self.warmup = warmup
        self.lead_in = lead_in  # untimed calls before each callable's share of a round, at least
        self.lead_in_s = lead_in_s  # and at least this many seconds of them
        self.min_repeats = min_repeats
        self.max_repeats = max_repeats
        self.target_s = target_s
        self._sleep_hz: float | None = None   # cycles of ``torch.cuda._sleep`` per second, measured once

    def _recover(self, on_error: Callable[[], None] | None) -> None:
        if on_error is not None:
            on_error()
            return
        try:
            self.torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - a sticky CUDA error; the caller's records say so
            pass

    def _fail(self, run: _EventRun, j: int, exc: Exception) -> None:
        run.failed[j] = exc
        self._recover(run.on_error)

    def _estimate_repeats(self, run: _EventRun, j: int, rounds: int) -> None:
        """Warm up callable ``j``, time one call of it, and choose its repeats from that."""
        torch, fn, inputs = self.torch, run.fns[j], run.inputs
        try:
            cpu = []
            for i in range(self.warmup):
                c0 = time.perf_counter()
                fn(*inputs[i % len(inputs)])
                cpu.append(time.perf_counter() - c0)
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            c0 = time.perf_counter()
            fn(*inputs[0])
            cpu.append(time.perf_counter() - c0)   # its launch alone: the GPU runs on after it returns
            run.cpu_s[j] = statistics.median(cpu)
            end.record()
            torch.cuda.synchronize()
            est = start.elapsed_time(end) / 1e3
            run.call_s[j] = est
            # every round gets at least one call of every callable
            run.repeats[j] = max(rounds, choose_repeats(est, target_s=self.target_s, min_repeats=self.min_repeats,
                                                        max_repeats=self.max_repeats))
        except Exception as exc:  # noqa: BLE001 - one bad callable must not stop the others
            self._fail(run, j, exc)

    def _sleep_rate(self) -> float:
        """Cycles per second of ``torch.cuda._sleep`` (the SM clock it spins on), timed once."""
        if self._sleep_hz is None:
            cuda, cycles = self.torch.cuda, 1 << 22
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            cuda._sleep(cycles)
            end.record()
            cuda.synchronize()
            self._sleep_hz = cycles / max(start.elapsed_time(end) / 1e3, 1e-6)
        return self._sleep_hz

    def _hold_gpu(self, run: _EventRun, j: int, calls: int) -> None:
        """Put a GPU sleep ahead of ``calls`` calls of callable ``j``: twice the CPU time they take to
        launch (room for a clock slower than the one the sleep was timed at), plus 50 us, at most MAX_HOLD_S;
        the timed calls then find the GPU busy with the calls queued before them, never idle."""
        seconds = min(MAX_HOLD_S, 2.0 * calls * (run.cpu_s[j] or 0.0) + 50e-6)
        self.torch.cuda._sleep(int(seconds * self._sleep_rate()))

    def lead_in_calls(self, run: _EventRun, j: int) -> int:
        """Untimed calls of callable ``j`` before each of its shares: ``lead_in``, or as many as last
        ``lead_in_s`` (a call lasting its GPU time or its launch, whichever is longer), at most
        MAX_LEAD_IN_CALLS.  Queued ahead (kernels of microseconds, whose launches take longer than they
        do) only ``lead_in``: hundreds of lead-in launches ahead of the share left its timed calls waiting
        on the host (validation/results/profile-decode-leadin-h100-2026-11-25), and such kernels draw
        little of the power cap that the time-based lead-in is for."""
        per_call = max(run.call_s[j] or 0.0, run.cpu_s[j] or 0.0)
        if self.lead_in_s <= 0 or per_call <= 0 or run.queue_ahead:
            return self.lead_in
        return max(self.lead_in, min(MAX_LEAD_IN_CALLS, math.ceil(self.lead_in_s / per_call)))

    def _launch_share(self, run: _EventRun, j: int, share: int) -> tuple[list, list] | None:
        """Queue callable ``j``'s lead-in and ``share`` timed calls of a round (behind a GPU sleep with
        ``queue_ahead``): their start and end events, or None when it raised."""
        torch, fn, inputs = self.torch, run.fns[j], run.inputs
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(share)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(share)]
        lead = self.lead_in_calls(run, j)
        try:
            if run.queue_ahead:
                self._hold_gpu(run, j, lead + share)
            # untimed lead-in calls: the first timed call then neither starts on an idle GPU (after the
            # round's synchronize) nor at the clock the kernel before it left (DEFAULT_LEAD_IN_S)
            for _ in range(lead):
                fn(*inputs[run.call % len(inputs)])
                run.call += 1
            for i in range(share):
                args = inputs[run.call % len(inputs)]
                run.call += 1
                starts[i].record()
                fn(*args)
                ends[i].record()
        except Exception as exc:  # noqa: BLE001
            self._fail(run, j, exc)
            return None
        return starts, ends

    def _collect_round(self, run: _EventRun, pending: list[tuple[int, list, list]]) -> None:
        """Wait for the round's calls, then add each callable's event times to its samples."""
        try:
            self.torch.cuda.synchronize()
            for j, starts, ends in pending:
                run.samples[j].extend(s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends))
        except Exception as exc:  # noqa: BLE001 - an asynchronous error: no one callable to pin it on
            for j, _s, _e in pending:
                self._fail(run, j, exc)

    def time_interleaved(self, fns: Sequence[Callable[..., Any]], inputs: Sequence[Sequence[Any]],
                         rounds: int = 5, *, on_error: Callable[[], None] | None = None,
                         queue_ahead: bool = False) -> list[TimingOutcome]:
        """Time every callable: warm-up and estimate each, choose each one's
        repeats, then ``rounds`` rounds in which each runs its share of them
        back to back, with one synchronize per round.  Median over all of a
        callable's samples.  A callable that raises gets its exception in the
        result and leaves the later rounds; ``on_error`` runs after each such
        exception (default: a guarded synchronize).  ``queue_ahead``: each share
        waits behind a GPU sleep while the CPU queues it (module docstring)."""
        _check_args(inputs, rounds)
        run = _EventRun(fns, inputs, on_error, queue_ahead)
        for j in range(len(fns)):
            self._estimate_repeats(run, j, rounds)
        for r in range(rounds):
            pending = []
            for j in round_order(len(fns), r):
                if run.failed[j] is not None:
                    continue
                events = self._launch_share(run, j, round_share(run.repeats[j], rounds, r))
                if events is not None:
                    pending.append((j, *events))
            if pending:
                self._collect_round(run, pending)
        return _outcomes(run.failed, run.samples, len(inputs), rounds, queue_ahead,
                         run.cpu_s if queue_ahead else None)


class FakeTimer(_Timer):
    """Dry-run timer: calls ``fn`` (which returns a fake output) and reports
    ``time_of(fn, inputs)`` for each call, with a little deterministic noise.
    ``time_of`` is asked at every call, so a fake can drift over the run."""

    def __init__(self, time_of: Callable[[Callable[..., Any], Sequence[Any]], float], *,
                 repeats: int = 20, noise: float = 0.01, sleep_s: float = 0.0, lead_in: int = DEFAULT_LEAD_IN):
        self.time_of = time_of
        self.repeats = repeats
        self.lead_in = lead_in
        self.noise = noise
        self.sleep_s = sleep_s

    def time_interleaved(self, fns: Sequence[Callable[..., Any]], inputs: Sequence[Sequence[Any]],
                         rounds: int = 5, *, on_error: Callable[[], None] | None = None,
                         queue_ahead: bool = False) -> list[TimingOutcome]:
        """The same rounds, order, input rotation and error handling as
        ``CudaEventTimer.time_interleaved``, with ``repeats`` calls per callable (``queue_ahead`` is
        only recorded: a fake launch costs nothing)."""
        _check_args(inputs, rounds)
        n_sets = len(inputs)
        out: list[Exception | None] = [None] * len(fns)
        repeats = max(rounds, self.repeats)
        samples: list[list[float]] = [[] for _ in fns]
        call = 0
        for r in range(rounds):
            for j in round_order(len(fns), r):
                if out[j] is not None:
                    continue
                try:
                    for _ in range(self.lead_in):
                        fns[j](*inputs[call % n_sets])
                        call += 1
                    for _ in range(round_share(repeats, rounds, r)):
                        fns[j](*inputs[call % n_sets])
                        call += 1
                        i = len(samples[j])
                        wobble = 1.0 + self.noise * math.sin(1.7 * i + 0.3)
                        samples[j].append(self.time_of(fns[j], inputs) * wobble)
                except Exception as exc:  # noqa: BLE001 - one bad callable must not stop the others
                    out[j] = exc
                    if on_error is not None:
                        on_error()
        if self.sleep_s:
            time.sleep(self.sleep_s * len(fns))
        return _outcomes(out, samples, n_sets, rounds, queue_ahead)
