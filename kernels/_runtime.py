"""Run-time build (CuPy NVRTC) and launch plumbing shared by the kernel wrappers.

torch and cupy are imported lazily inside the functions.
"""
from __future__ import annotations

import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

from .build import kernel_source

__all__ = ["get_function", "launch", "debug_enabled", "set_debug", "debug_sync", "empty", "max_dynamic_smem",
           "precompile", "NVRTC_OPTIONS"]

#: Options passed to NVRTC.  The architecture option is added by CuPy itself,
#: ``-arch=sm_XY`` of the current device (adding a second
#: ``--gpu-architecture`` makes NVRTC reject the options: cupy/cupy#3292).
NVRTC_OPTIONS: tuple[str, ...] = ("-std=c++17",)

_EXTRA_OPTIONS: tuple[str, ...] = ()    # e.g. ("-DIOM_CP_ASYNC_L2_HINT=1",) for A/B experiments
_LOCK = threading.Lock()
_MODULES: dict[tuple, object] = {}        # (header, names, device) -> cupy.RawModule
_FUNCTIONS: dict[tuple, object] = {}      # (header, name, device) -> cupy.RawKernel
_DEBUG = os.environ.get("IOMODEL_KERNELS_DEBUG", "") not in ("", "0")


def set_extra_options(options: tuple[str, ...] = ()) -> None:
    """Extra NVRTC options (e.g. -D switches of the headers) for kernels fetched from now on."""
    global _EXTRA_OPTIONS
    _EXTRA_OPTIONS = tuple(options)


def debug_enabled() -> bool:
    return _DEBUG


def set_debug(flag: bool) -> None:
    """Debug mode: outputs are pre-filled with NaN and every launch is followed by a
    stream synchronisation that surfaces CUDA errors (also: IOMODEL_KERNELS_DEBUG=1)."""
    global _DEBUG
    _DEBUG = bool(flag)


def debug_sync(synchronize: Callable[[], object], name, grid: tuple, block: tuple, smem_bytes: int) -> None:
    """In debug mode, call `synchronize` (the launch stream's) right after a launch and raise any
    CUDA error as a RuntimeError that names the launch; otherwise do nothing."""
    if not _DEBUG:
        return
    try:
        synchronize()
    except Exception as e:  # cupy's / torch's CUDA error types
        raise RuntimeError(f"CUDA error after launching {name} grid={grid} block={block} "
                           f"smem={smem_bytes}: {e}") from e


def empty(shape: tuple, dtype, device):
    """An output tensor: ``torch.empty``, or in debug mode filled with NaN (unwritten parts show up)."""
    import torch

    if _DEBUG:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def _device_index(device) -> int:
    return device.index if device.index is not None else 0


def max_dynamic_smem(device) -> int:
    """Opt-in dynamic shared memory per block of `device`, in bytes."""
    import cupy

    idx = _device_index(device)
    return int(cupy.cuda.runtime.deviceGetAttribute(
        cupy.cuda.runtime.cudaDevAttrMaxSharedMemoryPerBlockOptin, idx))


def get_function(header: str, name: str, all_names: tuple[str, ...], device, smem_bytes: int):
    """The kernel `name` (a template-id, e.g. ``iom::flash_fwd_kernel<...>``),
    compiled from csrc/`header` together with `all_names` into one cached module."""
    import cupy

    idx = _device_index(device)
    opts = NVRTC_OPTIONS + _EXTRA_OPTIONS
    fkey = (header, name, idx, opts)
    fn = _FUNCTIONS.get(fkey)
    if fn is not None:
        return fn
    mkey = (header, all_names, idx, opts)
    with _LOCK:
        mod = _MODULES.get(mkey)
        if mod is None:
            mod = cupy.RawModule(code=kernel_source(header), options=opts,
                                 name_expressions=list(all_names))
            _MODULES[mkey] = mod
    with cupy.cuda.Device(idx):
        fn = mod.get_function(name)
        if smem_bytes > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = smem_bytes
    _FUNCTIONS[fkey] = fn
    return fn


_STREAMS: dict[tuple[int, int], object] = {}


def _cupy_stream(torch_stream, idx: int):
    """CuPy view of a torch stream (cached per device and handle)."""
    import cupy

    key = (idx, int(torch_stream.cuda_stream))
    st = _STREAMS.get(key)
    if st is None:
        if hasattr(cupy.cuda.Stream, "from_external"):
            try:
                st = cupy.cuda.Stream.from_external(torch_stream)
            except Exception:
                st = None
        if st is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                st = cupy.cuda.ExternalStream(key[1], idx)
        _STREAMS[key] = st
    return st


def launch(fn, device, grid: tuple, block: tuple, args: tuple, smem_bytes: int) -> None:
    """Launch on torch's current stream of `device`; in debug mode synchronise and
    raise on any CUDA error."""
    import cupy
    import torch

    idx = _device_index(device)
    with cupy.cuda.Device(idx):
        stream = _cupy_stream(torch.cuda.current_stream(device), idx)
        with stream:
            fn(grid, block, args, shared_mem=smem_bytes)
        debug_sync(stream.synchronize, getattr(fn, "name", fn), grid, block, smem_bytes)


def precompile(jobs: Iterable[Callable[[], object]], workers: int | None = None) -> int:
    """Run kernel-fetching callables concurrently (NVRTC compiles are independent)."""
    jobs = list(jobs)
    workers = workers or min(16, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as ex:
        for f in [ex.submit(j) for j in jobs]:
            f.result()
    return len(jobs)
