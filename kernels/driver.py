"""The CUDA driver layer of every kernel: ctypes ``libcuda``, no CuPy.

Kernels run in the primary context of torch's device (the one torch itself uses), so torch tensors'
pointers are valid in it and launches go on torch's current stream in stream order with torch's own
work.  Per device: modules are loaded once, functions looked up once and opted in to the dynamic
shared memory they launch with.  Launch arguments are ctypes values in the kernel's parameter order
(``c_void_p`` pointers, ``c_longlong``, ``c_int``, ``c_float``, or a tensor map passed by value).
torch is imported inside the functions.
"""
from __future__ import annotations

import ctypes
import functools
import threading
from dataclasses import dataclass

from . import runtime

__all__ = ["Kernel", "device_index", "device_props", "capability", "max_smem_optin", "kernel", "launch",
           "max_active_clusters", "tensor_map", "current_stream", "current_stream_handle", "ptr", "strides",
           "Prepared", "TensorMapSlot"]

vp, u32, i32, u64 = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_uint64


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h): a launch's grid, block, dynamic SMEM and stream, no attributes (a kernel's cluster
    dims are its own, ``__cluster_dims__``)."""
    _fields_ = [("grid", u32 * 3), ("block", u32 * 3), ("smem", u32), ("stream", vp), ("attrs", vp), ("n_attrs", u32)]


class _Driver:
    """Minimal ctypes binding of the CUDA driver API (libcuda.so.1)."""

    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
    TMA_DTYPE = {"fp16": 6, "bf16": 9}  # CU_TENSOR_MAP_DATA_TYPE_FLOAT16 / BFLOAT16
    SWIZZLE_64B = 2
    SWIZZLE_128B = 3
    L2_PROMOTION_256B = 3

    def __init__(self):
        self.lib = L = ctypes.CDLL("libcuda.so.1")
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
        L.cuOccupancyMaxActiveBlocksPerMultiprocessor.argtypes = [ctypes.POINTER(i32), vp, i32, ctypes.c_size_t]
        L.cuLaunchKernel.argtypes = [vp, u32, u32, u32, u32, u32, u32, u32, vp, ctypes.POINTER(vp), ctypes.POINTER(vp)]
        L.cuTensorMapEncodeTiled.argtypes = [vp, i32, u32, vp, ctypes.POINTER(u64), ctypes.POINTER(u64),
                                             ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                                             i32, i32, i32, i32]
        self.check(L.cuInit(0), "cuInit")
        self._ctx: dict[int, int] = {}

    def check(self, res: int, what: str) -> None:
        if res != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(res, ctypes.byref(name))
            raise RuntimeError(f"{what} failed: {name.value.decode() if name.value else res}")

    def use_device(self, index: int) -> None:
        """Make the device's primary context (the one torch uses) current on this thread."""
        ctx = self._ctx.get(index)
        if ctx is None:
            dev, c = ctypes.c_int(), ctypes.c_void_p()
            self.check(self.lib.cuDeviceGet(ctypes.byref(dev), index), "cuDeviceGet")
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

    def load_module(self, cubin: bytes) -> int:
        """Load `cubin` into the current context."""
        mod = ctypes.c_void_p()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(mod), cubin), "cuModuleLoadData")
        return mod.value

    def function(self, module: int, symbol: str) -> int:
        fn = ctypes.c_void_p()
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(fn), module, symbol.encode()),
                   f"cuModuleGetFunction({symbol})")
        return fn.value

    def set_max_dynamic_smem(self, fn: int, smem: int) -> None:
        self.check(self.lib.cuFuncSetAttribute(fn, self.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
                   "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")

    def blocks_per_sm(self, fn: int, threads: int, smem: int) -> int:
        n = i32()
        self.check(self.lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), fn, threads, smem),
                   "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return n.value

    def max_active_clusters(self, fn: int, grid_x: int, threads: int, smem: int) -> int:
        fn_query = self.lib.cuOccupancyMaxActiveClusters   # (CUDA 12.0 on: looked up here, not at load)
        fn_query.argtypes = [ctypes.POINTER(i32), vp, ctypes.POINTER(_LaunchConfig)]
        cfg = _LaunchConfig((u32 * 3)(grid_x, 1, 1), (u32 * 3)(threads, 1, 1), smem, None, None, 0)
        n = i32()
        self.check(fn_query(ctypes.byref(n), fn, ctypes.byref(cfg)), "cuOccupancyMaxActiveClusters")
        return n.value

    def tensor_map(self, dtype: str, ptr: int, dims, strides_bytes, box):
        """Tiled tensor map, SWIZZLE_128B, zero OOB fill, 256-B L2 promotion.  dims innermost first."""
        return TensorMapSlot(dtype, dims, strides_bytes, box).set(ptr).map

    def encode_tiled(self, tm, dtype: int, rank: int, ptr: int, gdim, gstr, bdim, estr,
                     swizzle: int = SWIZZLE_128B) -> None:
        self.check(self.lib.cuTensorMapEncodeTiled(ctypes.addressof(tm), dtype, rank, ptr, gdim, gstr, bdim, estr, 0,
                                                   swizzle, self.L2_PROMOTION_256B, 0),
                   f"cuTensorMapEncodeTiled(dims={list(gdim)}, strides={list(gstr)}, box={list(bdim)})")

    def launch(self, fn: int, grid, block, smem: int, stream: int, args) -> None:
        # kernelParams: the address of each argument (ctypes.addressof: ctypes.cast(pointer(a)) costs
        # ~4 us an argument, the launch's largest host cost); `args` keeps the values alive meanwhile
        params = (vp * len(args))(*[ctypes.addressof(a) for a in args])
        self.check(self.lib.cuLaunchKernel(fn, *grid, *block, smem, stream, params, None), "cuLaunchKernel")


