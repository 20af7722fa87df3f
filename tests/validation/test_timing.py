"""The harness's timers (validation.timing) and clock sampler (validation.ceilings), without a GPU."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest


def test_choose_repeats():
    from validation.timing import choose_repeats

    assert choose_repeats(1e-3) == 120
    assert choose_repeats(1.0) == 20
    assert choose_repeats(1e-7) == 200
    assert choose_repeats(0.0) == 20 and choose_repeats(float("nan")) == 20


def test_fake_timer_median_and_rotation():
    from validation.timing import FakeTimer

    seen = []
    t = FakeTimer(lambda fn, inputs: 2e-3, repeats=21, noise=0.0)
    res = t(lambda *a: seen.append(a[0]), [(0,), (1,), (2,)])
    assert res.median_s == pytest.approx(2e-3) and res.repeats == 21 and res.input_sets == 3
    assert set(seen) == {0, 1, 2}


def _random_sets(n: int = 3) -> list[tuple[np.ndarray, ...]]:
    rng = np.random.default_rng()
    return [tuple(rng.standard_normal(8) for _ in range(3)) for _ in range(n)]


class _Drift:
    """A device that slows down with every call made, whoever makes it:
    call k takes 1 ms * (1 + per_call * k)."""

    def __init__(self, per_call: float = 0.01):
        self.per_call = per_call
        self.calls = 0
        self.now = 0.0
        self.used: list[int] = []   # id of the q of each call, in order

    def fn(self):
        def f(q, k, v):
            self.calls += 1
            self.used.append(id(q))
            self.now += self.current()
        return f

    def current(self) -> float:
        return 1e-3 * (1 + self.per_call * self.calls)


def _rel_gap(a, b) -> float:
    return abs(a.median_s / b.median_s - 1)


def test_fake_timer_interleaving_cancels_drift():
    from validation.timing import FakeTimer

    for rounds, close in ((1, False), (8, True), (10, True)):
        dev = _Drift()
        t = FakeTimer(lambda fn, inputs: dev.current(), repeats=40, noise=0.0)
        a, b = t.time_interleaved([dev.fn(), dev.fn()], _random_sets(), rounds)
        assert a.repeats == b.repeats == 40 and a.rounds == rounds
        if close:
            assert _rel_gap(a, b) < 0.01 and a.interleaved
        else:  # one after the other: the second looks much slower than the identical first
            assert b.median_s > a.median_s and _rel_gap(a, b) > 0.2 and not a.interleaved


class _FakeCuda:
    """torch.cuda stand-in: events read the fake device clock; counts synchronizes."""

    def __init__(self, dev: _Drift):
        self.dev = dev
        self.syncs = 0

    def synchronize(self):
        self.syncs += 1

    def Event(self, enable_timing=False):  # noqa: N802 - torch's name
        dev = self.dev

        class Ev:
            def record(self):
                self.t = dev.now

            def elapsed_time(self, end):
                return (end.t - self.t) * 1e3

        return Ev()


def test_cuda_event_timer_interleaves_rounds_and_rotates_inputs():
    from validation.timing import CudaEventTimer

    gaps = {}
    for rounds in (1, 8):
        dev = _Drift(per_call=0.005)
        cuda = _FakeCuda(dev)
        t = CudaEventTimer(torch=SimpleNamespace(cuda=cuda), warmup=3, min_repeats=40, max_repeats=40,
                           lead_in_s=0.0)
        sets = _random_sets()
        fns = [dev.fn(), dev.fn(), dev.fn()]
        res = t.time_interleaved(fns, sets, rounds)
        assert [r.repeats for r in res] == [40, 40, 40]
        assert cuda.syncs == 2 * len(fns) + rounds  # warm-up and estimate of each, then one per round
        timed = dev.used[len(fns) * 4:]  # after the warm-up and estimate calls
        # 40 timed calls of each callable plus one untimed lead-in call per callable and round
        assert len(timed) == 120 + rounds * len(fns)
        assert all(x != y for x, y in zip(timed, timed[1:]))  # no set twice in a row
        assert set(timed) == {id(s[0]) for s in sets}
        gaps[rounds] = max(_rel_gap(res[0], res[-1]), _rel_gap(res[1], res[0]))
    assert gaps[1] > 0.15 and gaps[8] < 0.01


@pytest.mark.parametrize("timer_kind", ["fake", "cuda"])
def test_timer_failure_of_one_callable_spares_the_others(timer_kind):
    from validation.timing import CudaEventTimer, FakeTimer, Timing

    dev = _Drift(per_call=0.0)
    calls = {"bad": 0}

    def bad(q, k, v):
        calls["bad"] += 1
        if calls["bad"] > 5:  # fine at first (warm-up, estimate), then a launch fails
            raise RuntimeError("launch failed")
        dev.fn()(q, k, v)

    recovered = []
    if timer_kind == "fake":
        t = FakeTimer(lambda fn, inputs: dev.current(), repeats=30, noise=0.0)
    else:
        t = CudaEventTimer(torch=SimpleNamespace(cuda=_FakeCuda(dev)), min_repeats=30, max_repeats=30)
    res = t.time_interleaved([dev.fn(), bad, dev.fn()], _random_sets(), 5, on_error=lambda: recovered.append(1))
    assert isinstance(res[1], RuntimeError) and "launch failed" in str(res[1])
    assert isinstance(res[0], Timing) and isinstance(res[2], Timing) and res[0].repeats == res[2].repeats == 30
    assert res[0].median_s == pytest.approx(1e-3) and recovered == [1]
    with pytest.raises(RuntimeError, match="launch failed"):
        t(bad, _random_sets())


class _SleepyCuda(_FakeCuda):
    """A fake device whose ``_sleep`` spins the clock (1 GHz) and counts where it falls in the calls."""

    def __init__(self, dev: _Drift):
        super().__init__(dev)
        self.sleeps = []   # (calls made before the sleep, seconds slept)

    def _sleep(self, cycles):
        self.sleeps.append((self.dev.calls, cycles / 1e9))
        self.dev.now += cycles / 1e9


class _PowerCap:
    """A device under a power cap: a call takes 1 ms, but a callable that follows a hungry one runs 25%
    slower until `settle_s` of its own calls have passed (the clock the hungry one left)."""

    def __init__(self, settle_s: float = 0.05):
        self.settle_s, self.now, self.last, self.since = settle_s, 0.0, None, 0.0
        self.slow_at_switch = False

    def fn(self, name: str, hungry: bool = False):
        def f(q, k, v):
            if self.last != name:
                self.slow_at_switch = self.last is not None and self.last.startswith("hungry") and not hungry
                self.last, self.since = name, self.now
            slow = self.slow_at_switch and self.now - self.since < self.settle_s
            self.now += 1e-3 * (1.25 if slow else 1.0)
        return f


def test_lead_in_lasts_long_enough_to_leave_the_kernel_before_behind():
    """The lead-in is time-based: enough untimed calls that a kernel following a hungrier one is timed at
    its own steady clock; with one lead-in call its median carries its neighbour's clock."""
    from validation.timing import CudaEventTimer

    medians = {}
    for lead_in_s in (0.0, 0.1):
        dev = _PowerCap(settle_s=0.05)
        cuda = _FakeCuda(dev)
        t = CudaEventTimer(torch=SimpleNamespace(cuda=cuda), warmup=3, min_repeats=40, max_repeats=40,
                           lead_in_s=lead_in_s)
        fns = [dev.fn("hungry"), dev.fn("light")]
        res = t.time_interleaved(fns, _random_sets(), 4)
        medians[lead_in_s] = res[1].median_s
        run_calls = t.lead_in_calls(SimpleNamespace(call_s=[1e-3, 1e-3], cpu_s=[1e-5, 1e-5], queue_ahead=False), 1)
        assert run_calls == (1 if lead_in_s == 0 else 100)
    assert medians[0.0] == pytest.approx(1.25e-3)      # every share starts behind the hungry kernel
    assert medians[0.1] == pytest.approx(1e-3)         # 100 ms of its own calls first: its own clock
    # kernels of microseconds: the lead-in is bounded by the host's launches and by MAX_LEAD_IN_CALLS
    t = CudaEventTimer(torch=SimpleNamespace(cuda=_FakeCuda(_PowerCap())), lead_in_s=0.1)
    assert t.lead_in_calls(SimpleNamespace(call_s=[2e-5], cpu_s=[5e-4], queue_ahead=False), 0) == 200
    assert t.lead_in_calls(SimpleNamespace(call_s=[1e-6], cpu_s=[1e-6], queue_ahead=False), 0) == 1000
    # queued ahead (decode, varlen): the one lead-in call, whatever lead_in_s says
    assert t.lead_in_calls(SimpleNamespace(call_s=[1e-3], cpu_s=[1e-5], queue_ahead=True), 0) == 1


