"""FlashAttention forward for Hopper (sm_90a): TMA + wgmma + warp specialization.

The CUDA source lives in ``kernels/csrc/flash_fwd_sm90.cuh`` (with the helpers
``sm90_common.cuh`` and the generated ``sm90_wgmma.cuh``).  This module

* describes a kernel configuration (:class:`Sm90Config`) and its exact dynamic shared memory,
* lists the shipped configurations (:data:`SHIPPED_SM90`),
* compiles a configuration at run time with NVRTC (through CuPy; a ctypes NVRTC or ``nvcc``
  are fall-backs) for ``sm_90a`` and caches the cubin in memory and on disk (headers inlined
  and nvcc driven by ``kernels.build``, as for the mma.sync kernels),
* builds the TMA descriptors (``cuTensorMapEncodeTiled``) and launches the kernel through the
  CUDA driver API (ctypes ``libcuda``) on torch's current stream,
* reports registers / spills / static shared memory of every shipped configuration with the
  local ``nvcc -Xptxas -v`` (:func:`resource_report`) and checks the SASS for ``HGMMA``
  (:func:`sass_report`).

Input checks are the package's shared ones (``kernels.checks``); ``kernels.set_debug`` applies
here too.  ``import kernels.sm90`` needs only the standard library; torch / cupy are imported
lazily.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from . import _runtime
from .build import CSRC, CompileError, gencode, inline_includes, parse_ptxas, run_nvcc
from .checks import check_qkv, check_scale

ARCH = "sm_90a"
NVCC_ARCH_FLAGS = (gencode(ARCH),)
NVRTC_ARCH_FLAG = f"--gpu-architecture={ARCH}"
SUPPORTED_HEAD_DIMS = (64, 128, 256)
DTYPES = ("bf16", "fp16")
ALIGN_SLACK_BYTES = 1024  # the kernel rounds the dynamic SMEM base up to 1024 B (swizzle atoms)
MBARRIER_BYTES = 8
# wgmma N values for which sm90_wgmma.cuh has wrappers.
WGMMA_SS_N = tuple(range(16, 257, 16))
WGMMA_RS_N = SUPPORTED_HEAD_DIMS


# ----------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class Sm90Config:
    """One compiled variant of the sm90 kernel.

    block_m    query rows per CTA = 64 * consumers (each consumer warpgroup owns 64 rows)
    block_n    keys per K/V chunk (multiple of 16, <= 256; registers limit it in practice)
    stages     depth of the K/V shared-memory ring
    head_dim   d (64, 128 or 256)
    consumers  consumer warpgroups; the CTA has 128 * (consumers + 1) threads
    """

    block_m: int
    block_n: int
    stages: int
    head_dim: int
    consumers: int = 2

    def __post_init__(self):
        if self.consumers not in (1, 2, 3):
            raise ValueError(f"consumers must be 1, 2 or 3, got {self.consumers}")
        if self.block_m != 64 * self.consumers:
            raise ValueError(f"block_m must be 64 * consumers = {64 * self.consumers}, got {self.block_m}")
        if self.block_n % 16 or not 16 <= self.block_n <= 256:
            raise ValueError(f"block_n must be a multiple of 16 in [16, 256], got {self.block_n}")
        if self.head_dim not in SUPPORTED_HEAD_DIMS:
            raise ValueError(f"head_dim must be one of {SUPPORTED_HEAD_DIMS}, got {self.head_dim}")
        if self.stages < 1:
            raise ValueError(f"stages must be >= 1, got {self.stages}")

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)

    # ---- shared memory, term by term (bytes); elem_bytes = 2 for bf16 / fp16
    def q_tile_bytes(self, elem_bytes: int = 2) -> int:
        return self.block_m * self.head_dim * elem_bytes

    def kv_chunk_bytes(self, elem_bytes: int = 2) -> int:
        """One K chunk (= one V chunk)."""
        return self.block_n * self.head_dim * elem_bytes

    def mbarrier_bytes(self) -> int:
        """Q full, Q empty + (K full, K empty, V full, V empty) per stage, 8 bytes each."""
        return MBARRIER_BYTES * (2 + 4 * self.stages)

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Exact dynamic shared memory the kernel requests:

        1024 (alignment slack) + block_m*d*e (Q) + stages * 2 * block_n*d*e (K + V chunks)
        + 8 * (2 + 4*stages) (mbarriers).  Static shared memory is 0.
        """
        return (ALIGN_SLACK_BYTES + self.q_tile_bytes(elem_bytes)
                + self.stages * 2 * self.kv_chunk_bytes(elem_bytes) + self.mbarrier_bytes())

    @property
    def name(self) -> str:
        return f"m{self.block_m}n{self.block_n}s{self.stages}d{self.head_dim}c{self.consumers}"