@functools.cache
def _get() -> _Driver:
    """The process's CUDA driver binding, loaded on first use."""
    return _Driver()


# ------------------------------------------------------------------------------------ devices
def device_index(device) -> int:
    """The CUDA device index of a torch device (its own, else torch's current one)."""
    if device.index is not None:
        return device.index
    import torch

    return torch.cuda.current_device()


@functools.lru_cache(maxsize=None)
def device_props(index: int):
    """torch's properties of CUDA device `index` (name, capability, SM count, L2 size), cached."""
    import torch

    return torch.cuda.get_device_properties(index)


def capability(index: int) -> tuple[int, int]:
    p = device_props(index)
    return p.major, p.minor


@functools.lru_cache(maxsize=None)
def max_smem_optin(index: int) -> int:
    """Opt-in dynamic shared memory per block of device `index`, in bytes."""
    return _get().max_smem_optin(index)


# ------------------------------------------------------------------------------------ kernels
@dataclass(frozen=True)
class Kernel:
    """A function of a loaded module on one device."""

    fn: int
    name: str      # what the caller asked for (a template-id or an extern "C" name), for messages
    device: int


_loaded: dict[tuple[int, str], int] = {}          # (device, module key) -> CUmodule
_lock = threading.Lock()
_kernels: dict[tuple[int, str, str], Kernel] = {}  # (device, module key, name) -> Kernel
_smem_optin: dict[int, int] = {}                  # CUfunction -> dynamic SMEM it is opted in to


def kernel(index: int, module, name: str, smem: int) -> Kernel:
    """Kernel `name` of a compiled module (``kernels.compile.Module``) on device `index`, allowed `smem`
    bytes of dynamic shared memory (above 48 KB a function must opt in).  A driver older than the NVRTC
    that built it is one line naming the extra to install (``kernels.cuda_versions``)."""
    from .cuda_versions import check

    check()
    drv = _get()
    key = (index, module.key, name)
    with _lock:
        drv.use_device(index)
        k = _kernels.get(key)
        if k is None:
            mod = _loaded.get(key[:2])
            if mod is None:
                mod = _loaded[key[:2]] = drv.load_module(module.cubin)
            k = _kernels[key] = Kernel(drv.function(mod, module.symbol(name)), name, index)
        if smem > _smem_optin.get(k.fn, 0):
            drv.set_max_dynamic_smem(k.fn, smem)
            _smem_optin[k.fn] = smem
    return k


def max_active_clusters(k: Kernel, grid_x: int, threads: int, smem: int) -> int:
    """Clusters of `k` (compiled with its cluster dims) that can run at once on the device, for a 1-D grid of
    `grid_x` CTAs of `threads` threads and `smem` bytes of dynamic shared memory: a persistent grid of clusters
    larger than this would run a second wave (the GPCs' SM counts, not the SM count over the cluster size, bound
    it)."""
    drv = _get()
    drv.use_device(k.device)
    return drv.max_active_clusters(k.fn, grid_x, threads, smem)


def blocks_per_sm(k: Kernel, threads: int, smem: int) -> int:
    """CTAs of `k` (`threads` a CTA, `smem` bytes of dynamic shared memory) resident on one SM at once: the
    driver's occupancy, which sees the registers ptxas gave the kernel."""
    drv = _get()
    with _lock:
        drv.use_device(k.device)
        return drv.blocks_per_sm(k.fn, threads, smem)