def test_queue_ahead_puts_a_gpu_sleep_before_each_share():
    """queue_ahead: one calibrating sleep, then one sleep ahead of each callable's share of every round,
    long enough for the share's launches; the sleeps fall outside the timed calls, and the timings say
    they were queued ahead, with the CPU time of a launch."""
    from validation.timing import CudaEventTimer

    dev = _Drift(per_call=0.0)
    cuda = _SleepyCuda(dev)
    t = CudaEventTimer(torch=SimpleNamespace(cuda=cuda), warmup=3, min_repeats=20, max_repeats=20)
    res = t.time_interleaved([dev.fn(), dev.fn()], _random_sets(), 4, queue_ahead=True)
    assert len(cuda.sleeps) == 1 + 2 * 4
    assert t._sleep_hz == pytest.approx(1e9)                   # measured once, on the fake 1 GHz clock
    assert all(50e-6 <= secs <= 0.2 for _calls, secs in cuda.sleeps[1:])
    # queued ahead, one lead-in call a share (not 0.1 s of them): each sleep falls before a share's 6 calls
    assert [c for c, _ in cuda.sleeps[1:]] == [8 + 6 * i for i in range(8)]   # after 4 warm-up/estimate calls each
    assert all(r.median_s == pytest.approx(1e-3) for r in res)   # the sleeps are not in the samples
    for r in res:
        d = r.as_dict()
        assert d["queued_ahead"] is True and d["launch_cpu_ms"] >= 0 and r.launch_cpu_s is not None
    plain = CudaEventTimer(torch=SimpleNamespace(cuda=_SleepyCuda(dev)), min_repeats=20, max_repeats=20)
    (r,) = plain.time_interleaved([dev.fn()], _random_sets(), 2)
    assert "queued_ahead" not in r.as_dict() and "launch_cpu_ms" not in r.as_dict()   # rows as before


