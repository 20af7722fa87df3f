"""Measured ceilings: GEMM rate, copy bandwidth, and per-clock unit rates.

* bf16 GEMM: ``torch.matmul`` of two random 8192 x 8192 matrices, median of
  CUDA-event timings, 2 n^3 FLOPs per product.
* copy bandwidth: ``dst.copy_(src)`` of a 1 GiB tensor, bytes read + written.
* read roof (the decode rows only, not part of the calibration): ``torch.sum`` of a 2 GiB float32
  tensor, bytes read per second (``measure_read``); the results file keeps it as ``read_roof``.
* L2 bandwidth: a CuPy kernel (``validation.microbench.L2_READ_SRC``) that re-reads an 8 MiB buffer
  (well inside L2) many times from every SM with ``ld.global.cg``; bytes read per second, median of
  CUDA-event timings after warm-up, the sums of the words read checked first.
* unit rates: small CuPy RawKernels that issue one instruction kind in
  independent chains (``ex2.approx.ftz.f32``; ``fma.rn.f32``;
  ``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32``) on every SM, divided
  by SMs x SM clock.  The clock is the median of ``nvidia-smi --query-gpu=clocks.sm``
  samples taken while the kernels run; if sampling fails, the clock torch
  reports (``torch.cuda.clock_rate``), then the device's maximum clock; the
  result says which.

torch and cupy are imported inside the functions (GPU side only).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from .microbench import BLOCKS_PER_SM, MICROBENCH_SRC, THREADS, UNIT_FIELDS, measure_l2, run_microbench

__all__ = ["CeilingResult", "measure_ceilings", "measure_read", "ClockSampler", "MICROBENCH_SRC"]


@dataclass
class CeilingResult:
    """Measured ceilings plus how they were obtained."""

    values: dict[str, float | None] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    clock_source: str | None = None
    clock_samples_mhz: list[float] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # copies of the dicts and the list, in field order


class ClockSampler:
    """Samples the SM clock with nvidia-smi in a background thread.

    ``device_ids``: ids to try in turn (UUID, index); ``None`` means the first GPU listed."""

    def __init__(self, device_ids: list[str | None] | str | None = None, period_s: float = 0.1):
        if not isinstance(device_ids, list):
            device_ids = [device_ids]
        self.candidates = device_ids
        self.device_id = device_ids[0]
        self.period_s = period_s
        self.samples: list[float] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def available() -> bool:
        return shutil.which("nvidia-smi") is not None

    def _query(self) -> float | None:
        cmd = ["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"]
        if self.device_id is not None:
            cmd += ["-i", self.device_id]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            return None
        if out.returncode != 0:
            msg = (out.stderr or out.stdout).strip()
            self.error = msg.splitlines()[-1] if msg else f"nvidia-smi exited {out.returncode}"
            return None
        lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
        try:
            return float(lines[0])
        except (IndexError, ValueError):
            self.error = f"cannot parse nvidia-smi output {out.stdout!r}"
            return None

    def _pick_device(self) -> bool:
        """Use the first candidate id nvidia-smi answers for."""
        for cand in self.candidates:
            self.device_id = cand
            v = self._query()
            if v is not None and v > 0:
                self.samples.append(v)
                return True
        return False

    def _loop(self) -> None:
        if not self._pick_device():
            return
        while not self._stop.is_set():
            v = self._query()
            if v is not None and v > 0:
                self.samples.append(v)
            elif self.error is not None and not self.samples:
                return  # it does not work here; stop trying
            self._stop.wait(self.period_s)

    def __enter__(self) -> "ClockSampler":
        self.samples = []
        self._stop.clear()
        if self.available():
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        else:
            self.error = "nvidia-smi not found"
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def median_hz(self) -> float | None:
        return statistics.median(self.samples) * 1e6 if self.samples else None


def _nvidia_smi_device_ids(torch) -> list[str | None]:
    """Ids nvidia-smi may accept for the current torch device, best first:
    its UUID, the first entry of CUDA_VISIBLE_DEVICES, then the first GPU listed."""
    ids: list[str | None] = []
    try:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        uuid = getattr(props, "uuid", None)
        if uuid:
            text = str(uuid)
            ids.append(text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}")
    except Exception:  # noqa: BLE001 - best effort
        pass
    vis = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if vis:
        ids.append(vis)
    ids.append(None)
    return ids


def _fallback_clock_hz(torch, spec) -> tuple[float | None, str]:
    try:
        mhz = float(torch.cuda.clock_rate())
        if mhz > 0:
            return mhz * 1e6, "torch.cuda.clock_rate() (SM clock via NVML, read once after the run)"
    except Exception:  # noqa: BLE001
        pass
    try:
        import cupy

        khz = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["clockRate"]
        if khz > 0:
            return khz * 1e3, "cudaDeviceProp.clockRate (the device's maximum SM clock, not sampled)"
    except Exception:  # noqa: BLE001
        pass
    fact = spec.facts.get("max_boost_clock_hz")
    if fact is not None:
        return float(fact.value), f"spec {spec.key} max_boost_clock_hz (no clock could be read)"
    return float(spec.clock_hz), f"spec {spec.key} clock_hz (no clock could be read)"


def _event_samples_s(torch, fn: Callable[[], Any], warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)]


def _event_median_s(torch, fn: Callable[[], Any], warmup: int, repeats: int) -> float:
    return statistics.median(_event_samples_s(torch, fn, warmup, repeats))


def measure_gemm(torch, n: int = 8192, repeats: int = 10) -> float:
    from iomodel.problems import conventional_flops

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    t = _event_median_s(torch, lambda: torch.matmul(a, b, out=c), warmup=3, repeats=repeats)
    return conventional_flops({"M": n, "N": n, "K": n}) / t


def measure_copy(torch, nbytes: int = 1 << 30, repeats: int = 10) -> float:
    src = torch.empty(nbytes // 4, device="cuda", dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    t = _event_median_s(torch, lambda: dst.copy_(src), warmup=3, repeats=repeats)
    return 2.0 * nbytes / t


def measure_read(torch, nbytes: int = 2 << 30, repeats: int = 10) -> dict[str, Any]:
    """The read roof of the decode rows: ``torch.sum`` of an ``nbytes`` float32 tensor (nothing written
    but one scalar), median of ``repeats`` CUDA-event timings after 3 warm-ups, bytes read per second.
    A decode kernel reads its KV cache once and writes almost nothing, so this, not the copy (read +
    write), is the rate it can approach; the sum is checked finite, so a broken read shows."""
    x = torch.empty(nbytes // 4, device="cuda", dtype=torch.float32).uniform_()
    out = torch.empty((), device="cuda", dtype=torch.float32)
    samples = _event_samples_s(torch, lambda: torch.sum(x, dim=0, out=out), warmup=3, repeats=repeats)
    total = float(out)
    x = None   # the 2 GiB go back before the decode rows make their caches
    torch.cuda.empty_cache()
    if not 0 < total < float("inf"):
        raise RuntimeError(f"read roof: the sum of {nbytes >> 20} MiB of uniform values is {total}")
    t = statistics.median(samples)
    return {"bandwidth": nbytes / t, "bytes": nbytes, "median_ms": t * 1e3, "min_ms": min(samples) * 1e3,
            "max_ms": max(samples) * 1e3, "repeats": repeats,
            "source": f"python -m validation: torch.sum of a {nbytes >> 20} MiB float32 tensor, median of "
                      f"{repeats} CUDA-event timings, bytes read"}


def _record_failure(res: CeilingResult, key: str, exc: Exception, what: str, log: Callable[[str], None]) -> None:
    res.values[key] = None
    res.errors[key] = f"{type(exc).__name__}: {exc}"
    log(f"  {what} failed: {res.errors[key]}")


def _measure_torch_ceilings(torch, res: CeilingResult, quick: bool, log: Callable[[str], None]) -> None:
    """The bf16 GEMM rate and the copy bandwidth, through torch: (value, name, measure, source, log line) each."""
    gemm_n = 4096 if quick else 8192
    copy_bytes, copy_size = ((256 << 20), "256 MiB") if quick else ((1 << 30), "1 GiB")
    measures = (("gemm_flops", "GEMM", lambda: measure_gemm(torch, n=gemm_n),
                 f"python -m validation: torch.matmul bf16 {gemm_n}^3, random inputs, median of 10 CUDA-event "
                 "timings, 2n^3 FLOPs", lambda v: f"  GEMM bf16 {gemm_n}^3: {v / 1e12:.1f} TFLOP/s"),
                ("copy_bandwidth", "copy", lambda: measure_copy(torch, nbytes=copy_bytes),
                 f"python -m validation: dst.copy_(src) of a {copy_size} float32 tensor, median of 10 CUDA-event "
                 "timings, bytes read + written", lambda v: f"  copy: {v / 1e12:.2f} TB/s (read + write)"))
    for key, what, measure, source, done in measures:
        try:
            res.values[key] = measure()
            res.sources[key] = source
            log(done(res.values[key]))
        except Exception as exc:  # noqa: BLE001
            _record_failure(res, key, exc, what, log)
    torch.cuda.empty_cache()


def _sampled_clock_hz(sampler: ClockSampler, torch, spec, res: CeilingResult) -> float:
    """The SM clock the chain kernels ran at (the sampled median, else the best fallback); records how."""
    clock = sampler.median_hz()
    if clock is not None:
        res.clock_samples_mhz = list(sampler.samples)
        res.clock_source = (f"median of {len(sampler.samples)} nvidia-smi clocks.sm samples taken while the "
                            "unit-rate kernels ran")
    else:
        clock, how = _fallback_clock_hz(torch, spec)
        res.clock_source = f"{how}; nvidia-smi sampling failed: {sampler.error}"
    res.values["clock_hz"] = clock
    res.sources["clock_hz"] = res.clock_source
    return clock


def _measure_unit_rates(torch, spec, sm: int, res: CeilingResult, quick: bool, log: Callable[[str], None]) -> None:
    """Per-clock, per-SM rates of ex2, FMA and mma.sync (CuPy chain kernels), at the clock sampled meanwhile."""
    try:
        import cupy
        module = cupy.RawModule(code=MICROBENCH_SRC, options=("--std=c++17",))
    except Exception as exc:  # noqa: BLE001
        for f in UNIT_FIELDS:
            res.values[f] = None
            res.errors[f] = f"CuPy microbenchmarks unavailable: {type(exc).__name__}: {exc}"
        log(f"  unit-rate microbenchmarks skipped: {type(exc).__name__}: {exc}")
        return
    rates: dict[str, float] = {}
    sampler = ClockSampler(_nvidia_smi_device_ids(torch))
    with sampler:
        for f, (kname, _instr, _unit) in UNIT_FIELDS.items():
            try:
                rates[f] = run_microbench(cupy, module, kname, sm, target_s=0.15 if quick else 0.25)
            except Exception as exc:  # noqa: BLE001
                _record_failure(res, f, exc, kname, log)
    clock = _sampled_clock_hz(sampler, torch, spec, res)
    for f, rate in rates.items():
        _kname, instr, unit = UNIT_FIELDS[f]
        res.values[f] = rate / (sm * clock)
        res.sources[f] = (f"python -m validation: chains of {instr} on {sm} SMs x {BLOCKS_PER_SM} blocks x {THREADS} "
                          f"threads, {rate / 1e12:.3f} T{unit}/s / ({sm} SM x {clock / 1e6:.0f} MHz; {res.clock_source})")
        log(f"  {instr}: {rate / 1e12:.2f} T{unit}/s = {res.values[f]:.1f} {unit}/clk/SM at {clock / 1e6:.0f} MHz")


def _measure_l2(spec, sm: int, res: CeilingResult, quick: bool, log: Callable[[str], None]) -> None:
    """Bytes per second read from a buffer resident in L2 by every SM (``validation.microbench``)."""
    try:
        import cupy

        m = measure_l2(cupy, sm, int(spec.l2_bytes), target_s=0.005 if quick else 0.01)
    except Exception as exc:  # noqa: BLE001
        _record_failure(res, "l2_bandwidth", exc, "L2 read", log)
        return
    res.values["l2_bandwidth"] = m.bandwidth
    res.sources["l2_bandwidth"] = m.source()
    log(f"  L2 read ({m.buffer_bytes >> 20} MiB buffer, {m.passes} passes): {m.bandwidth / 1e12:.2f} TB/s")


def _measure_hbm_latency(torch, res: CeilingResult, log: Callable[[str], None]) -> None:
    """The HBM latency by Little's law on a read with few loads in flight (``validation.read_floor``)."""
    try:
        from .read_floor import measure_hbm_latency

        res.values["hbm_latency_s"], res.sources["hbm_latency_s"] = measure_hbm_latency(torch)
    except Exception as exc:  # noqa: BLE001
        _record_failure(res, "hbm_latency_s", exc, "HBM latency", log)
        return
    torch.cuda.empty_cache()
    log(f"  HBM latency (Little's law, few loads in flight): {res.values['hbm_latency_s'] * 1e9:.0f} ns")


def measure_ceilings(spec, *, quick: bool = False, log: Callable[[str], None] = print) -> CeilingResult:
    """Measure every ceiling it can; a failure leaves that value None and records why."""
    import torch

    t0 = time.perf_counter()
    res = CeilingResult()
    sm = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    _measure_torch_ceilings(torch, res, quick, log)
    _measure_unit_rates(torch, spec, sm, res, quick, log)
    _measure_l2(spec, sm, res, quick, log)
    _measure_hbm_latency(torch, res, log)
    res.seconds = time.perf_counter() - t0
    return res