def current_stream(index: int):
    import torch

    return torch.cuda.current_stream(index)


def current_stream_handle(index: int) -> int:
    """The CUDA handle of torch's current stream on device `index` (without building a torch Stream)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(index) if raw is not None else torch.cuda.current_stream(index).cuda_stream


def launch(k: Kernel, grid: tuple, block: tuple, args: list, smem: int, stream=None) -> None:
    """Launch on `stream` (default: torch's current stream of the kernel's device); in debug mode
    synchronise and raise any CUDA error as a RuntimeError naming the launch."""
    drv = _get()
    stream = current_stream(k.device) if stream is None else stream
    drv.use_device(k.device)
    drv.launch(k.fn, grid, block, smem, stream.cuda_stream, args)
    runtime.debug_sync(stream.synchronize, k.name, grid, block, smem)


class Prepared:
    """A launch whose arguments are built once (its kernel, grid, sizes): a call sets the values of the
    leading pointer arguments and launches.  For kernels called many times with one signature (a decode
    step, a plan of ``kernels.plans``), where building the arguments would cost more host time than the GPU
    work.  ``tail``'s ctypes objects may be changed in place between launches (a launch copies the values)."""

    def __init__(self, k: Kernel, grid: tuple, block: tuple, smem: int, n_pointers: int, tail: list):
        self.k, self.grid, self.block, self.smem = k, tuple(grid), tuple(block), smem
        self.pointers = [ctypes.c_void_p() for _ in range(n_pointers)]
        self.args = self.pointers + list(tail)
        self.params = (vp * len(self.args))(*[ctypes.addressof(a) for a in self.args])

    def __call__(self, pointers, stream) -> None:
        """Launch with these data pointers (ints, 0 for none) on `stream` (a torch stream); not to be
        shared between threads (the pointer values live in the object)."""
        for slot, value in zip(self.pointers, pointers):
            slot.value = value
        self.launch(stream.cuda_stream)

    def launch(self, stream: int) -> None:
        """Launch with the arguments as they are now on the CUDA stream handle `stream`."""
        drv = _get()
        drv.use_device(self.k.device)
        drv.check(drv.lib.cuLaunchKernel(self.k.fn, *self.grid, *self.block, self.smem, stream, self.params, None),
                  "cuLaunchKernel")
        if runtime.debug_enabled():
            runtime.debug_sync(lambda: _synchronize(self.k.device), self.k.name, self.grid, self.block, self.smem)


def _synchronize(index: int) -> None:
    import torch

    torch.cuda.synchronize(index)


class TensorMapSlot:
    """A TMA descriptor (CUtensorMap, 128 bytes, passed by value) of one dtype, extent, strides and box, whose
    global address is set with :meth:`set`: encoded again only when the address changes (a launch copies
    its arguments, so the descriptor may be encoded anew after it)."""

    def __init__(self, dtype: str, dims, strides_bytes, box, swizzle_bytes: int = 128):
        rank = len(dims)
        self._swizzle = {64: _Driver.SWIZZLE_64B, 128: _Driver.SWIZZLE_128B}[swizzle_bytes]
        self.map = (u64 * 16)()
        self.ptr: int | None = None
        self._dtype, self._rank = _Driver.TMA_DTYPE[dtype], rank
        self._gdim = (u64 * rank)(*dims)
        self._gstr = (u64 * (rank - 1))(*strides_bytes)
        self._bdim = (ctypes.c_uint32 * rank)(*box)
        self._estr = (ctypes.c_uint32 * rank)(*([1] * rank))

    def set(self, ptr: int) -> "TensorMapSlot":
        if ptr != self.ptr:
            _get().encode_tiled(self.map, self._dtype, self._rank, ptr, self._gdim, self._gstr, self._bdim, self._estr,
                                self._swizzle)
            self.ptr = ptr
        return self


def tensor_map(index: int, dtype: str, ptr_: int, dims, strides_bytes, box):
    """A TMA descriptor (CUtensorMap, 128 bytes) for a kernel parameter passed by value."""
    drv = _get()
    drv.use_device(index)
    return drv.tensor_map(dtype, ptr_, dims, strides_bytes, box)


# ------------------------------------------------------------------------------------ arguments
def ptr(t) -> ctypes.c_void_p:
    """A tensor's data pointer as a kernel argument (None: a null pointer)."""
    return ctypes.c_void_p(t.data_ptr() if t is not None else 0)


def strides(t, dims: int = 3) -> list[ctypes.c_longlong]:
    """The element strides of a tensor's leading `dims` dimensions as ``long long`` arguments."""
    return [ctypes.c_longlong(t.stride(i)) for i in range(dims)]