# Shipped variants; per head dim the first entry is the fallback default.
SHIPPED_SM90: tuple[Sm90Config, ...] = (
    Sm90Config(128, 128, 2, 64, 2),
    Sm90Config(192, 128, 2, 64, 3),
    Sm90Config(128, 176, 2, 64, 2),
    Sm90Config(128, 64, 2, 64, 2),
    Sm90Config(128, 96, 3, 64, 2),
    Sm90Config(128, 128, 3, 64, 2),
    Sm90Config(128, 192, 2, 64, 2),
    Sm90Config(192, 64, 3, 64, 3),
    Sm90Config(192, 96, 2, 64, 3),
    Sm90Config(128, 128, 2, 128, 2),
    Sm90Config(128, 176, 2, 128, 2),
    Sm90Config(128, 128, 3, 128, 2),
    Sm90Config(128, 64, 2, 128, 2),
    Sm90Config(128, 96, 2, 128, 2),
    Sm90Config(128, 160, 2, 128, 2),
    Sm90Config(128, 96, 3, 128, 2),
    Sm90Config(128, 64, 4, 128, 2),
    Sm90Config(128, 80, 2, 256, 2),
    Sm90Config(128, 64, 2, 256, 2),
)
# The tile ranking of the validation sweep needs several configurations per head dim; every one of
# them compiles without spills (tests/test_kernels_sm90_build.py) and is checked on the GPU by the sweep.


def shipped_for(head_dim: int) -> list[Sm90Config]:
    return [c for c in SHIPPED_SM90 if c.head_dim == head_dim]


# ----------------------------------------------------------------------------------- source
def kernel_name(cfg: Sm90Config, dtype: str, causal: bool) -> str:
    return f"flash_fwd_sm90_{cfg.name}_{dtype}_{'causal' if causal else 'full'}"


def kernel_instance(cfg: Sm90Config, dtype: str, causal: bool) -> str:
    """C++ text instantiating one extern "C" kernel for (cfg, dtype, causal)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    name = kernel_name(cfg, dtype, causal)
    traits = (f"sm90::FwdTraits<{cfg.block_m}, {cfg.block_n}, {cfg.stages}, {cfg.head_dim}, "
              f"{cfg.consumers}, {'true' if dtype == 'bf16' else 'false'}, {'true' if causal else 'false'}>")
    return (
        f"typedef {traits} T_{name};\n"
        f'extern "C" __global__ void __launch_bounds__(T_{name}::kThreads, 1)\n'
        f"{name}(const __grid_constant__ TmaDesc tmQ, const __grid_constant__ TmaDesc tmK,\n"
        f"    const __grid_constant__ TmaDesc tmV, u16* O, float* L, int B, int H, int H_kv, int N_q,\n"
        f"    int N_k, float scale_log2, int sec, int* counter) {{\n"
        f"  sm90::flash_fwd_sm90<T_{name}>(tmQ, tmK, tmV, O, L, B, H, H_kv, N_q, N_k, scale_log2, sec,\n"
        f"                                counter);\n"
        f"}}\n"
    )


_KERNEL_INCLUDE = '#include "flash_fwd_sm90.cuh"\n'


def kernel_source(cfg: Sm90Config, dtype: str, causal: bool) -> str:
    """One variant's translation unit (the kernel header is included, not inlined)."""
    return _KERNEL_INCLUDE + kernel_instance(cfg, dtype, causal)


