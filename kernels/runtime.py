"""Run-time switches and output allocation shared by the kernel wrappers: debug mode (NaN-poisoned
outputs, a synchronisation after every launch) and the output tensors.  torch is imported lazily."""
from __future__ import annotations

import contextlib
import os
from typing import Callable, Iterator

#: log2(e): the kernels take the softmax scale times this, to use exp2
LOG2E = 1.4426950408889634

__all__ = ["debug_enabled", "set_debug", "debugging", "debug_sync", "empty"]

_DEBUG = os.environ.get("IOMODEL_KERNELS_DEBUG", "") not in ("", "0")


def debug_enabled() -> bool:
    return _DEBUG


def set_debug(flag: bool) -> None:
    """Debug mode: outputs are pre-filled with NaN and every launch is followed by a
    stream synchronisation that surfaces CUDA errors (also: IOMODEL_KERNELS_DEBUG=1)."""
    global _DEBUG
    _DEBUG = bool(flag)


@contextlib.contextmanager
def debugging(on: bool = True) -> Iterator[None]:
    """Debug mode (with `on`) for the calls inside, then back to what it was: the check of a kernel's
    output runs so, its timing not."""
    before = _DEBUG
    set_debug(before or on)
    try:
        yield
    finally:
        set_debug(before)


def debug_sync(synchronize: Callable[[], object], name, grid: tuple, block: tuple, smem_bytes: int) -> None:
    """In debug mode, call `synchronize` (the launch stream's) right after a launch and raise any
    CUDA error as a RuntimeError that names the launch; otherwise do nothing."""
    if not _DEBUG:
        return
    try:
        synchronize()
    except Exception as e:  # torch's CUDA error types vary by version
        raise RuntimeError(f"CUDA error after launching {name} grid={grid} block={block} "
                           f"smem={smem_bytes}: {e}") from e


def empty(shape: tuple, dtype, device):
    """An output tensor: ``torch.empty``, or in debug mode filled with NaN (unwritten parts show up)."""
    import torch

    if _DEBUG:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)
