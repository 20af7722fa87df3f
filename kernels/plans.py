"""Launch plans kept per call signature: the host side of a kernel call done once.

A call's checks (ranks, dtypes, strides, heads), the model's choice of family and config, the kernel's
lookup and the packing of its arguments depend on the tensors' shapes, strides, dtype and device and on the
call's flags, not on the data: a loop calling with one signature (a benchmark, a training step's layers, a
decode step) pays them once.  A plan's call then allocates the outputs, sets the data pointers and launches.
At small shapes that is most of a call's time (validation/results/profile-host-h100-2026-11-24: 175 us of
host time a forward call for a 159 us kernel before the forward had plans).

The cache is one a thread, as a plan holds the pointer values of the call it is launching.  What a plan
cannot know from the signature, it checks on every call: the tensors' base addresses (16-byte aligned, what
TMA and 16-byte loads need).
"""
from __future__ import annotations

import threading

from .checks import check_base

__all__ = ["MAX_PLANS", "layout", "key", "lookup", "store", "cache", "clear"]

#: plans kept a thread (a full cache builds further calls without keeping them)
MAX_PLANS = 256

_LOCAL = threading.local()


def cache() -> dict:
    """This thread's plans, by signature."""
    plans = getattr(_LOCAL, "plans", None)
    if plans is None:
        plans = _LOCAL.plans = {}
    return plans


def clear() -> None:
    """Forget this thread's plans (the next call of each signature checks and builds again)."""
    cache().clear()


def layout(t) -> tuple | None:
    """What a plan depends on in a tensor: shape, strides, dtype, device (None for no tensor)."""
    return None if t is None else (tuple(t.shape), t.stride(), t.dtype, t.device)


def key(*parts) -> tuple | None:
    """The signature of a call: `parts` with tensors replaced by their layouts; None when it cannot be
    cached (an argument that is not hashable, e.g. a config given as a dict, or a tensor that is not a
    torch tensor: the full checks then run and name what is wrong)."""
    try:
        import torch
    except ImportError:   # no tensors to launch on: the full checks say so
        return None
    sig = []
    for p in parts:
        if isinstance(p, tuple) and p and all(isinstance(t, torch.Tensor) or t is None for t in p):
            p = tuple(layout(t) for t in p)
        elif isinstance(p, torch.Tensor):
            return None   # a tensor among the flags (ALiBi slopes): its pointer is an argument, not cached
        sig.append(p)
    sig = tuple(sig)
    try:
        hash(sig)
    except TypeError:
        return None
    return sig


def lookup(sig, tensors):
    """The plan of signature `sig` (None: none kept, or `sig` None), after checking the base address of each
    (name, tensor) in `tensors`: the plan saw their strides, not their pointers."""
    if sig is None:
        return None
    plan = cache().get(sig)
    if plan is not None:
        for name, t in tensors:
            if t is not None:
                check_base(name, t)
    return plan


def store(sig, plan) -> None:
    """Keep `plan` for signature `sig` (not when `sig` is None or the cache is full)."""
    plans = cache()
    if sig is not None and len(plans) < MAX_PLANS:
        plans[sig] = plan