def _wgmma_header_text(ss_ns=WGMMA_SS_N, rs_ns=WGMMA_RS_N) -> str:
    """Text of csrc/sm90_wgmma.cuh (one inline-asm wrapper per wgmma shape and type)."""
    out: list[str] = []
    w = out.append
    w("// sm90_wgmma.cuh -- GENERATED by `python -m kernels.sm90 gen-wgmma` (kernels/sm90.py:")
    w("// _wgmma_header_text).  Do not edit by hand.")
    w("//")
    w("// wgmma.mma_async m64nNk16 with f32 accumulators for bf16 and f16 inputs:")
    w("//   wgmma_ss<N, BF16>(d, desc_a, desc_b, scale_d)      A and B from SMEM, both K-major")
    w("//   wgmma_rs<N, BF16>(d, a0..a3, desc_b, scale_d)      A from registers, B MN-major (tnspB=1)")
    w("// scale_d = 0 overwrites the accumulator (D = A*B), 1 accumulates (D += A*B).")
    w("#pragma once")
    w('#include "sm90_common.cuh"')
    w("")
    w("namespace sm90 {")
    w("")
    for kind, ns in (("ss", ss_ns), ("rs", rs_ns)):
        for n in ns:
            nreg = n // 2
            for ty in ("bf16", "f16"):
                dregs = ", ".join(f"%{i}" for i in range(nreg))
                if kind == "ss":
                    a_ops, ib, isc = f"%{nreg}", nreg + 1, nreg + 2
                    tail = "p, 1, 1, 0, 0"
                    sig = "u64 desc_a, u64 desc_b, int scale_d"
                    ins = '"l"(desc_a), "l"(desc_b), "r"(scale_d)'
                else:
                    a_ops = "{" + ", ".join(f"%{nreg + j}" for j in range(4)) + "}"
                    ib, isc = nreg + 4, nreg + 5
                    tail = "p, 1, 1, 1"
                    sig = "u32 a0, u32 a1, u32 a2, u32 a3, u64 desc_b, int scale_d"
                    ins = '"r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(scale_d)'
                w(f"__device__ __forceinline__ void wgmma_{kind}_n{n}_{ty}(float (&d)[{nreg}], {sig}) {{")
                w("    asm volatile(")
                w('        "{\\n.reg .pred p;\\n"')
                w(f'        "setp.ne.b32 p, %{isc}, 0;\\n"')
                w(f'        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} "')
                w(f'        "{{{dregs}}}, "')
                w(f'        "{a_ops}, %{ib}, {tail};\\n}}\\n"')
                outs = ", ".join(f'"+f"(d[{i}])' for i in range(nreg))
                w(f"        : {outs}")
                w(f"        : {ins});")
                w("}")
        w("")
    for kind, ns in (("ss", ss_ns), ("rs", rs_ns)):
        w("template <int N, bool BF16>")
        if kind == "ss":
            w("__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], u64 desc_a, u64 desc_b, int scale_d) {")
            call = "(d, desc_a, desc_b, scale_d)"
        else:
            w("__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], u32 a0, u32 a1, u32 a2, u32 a3, u64 desc_b,")
            w("                                         int scale_d) {")
            call = "(d, a0, a1, a2, a3, desc_b, scale_d)"
        for i, n in enumerate(ns):
            w(f"    {'if constexpr' if i == 0 else '} else if constexpr'} (N == {n}) {{")
            w(f"        if constexpr (BF16) wgmma_{kind}_n{n}_bf16{call};")
            w(f"        else wgmma_{kind}_n{n}_f16{call};")
        w("    } else {")
        w(f'        static_assert(N < 0, "wgmma_{kind}: unsupported N");')
        w("    }")
        w("}")
        w("")
    w("}  // namespace sm90")
    return "\n".join(out) + "\n"


def write_wgmma_header() -> Path:
    path = CSRC / "sm90_wgmma.cuh"
    path.write_text(_wgmma_header_text())
    return path


# ----------------------------------------------------------------------------------- compile
_CACHE_DIR = Path(os.environ.get("IOMODEL_SM90_CACHE", Path.home() / ".cache" / "iomodel" / "sm90"))
_cubin_mem: dict[str, bytes] = {}
_lock = threading.Lock()


def _source_key(src: str, opts: list[str]) -> str:
    """Cache key of a self-contained source (headers inlined) and its options."""
    h = hashlib.sha256()
    h.update(src.encode())
    h.update("\0".join(opts).encode())
    return h.hexdigest()[:32]


def _find_libnvrtc() -> str | None:
    env = os.environ.get("IOMODEL_LIBNVRTC")
    if env:
        return env
    try:  # NVIDIA's pip wheel (nvidia-cuda-nvrtc), as installed next to torch / cupy
        import nvidia.cu13 as _cu13  # type: ignore

        for base in getattr(_cu13, "__path__", []):
            p = Path(base) / "lib" / "libnvrtc.so.13"
            if p.exists():
                return str(p)
    except ImportError:
        pass
    for cand in ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"):
        try:
            ctypes.CDLL(cand)
            return cand
        except OSError:
            continue
    return ctypes.util.find_library("nvrtc")