def test_clock_sampler_with_fake_nvidia_smi(tmp_path, monkeypatch):
    from validation.ceilings import ClockSampler

    script = tmp_path / "nvidia-smi"
    # refuses the UUID, answers for the index
    script.write_text('#!/bin/sh\ncase "$*" in *GPU-*) echo "No devices were found" >&2; exit 6;; esac\necho 1980\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    import time as _time

    with ClockSampler(["GPU-nope", "0"], period_s=0.02) as s:
        _time.sleep(0.4)
    assert s.device_id == "0"
    assert s.median_hz() == pytest.approx(1.98e9)
    assert len(s.samples) >= 2
    script.write_text("#!/bin/sh\necho broken >&2\nexit 9\n")
    with ClockSampler([None], period_s=0.02) as s:
        _time.sleep(0.1)
    assert s.median_hz() is None and s.error == "broken"


def test_round_order_mirrors_each_pair_and_varies_the_predecessors():
    """round_order: a pair of rounds is one permutation forward then backward (every callable at the same mean
    position over the pair), the first pair the callables' own order, and over the later pairs each callable
    follows more than one other (no fixed predecessor)."""
    from validation.timing import round_order

    n = 5
    assert round_order(n, 0) == list(range(n)) and round_order(n, 1) == list(range(n))[::-1]
    after: dict[int, set] = {j: set() for j in range(n)}
    for r in range(0, 14, 2):
        fwd, back = round_order(n, r), round_order(n, r + 1)
        assert sorted(fwd) == list(range(n)) and back == fwd[::-1]
        assert [fwd.index(j) + back.index(j) for j in range(n)] == [n - 1] * n
        for order in (fwd, back):
            for a, b in zip(order, order[1:]):
                after[b].add(a)
    assert all(len(x) >= 3 for x in after.values()), after
    assert round_order(n, 4) == round_order(n, 4)   # seeded: a rerun orders alike
