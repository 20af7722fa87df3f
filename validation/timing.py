"""Timing helpers: CUDA-event timing with rotated inputs, and a fake timer for dry runs.

Nothing here imports torch at module import time; ``CudaEventTimer`` imports it
when constructed.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

__all__ = ["Timing", "choose_repeats", "CudaEventTimer", "FakeTimer"]


@dataclass
class Timing:
    """Result of timing one callable: median seconds over ``repeats`` calls."""

    median_s: float
    min_s: float
    max_s: float
    repeats: int
    input_sets: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "median_ms": self.median_s * 1e3,
            "min_ms": self.min_s * 1e3,
            "max_ms": self.max_s * 1e3,
            "repeats": self.repeats,
            "input_sets": self.input_sets,
        }


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


def _summarize(samples: Sequence[float], input_sets: int) -> Timing:
    return Timing(
        median_s=statistics.median(samples),
        min_s=min(samples),
        max_s=max(samples),
        repeats=len(samples),
        input_sets=input_sets,
    )


class CudaEventTimer:
    """Times ``fn(*inputs[i % len(inputs)])`` with one pair of CUDA events per call.

    Inputs rotate among the given sets so that, with sets larger than L2
    together, each call reads its operands from HBM.  A few warm-up calls run
    first (they also trigger lazy compilation), then one call estimates the
    time so the number of repeats fits ``target_s``.
    """

    def __init__(self, *, warmup: int = 3, min_repeats: int = 20, max_repeats: int = 200,
                 target_s: float = 0.12):
        import torch  # noqa: F401  (lazy: GPU side only)

        self.torch = torch
        self.warmup = warmup
        self.min_repeats = min_repeats
        self.max_repeats = max_repeats
        self.target_s = target_s

    def __call__(self, fn: Callable[..., Any], inputs: Sequence[Sequence[Any]]) -> Timing:
        torch = self.torch
        if not inputs:
            raise ValueError("need at least one input set")
        n_sets = len(inputs)
        for i in range(self.warmup):
            fn(*inputs[i % n_sets])
        torch.cuda.synchronize()
        # estimate
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs[0])
        end.record()
        torch.cuda.synchronize()
        est = start.elapsed_time(end) / 1e3
        repeats = choose_repeats(est, target_s=self.target_s, min_repeats=self.min_repeats,
                                 max_repeats=self.max_repeats)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        for i in range(repeats):
            args = inputs[(i + 1) % n_sets]
            starts[i].record()
            fn(*args)
            ends[i].record()
        torch.cuda.synchronize()
        samples = [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)]
        return _summarize(samples, n_sets)


class FakeTimer:
    """Dry-run timer: calls ``fn`` (which returns a fake output) and reports a
    time from ``time_of(fn, inputs)``, with a little deterministic noise."""

    def __init__(self, time_of: Callable[[Callable[..., Any], Sequence[Any]], float], *,
                 repeats: int = 20, noise: float = 0.01, sleep_s: float = 0.0):
        self.time_of = time_of
        self.repeats = repeats
        self.noise = noise
        self.sleep_s = sleep_s

    def __call__(self, fn: Callable[..., Any], inputs: Sequence[Sequence[Any]]) -> Timing:
        if not inputs:
            raise ValueError("need at least one input set")
        base = self.time_of(fn, inputs)
        samples = []
        for i in range(self.repeats):
            fn(*inputs[i % len(inputs)])
            wobble = 1.0 + self.noise * math.sin(1.7 * i + 0.3)
            samples.append(base * wobble)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return _summarize(samples, len(inputs))