def _nvrtc_cupy(src: str, name: str, opts: list[str]) -> bytes:
    from cupy_backends.cuda.libs import nvrtc as _nv  # type: ignore

    prog = _nv.createProgram(src, name + ".cu", [], [])
    try:
        try:
            _nv.compileProgram(prog, opts)
        except Exception as exc:  # noqa: BLE001 -- re-raised with the compiler log
            raise CompileError(f"NVRTC failed for {name}:\n{_nv.getProgramLog(prog)}") from exc
        return bytes(_nv.getCUBIN(prog))
    finally:
        _nv.destroyProgram(prog)


def _nvrtc_ctypes(src: str, name: str, opts: list[str]) -> bytes:
    path = _find_libnvrtc()
    if path is None:
        raise RuntimeError("libnvrtc not found (set IOMODEL_LIBNVRTC)")
    lib = ctypes.CDLL(path)
    prog = ctypes.c_void_p()
    r = lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), (name + ".cu").encode(), 0, None, None)
    if r != 0:
        raise RuntimeError(f"nvrtcCreateProgram failed ({r})")
    try:
        copts = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        r = lib.nvrtcCompileProgram(prog, len(opts), copts)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        if r != 0:
            raise CompileError(f"NVRTC failed for {name} ({r}):\n{log.value.decode(errors='replace')}")
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        r = lib.nvrtcGetCUBIN(prog, buf)
        if r != 0:
            raise RuntimeError(f"nvrtcGetCUBIN failed ({r})")
        return buf.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _nvcc_cubin(src: str, name: str, defines: tuple[str, ...]) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        cubin, _ = run_nvcc(src, ARCH, tmp, name, tuple(f"-D{d}" for d in defines))
        return cubin.read_bytes()


def compile_cubin(cfg: Sm90Config, dtype: str, causal: bool, defines: tuple[str, ...] = (),
                  backend: str = "auto") -> bytes:
    """sm_90a cubin for one variant.  backend: 'auto' (CuPy NVRTC, then ctypes NVRTC, then
    nvcc), 'cupy', 'nvrtc' (ctypes) or 'nvcc'.  Cached in memory and under IOMODEL_SM90_CACHE."""
    unit = kernel_source(cfg, dtype, causal)
    src = inline_includes(unit)  # self-contained: NVRTC needs no headers, the key covers them all
    name = kernel_name(cfg, dtype, causal)
    opts = [NVRTC_ARCH_FLAG, "-std=c++17", *[f"-D{d}" for d in defines]]
    key = _source_key(src, opts)
    with _lock:
        if key in _cubin_mem:
            return _cubin_mem[key]
    disk = _CACHE_DIR / f"{name}-{key}.cubin"
    if disk.exists():
        cubin = disk.read_bytes()
    else:
        errors = []
        cubin = None
        order = {"auto": ("cupy", "nvrtc", "nvcc")}.get(backend, (backend,))
        for b in order:
            try:
                if b == "cupy":
                    cubin = _nvrtc_cupy(src, name, opts)
                elif b == "nvrtc":
                    cubin = _nvrtc_ctypes(src, name, opts)
                elif b == "nvcc":  # the unit with its #include: nvcc's errors name the header lines
                    cubin = _nvcc_cubin(unit, name, defines)
                else:
                    raise ValueError(f"unknown backend {b!r}")
                break
            except CompileError:  # a real compile error: do not mask it
                raise
            except Exception as exc:  # noqa: BLE001 -- compiler unavailable: try the next backend
                errors.append(f"{b}: {exc!r}")
        if cubin is None:
            raise RuntimeError("could not compile the sm90 kernel:\n" + "\n".join(errors))
        try:
            _CACHE_DIR.mkdir(parents=True, exist_ok=True)
            tmp = disk.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(cubin)
            tmp.replace(disk)
        except OSError:
            pass
    with _lock:
        _cubin_mem[key] = cubin
    return cubin


