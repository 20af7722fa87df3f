"""Measured ceilings: GEMM rate, copy bandwidth, and per-clock unit rates.

* bf16 GEMM: ``torch.matmul`` of two random 8192 x 8192 matrices, median of
  CUDA-event timings, 2 n^3 FLOPs per product.
* copy bandwidth: ``dst.copy_(src)`` of a 1 GiB tensor, bytes read + written.
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

__all__ = ["CeilingResult", "measure_ceilings", "ClockSampler", "MICROBENCH_SRC"]


MICROBENCH_SRC = r"""
#define CHAINS 8
#define UNROLL 16

extern "C" __global__ void __launch_bounds__(256) ex2_chain(float* __restrict__ out, int iters) {
    float x[CHAINS];
    #pragma unroll
    for (int j = 0; j < CHAINS; ++j) x[j] = -1.0f - 1e-3f * (float)(threadIdx.x + j);
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            #pragma unroll
            for (int j = 0; j < CHAINS; ++j) {
                asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[j]));
            }
        }
    }
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < CHAINS; ++j) s += x[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

extern "C" __global__ void __launch_bounds__(256) fma_chain(float* __restrict__ out, int iters) {
    float x[CHAINS];
    const float a = 0.999f, b = 1.0e-3f;
    #pragma unroll
    for (int j = 0; j < CHAINS; ++j) x[j] = 1.0f + 1e-3f * (float)(threadIdx.x + j);
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            #pragma unroll
            for (int j = 0; j < CHAINS; ++j) {
                asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x[j]) : "f"(a), "f"(b));
            }
        }
    }
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < CHAINS; ++j) s += x[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

#define MMA_CHAINS 4
#define MMA_UNROLL 4

extern "C" __global__ void __launch_bounds__(256) mma_chain(float* __restrict__ out, int iters) {
    // bf16 1.0 is 0x3f80; two per 32-bit register
    const unsigned one2 = 0x3f803f80u;
    unsigned a0 = one2, a1 = one2 ^ (threadIdx.x & 1u), a2 = one2, a3 = one2;
    unsigned b0 = one2, b1 = one2 ^ ((threadIdx.x >> 1) & 1u);
    float c[MMA_CHAINS][4];
    #pragma unroll
    for (int j = 0; j < MMA_CHAINS; ++j) {
        #pragma unroll
        for (int r = 0; r < 4; ++r) c[j][r] = 0.0f;
    }
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int u = 0; u < MMA_UNROLL; ++u) {
            #pragma unroll
            for (int j = 0; j < MMA_CHAINS; ++j) {
                asm volatile(
                    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                    : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                    : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
            }
        }
    }
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < MMA_CHAINS; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""

# operations each thread (or warp, for mma) issues per loop iteration
_PER_ITER = {
    "ex2_chain": 8 * 16,            # ex2 per thread
    "fma_chain": 8 * 16,            # FMA per thread
    "mma_chain": 4 * 4 * 2 * 16 * 8 * 16,  # FLOPs per warp (16 mma.sync of 4096 FLOPs)
}
_THREADS = 256
_BLOCKS_PER_SM = 4


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


def _event_median_s(torch, fn: Callable[[], Any], warmup: int, repeats: int) -> float:
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
    return statistics.median(s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends))


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


def _run_microbench(cupy, module, name: str, sm_count: int, target_s: float = 0.25, repeats: int = 3) -> float:
    """Operations per second of one chain kernel (median of ``repeats`` launches of about ``target_s``)."""
    kernel = module.get_function(name)
    blocks = sm_count * _BLOCKS_PER_SM
    out = cupy.empty(blocks * _THREADS, dtype=cupy.float32)

    def run(iters: int) -> float:
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        kernel((blocks,), (_THREADS,), (out, cupy.int32(iters)))
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / 1e3

    run(16)  # load the module
    iters = 64
    t = run(iters)
    while t < 0.02 and iters < (1 << 26):
        iters *= 4
        t = run(iters)
    iters = max(1, int(iters * target_s / max(t, 1e-9)))
    times = [run(iters) for _ in range(repeats)]
    t = statistics.median(times)
    issuers = _THREADS // 32 if name == "mma_chain" else _THREADS  # _PER_ITER counts per warp for mma
    return blocks * issuers * iters * _PER_ITER[name] / t


# per-clock unit rates (CuPy): field -> (kernel, instruction, unit counted)
_UNIT_FIELDS = {
    "exp2_per_clk_per_sm": ("ex2_chain", "ex2.approx.ftz.f32", "op"),
    "fp32_fma_per_clk_per_sm": ("fma_chain", "fma.rn.f32", "FMA"),
    "mma_sync_flops_per_clk_per_sm": ("mma_chain", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "FLOP"),
}


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
        for f in _UNIT_FIELDS:
            res.values[f] = None
            res.errors[f] = f"CuPy microbenchmarks unavailable: {type(exc).__name__}: {exc}"
        log(f"  unit-rate microbenchmarks skipped: {type(exc).__name__}: {exc}")
        return
    rates: dict[str, float] = {}
    sampler = ClockSampler(_nvidia_smi_device_ids(torch))
    with sampler:
        for f, (kname, _instr, _unit) in _UNIT_FIELDS.items():
            try:
                rates[f] = _run_microbench(cupy, module, kname, sm, target_s=0.15 if quick else 0.25)
            except Exception as exc:  # noqa: BLE001
                _record_failure(res, f, exc, kname, log)
    clock = _sampled_clock_hz(sampler, torch, spec, res)
    for f, rate in rates.items():
        _kname, instr, unit = _UNIT_FIELDS[f]
        res.values[f] = rate / (sm * clock)
        res.sources[f] = (f"python -m validation: chains of {instr} on {sm} SMs x {_BLOCKS_PER_SM} blocks x {_THREADS} "
                          f"threads, {rate / 1e12:.3f} T{unit}/s / ({sm} SM x {clock / 1e6:.0f} MHz; {res.clock_source})")
        log(f"  {instr}: {rate / 1e12:.2f} T{unit}/s = {res.values[f]:.1f} {unit}/clk/SM at {clock / 1e6:.0f} MHz")


def measure_ceilings(spec, *, quick: bool = False, log: Callable[[str], None] = print) -> CeilingResult:
    """Measure every ceiling it can; a failure leaves that value None and records why."""
    import torch

    t0 = time.perf_counter()
    res = CeilingResult()
    sm = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    _measure_torch_ceilings(torch, res, quick, log)
    _measure_unit_rates(torch, spec, sm, res, quick, log)
    res.seconds = time.perf_counter() - t0
    return res
