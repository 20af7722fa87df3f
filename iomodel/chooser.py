"""The one place that picks a kernel family and its configuration for a shape on a GPU.

The kernels call it when they are given no config: it ranks the shipped configurations of the
candidate families with the model and returns the fastest predicted one. Shipped configurations
are the ones compiled without spills and measured; the search (``iomodel.tiles``) ranks the whole
space instead. Choices are cached per (GPU, families, calibration, shape).
"""
from __future__ import annotations

import threading
from typing import Mapping, Sequence

from . import families
from .api import Prediction, rank_configs
from .errors import ModelError
from .problems import check_shape

_CACHE: dict[tuple, Prediction] = {}
_LOCK = threading.Lock()


def choose(kernels: Sequence[str], gpu: str, shape: Mapping, calibration="auto") -> Prediction:
    """The best predicted shipped configuration over `kernels` (family names) for `shape` on `gpu`
    (a spec key or device name). Its ``kernel`` names the family, its ``config`` the typed config.
    Raises ModelError (or HardwareError for an unknown GPU) when nothing can be chosen."""
    key = (gpu, tuple(kernels), calibration, tuple(sorted(shape.items())))
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    best: Prediction | None = None
    why = []
    for name in kernels:
        fam = families.get(name)
        s = check_shape(fam, shape)
        cands = fam.shipped_for(s)
        if not cands:
            why.append(f"{name} ships no config for this shape")
            continue
        try:
            top = rank_configs(name, gpu, s, cands, calibration)[0]
        except ModelError as exc:
            why.append(f"{name}: {exc}")
            continue
        if best is None or top.time_s < best.time_s:
            best = top
    if best is None:
        raise ModelError("no configuration to choose: " + "; ".join(why))
    with _LOCK:
        _CACHE[key] = best
    return best