# ----------------------------------------------------------------------------------- driver
class _Driver:
    """Minimal ctypes binding of the CUDA driver API (libcuda.so.1)."""

    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
    TMA_DTYPE = {"fp16": 6, "bf16": 9}  # CU_TENSOR_MAP_DATA_TYPE_FLOAT16 / BFLOAT16
    SWIZZLE_128B = 3
    L2_PROMOTION_256B = 3

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        L = self.lib
        vp, u32, i32 = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
        L.cuInit.argtypes = [u32]
        L.cuGetErrorName.argtypes = [i32, ctypes.POINTER(ctypes.c_char_p)]
        L.cuDeviceGet.argtypes = [ctypes.POINTER(i32), i32]
        L.cuDeviceGetAttribute.argtypes = [ctypes.POINTER(i32), i32, i32]
        L.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(vp), i32]
        L.cuCtxGetCurrent.argtypes = [ctypes.POINTER(vp)]
        L.cuCtxSetCurrent.argtypes = [vp]
        L.cuModuleLoadData.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p]
        L.cuModuleGetFunction.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_char_p]
        L.cuFuncSetAttribute.argtypes = [vp, i32, i32]
        L.cuLaunchKernel.argtypes = [vp, u32, u32, u32, u32, u32, u32, u32, vp,
                                     ctypes.POINTER(vp), ctypes.POINTER(vp)]
        L.cuTensorMapEncodeTiled.argtypes = [vp, i32, u32, vp, ctypes.POINTER(ctypes.c_uint64),
                                             ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32),
                                             ctypes.POINTER(ctypes.c_uint32), i32, i32, i32, i32]
        self.check(L.cuInit(0), "cuInit")
        self._ctx: dict[int, int] = {}

    def check(self, res: int, what: str):
        if res != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(res, ctypes.byref(name))
            raise RuntimeError(f"{what} failed: {name.value.decode() if name.value else res}")

    def use_device(self, index: int):
        """Make the device's primary context (the one torch uses) current on this thread."""
        ctx = self._ctx.get(index)
        if ctx is None:
            dev = ctypes.c_int()
            self.check(self.lib.cuDeviceGet(ctypes.byref(dev), index), "cuDeviceGet")
            c = ctypes.c_void_p()
            self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(c), dev.value), "cuDevicePrimaryCtxRetain")
            ctx = self._ctx[index] = c.value
        cur = ctypes.c_void_p()
        self.check(self.lib.cuCtxGetCurrent(ctypes.byref(cur)), "cuCtxGetCurrent")
        if cur.value != ctx:
            self.check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def max_smem_optin(self, index: int) -> int:
        v = ctypes.c_int()
        self.check(self.lib.cuDeviceGetAttribute(ctypes.byref(v), self.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                                 index), "cuDeviceGetAttribute")
        return v.value

    def load_function(self, cubin: bytes, name: str, smem: int) -> int:
        """Load `cubin` into the current context and return its kernel `name`, opted in to `smem` bytes
        of dynamic shared memory (the caller caches the handle)."""
        mod = ctypes.c_void_p()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(mod), cubin), "cuModuleLoadData")
        fn = ctypes.c_void_p()
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), "cuModuleGetFunction")
        self.check(self.lib.cuFuncSetAttribute(fn, self.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
                   "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
        return fn.value

    def tensor_map(self, dtype: str, ptr: int, dims, strides_bytes, box):
        """4-D tiled tensor map, SWIZZLE_128B, zero OOB fill.  dims innermost first."""
        tm = (ctypes.c_uint64 * 16)()
        rank = len(dims)
        gdim = (ctypes.c_uint64 * rank)(*dims)
        gstr = (ctypes.c_uint64 * (rank - 1))(*strides_bytes)
        bdim = (ctypes.c_uint32 * rank)(*box)
        estr = (ctypes.c_uint32 * rank)(*([1] * rank))
        self.check(self.lib.cuTensorMapEncodeTiled(ctypes.addressof(tm), self.TMA_DTYPE[dtype], rank, ptr, gdim, gstr,
                                                   bdim, estr, 0, self.SWIZZLE_128B, self.L2_PROMOTION_256B, 0),
                   f"cuTensorMapEncodeTiled(dims={list(dims)}, strides={list(strides_bytes)}, box={list(box)})")
        return tm

    def launch(self, fn: int, grid, block, smem: int, stream: int, args):
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
        self.check(self.lib.cuLaunchKernel(fn, *grid, *block, smem, stream, params, None), "cuLaunchKernel")


_driver: _Driver | None = None


def _get_driver() -> _Driver:
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver


# ----------------------------------------------------------------------------------- API
def _check_config(config, d: int) -> Sm90Config:
    """An Sm90Config (a dict with its fields is converted) for head dim `d`."""
    if isinstance(config, dict):
        config = Sm90Config(**config)
    if not isinstance(config, Sm90Config):
        raise TypeError(f"config must be an Sm90Config or a dict, got {type(config).__name__}")
    if config.head_dim != d:
        raise ValueError(f"config {config} is for head_dim={config.head_dim}, inputs have d={d}")
    return config


_launch_cache: dict[tuple, int] = {}
# Launch a persistent grid (min(#tiles, #SMs) CTAs walking the tiles) by default.
PERSISTENT = True
# Compile-time switches used by default: none.  Available: SM90_STATIC_SCHEDULE (flash_fwd_sm90.cuh,
# FwdTraits) and SM90_WATCHDOG (sm90_common.cuh, mbar_wait).
DEFAULT_DEFINES: tuple[str, ...] = ()


@functools.lru_cache(maxsize=None)
def _device_props(index: int):
    """torch's properties of CUDA device `index` (capability, SM count, L2 size, name), cached."""
    import torch

    return torch.cuda.get_device_properties(index)


def _tma_dims(t):
    """(dims innermost first, strides in bytes) of a (B, H, N, d) tensor, size-1 dims given a legal stride."""
    B, H, N, d = t.shape
    es = t.element_size()
    s_n = t.stride(2) * es if N > 1 else d * es
    s_h = t.stride(1) * es if H > 1 else N * s_n
    s_b = t.stride(0) * es if B > 1 else H * s_h
    return [d, N, H, B], [s_n, s_h, s_b]


_choice_cache: dict[tuple, Sm90Config] = {}


def choose_config(B: int, H: int, H_kv: int, N_q: int, N_k: int, d: int, causal: bool, dtype: str,
                  gpu: str = "H100") -> Sm90Config:
    """Best shipped config for the shape: iomodel.api.rank_configs if available, else the default."""
    cands = shipped_for(d)
    if not cands:
        raise ValueError(f"no shipped sm90 config for head dim {d}")
    key = (B, H, H_kv, N_q, N_k, d, bool(causal), dtype, gpu)
    if key in _choice_cache:
        return _choice_cache[key]
    try:
        from iomodel.api import rank_configs  # type: ignore

        ranked = rank_configs(kernel="flash_sm90", gpu=gpu,
                              shape=dict(B=B, H=H, H_kv=H_kv, N_q=N_q, N_k=N_k, d=d, causal=causal, dtype=dtype),
                              candidates=[asdict(c) for c in cands])
        choice = Sm90Config(**ranked[0][0])
    except Exception as exc:  # noqa: BLE001 -- model missing or unable to rank: measured default
        warnings.warn(f"kernels.sm90: performance model unavailable ({exc!r}); using default_config", stacklevel=3)
        choice = default_config(d, causal)
    _choice_cache[key] = choice
    return choice


def default_config(d: int, causal: bool) -> Sm90Config:
    """Fallback when the performance model is not available (measured-best on H100, see docs)."""
    # H100 SXM, bf16, B*N = 16384, H*d = 2048, N >= 4096 (docs/kernels_sm90.md); d=256 unmeasured.
    table = {
        (64, False): Sm90Config(192, 128, 2, 64, 3),
        (64, True): Sm90Config(192, 128, 2, 64, 3),
        (128, False): Sm90Config(128, 128, 3, 128, 2),
        (128, True): Sm90Config(128, 128, 3, 128, 2),
        (256, False): Sm90Config(128, 80, 2, 256, 2),
        (256, True): Sm90Config(128, 80, 2, 256, 2),
    }
    return table[(d, bool(causal))]


# Causal tile order: sections of heads whose K and V together take at most this share of the L2, so
# that the CTAs running at once re-read K/V the L2 still holds (TileInfo in the kernel).  Sections
# only pay when a head's K/V is small: below MIN_SECTION_HEADS heads per section all tiles go
# longest first over all heads.  0 turns sections off.
L2_SECTION_SHARE = 0.4
MIN_SECTION_HEADS = 8


def heads_per_section(B: int, H: int, H_kv: int, N_k: int, d: int, elem_bytes: int, l2_bytes: int) -> int:
    """Query heads per causal scheduling section (B * H: one section)."""
    group = H // H_kv
    kv_heads = int(L2_SECTION_SHARE * l2_bytes // max(2 * N_k * d * elem_bytes, 1))
    if kv_heads * group < MIN_SECTION_HEADS:
        return B * H
    return max(1, min(B * H, kv_heads * group))


def flash_attention_sm90(q, k, v, causal: bool = False, config: Sm90Config | None = None,
                         scale: float | None = None, return_lse: bool = False, out=None,
                         _defines: tuple[str, ...] | None = None, _persistent=None, _sections: int | None = None):
    """softmax(q k^T * scale [+ causal mask]) v on an sm_90 GPU.

    q: (B, H, N_q, d), k and v: (B, H_kv, N_k, d); bf16 or fp16; last dim contiguous, other
    strides multiples of 16 bytes (any layout, e.g. a (B, N, H, d) tensor transposed, is read
    in place through the TMA descriptor: no copy).  H % H_kv == 0 (GQA: query head h reads kv
    head h // (H // H_kv)).  causal: query i sees keys j <= i + N_k - N_q (bottom-right aligned);
    a query row that sees no key gets O = 0 and LSE = -inf.
    Returns O (B, H, N_q, d) in the input dtype, and with return_lse the natural-log LSE
    (B, H, N_q) float32.  ``out`` may be a preallocated contiguous output tensor.
    ``config``: an Sm90Config (or a dict of its fields); None asks :func:`choose_config`.
    Private knobs (A/B runs): ``_defines`` compile-time switches (default DEFAULT_DEFINES),
    ``_persistent`` (default PERSISTENT), ``_sections`` query heads per causal scheduling section
    (default :func:`heads_per_section`).
    """
    import torch

    shape = check_qkv(q, k, v, head_dims=SUPPORTED_HEAD_DIMS)
    B, H, H_kv, N_q, N_k, d = (shape[key] for key in ("B", "H", "H_kv", "N_q", "N_k", "d"))
    dtype = shape["dtype"]
    if config is not None:
        config = _check_config(config, d)
    if max(N_q, N_k) >= 2**31 - 256 or B * H * -(-N_q // 64) >= 2**31:
        raise ValueError(f"problem too large for 32-bit tile indices: B={B}, H={H}, N_q={N_q}, N_k={N_k}")
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    props = _device_props(dev)
    if (props.major, props.minor) != (9, 0):
        raise RuntimeError(f"the sm90 kernel needs an sm_90 (Hopper) GPU, {props.name} "
                           f"is sm_{props.major}{props.minor}")
    scale = check_scale(scale, d)
    causal = bool(causal)
    if _defines is None:
        _defines = DEFAULT_DEFINES
    if config is None:
        config = choose_config(B, H, H_kv, N_q, N_k, d, causal, dtype, gpu=props.name)
    smem = config.smem_bytes(q.element_size())

    if out is None:
        out = _runtime.empty((B, H, N_q, d), q.dtype, q.device)
    elif tuple(out.shape) != (B, H, N_q, d) or out.dtype != q.dtype or not out.is_contiguous() or out.device != q.device:
        raise ValueError(f"out must be a contiguous {q.dtype} tensor of shape {(B, H, N_q, d)} on {q.device}")
    lse = _runtime.empty((B, H, N_q), torch.float32, q.device) if return_lse else None

    persistent = PERSISTENT if _persistent is None else bool(_persistent)
    num_tiles = -(-N_q // config.block_m) * H * B
    drv = _get_driver()
    with torch.cuda.device(dev):
        drv.use_device(dev)
        key = (dev, config, dtype, causal, tuple(_defines))
        fn = _launch_cache.get(key)
        if fn is None:
            if smem > drv.max_smem_optin(dev):
                raise ValueError(f"config {config} needs {smem} B of shared memory, the device allows "
                                 f"{drv.max_smem_optin(dev)}")
            cubin = compile_cubin(config, dtype, causal, tuple(_defines))
            fn = _launch_cache[key] = drv.load_function(cubin, kernel_name(config, dtype, causal), smem)
        grid = (min(num_tiles, props.multi_processor_count) if persistent else num_tiles, 1, 1)
        sec = _sections if _sections is not None else (
            heads_per_section(B, H, H_kv, N_k, d, q.element_size(), props.L2_cache_size) if causal else B * H)
        sec = max(1, min(int(sec), B * H))
        stream = torch.cuda.current_stream(dev)
        # causal kernels (d <= 128) hand out tiles from a counter, zeroed here in stream order
        counter = _tile_counter(dev, stream) if causal and d <= 128 else None
        dq, sq = _tma_dims(q)
        dk_, sk = _tma_dims(k)
        dv, sv = _tma_dims(v)
        tmq = drv.tensor_map(dtype, q.data_ptr(), dq, sq, [64, config.block_m, 1, 1])
        tmk = drv.tensor_map(dtype, k.data_ptr(), dk_, sk, [64, config.block_n, 1, 1])
        tmv = drv.tensor_map(dtype, v.data_ptr(), dv, sv, [64, config.block_n, 1, 1])
        args = [tmq, tmk, tmv, ctypes.c_void_p(out.data_ptr()),
                ctypes.c_void_p(lse.data_ptr() if lse is not None else 0), ctypes.c_int(B),
                ctypes.c_int(H), ctypes.c_int(H_kv), ctypes.c_int(N_q), ctypes.c_int(N_k),
                ctypes.c_float(scale * 1.4426950408889634), ctypes.c_int(sec),
                ctypes.c_void_p(counter.data_ptr() if counter is not None else 0)]
        block = (config.threads, 1, 1)
        drv.launch(fn, grid, block, smem, stream.cuda_stream, args)
        _runtime.debug_sync(stream.synchronize, kernel_name(config, dtype, causal), grid, block, smem)
    return (out, lse) if return_lse else out


_counters: dict[tuple[int, int], object] = {}


def _tile_counter(index: int, stream):
    """The dynamic schedule's tile counter for (device, stream), zeroed on that stream (one per
    stream, so kernels running at once on different streams never share one)."""
    import torch

    key = (index, stream.cuda_stream)
    c = _counters.get(key)
    if c is None:
        c = _counters[key] = torch.zeros(1, dtype=torch.int32, device=f"cuda:{index}")
    c.zero_()
    return c


# ----------------------------------------------------------------------------------- reports
_PTXAS_WARN = re.compile(r"\((C75\d\d)\)[^\n]*?function '(\w+)'")


def resource_report(configs=SHIPPED_SM90, dtypes=("bf16", "fp16"), causal=(False, True),
                    keep_dir: str | None = None) -> dict:
    """Compile every (config, dtype, causal) variant with the local nvcc in one invocation
    (``nvcc -cubin -gencode=arch=compute_90a,code=sm_90a -Xptxas -v``) and parse ptxas' report.

    Returns {kernel_name: {config, dtype, causal, registers, spill_stores, spill_loads,
    stack_frame, static_smem, dynamic_smem, ptxas_codes}} plus '_log' and '_cubin' (path)."""
    variants = {kernel_name(c, dt, ca): (c, dt, ca) for c in configs for dt in dtypes for ca in causal}
    src = _KERNEL_INCLUDE + "".join(kernel_instance(*v) for v in variants.values())
    cubin, log = run_nvcc(src, ARCH, keep_dir or tempfile.mkdtemp(prefix="sm90_report_"), "sm90_all",
                          ("-Xptxas", "-v"))
    report: dict = {}
    for name, rec in parse_ptxas(log).items():
        if name not in variants:
            continue
        c, dt, ca = variants[name]
        report[name] = dict(config=c, dtype=dt, causal=ca, registers=rec["registers"],
                            spill_stores=rec["spill_stores"], spill_loads=rec["spill_loads"],
                            stack_frame=rec["stack"], static_smem=rec["static_smem"],
                            dynamic_smem=c.smem_bytes(2), ptxas_codes=[])
    for m in _PTXAS_WARN.finditer(log):
        if m.group(2) in report:
            report[m.group(2)]["ptxas_codes"].append(m.group(1))
    report["_log"] = log
    report["_cubin"] = str(cubin)
    return report


def sass_report(cubin_path: str | None = None) -> dict | None:
    """Count HGMMA (and HMMA) instructions per kernel with ``cuobjdump --dump-sass``.
    Compiles all shipped bf16 variants first when no cubin is given.  None if cuobjdump is absent."""
    tool = shutil.which("cuobjdump")
    if tool is None:
        return None
    if cubin_path is None:
        cubin_path = resource_report(dtypes=("bf16",))["_cubin"]
    res = subprocess.run([tool, "--dump-sass", cubin_path], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"cuobjdump failed:\n{res.stderr}")
    counts: dict[str, dict[str, int]] = {}
    current = None
    for line in res.stdout.splitlines():
        m = re.search(r"Function : (\w+)", line)
        if m:
            current = m.group(1)
            counts[current] = {"HGMMA": 0, "HMMA": 0, "LDL": 0, "STL": 0}
            continue
        if current is None:
            continue
        for op in ("HGMMA", "HMMA", "LDL", "STL"):
            if re.search(rf"\b{op}\b", line):
                counts[current][op] += 1
    return counts


def _main(argv=None):
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m kernels.sm90")
    ap.add_argument("cmd", choices=("gen-wgmma", "report", "sass"))
    a = ap.parse_args(argv)
    if a.cmd == "gen-wgmma":
        print(write_wgmma_header())
    elif a.cmd == "report":
        rep = resource_report()
        for k, r in rep.items():
            if not k.startswith("_"):
                print(f"{k:55s} regs={r['registers']:4d} spill={r['spill_stores']}/{r['spill_loads']} "
                      f"static_smem={r['static_smem']} dyn_smem={r['dynamic_smem']} {' '.join(r['ptxas_codes'])}")
    else:
        print(json.dumps(sass_report(), indent=1))


if __name__ == "__main__":
    _main()
