"""Tile search: enumerate a family's search space, check it, rank by predicted time.

The space is the family's grid filtered by its config's own `problems()` (the kernel's build
constraints) and the GPU (wgmma), then the model's capacity limits (SMEM per block, registers per
thread, threads per block, at least one block per SM). One vectorized model evaluation covers every
configuration the kernel can build.
"""
from __future__ import annotations

import dataclasses

import time
from dataclasses import dataclass

import numpy as np

from . import families
from .api import Prediction, make_prediction, model_result, prepare, shape_model
from .errors import ModelError
from .problems import problem_flops


@dataclass
class SearchResult:
    kernel: str
    gpu: str
    shape: dict
    configs: list
    time_s: np.ndarray           # nan where the kernel cannot be built
    tflops: np.ndarray
    reasons: np.ndarray          # "" when feasible
    ranked: list[Prediction]
    evaluated: int
    seconds: float

    def rejected(self) -> list[tuple[object, str]]:
        return [(c, str(r)) for c, r in zip(self.configs, self.reasons) if r]


def build_reasons(configs: list) -> np.ndarray:
    """Why the family's kernel cannot be built with each config ("" when it can)."""
    return np.array(["; ".join(c.problems()) for c in configs], dtype=object)


def _model_over_buildable(kernel, spec, cal, shape, configs, built):
    """Predicted time, model reasons and the raw result over the buildable configs, spread back onto
    the whole grid (indices of `configs`)."""
    idx = np.flatnonzero(built == "")
    n = len(configs)
    time_s = np.full(n, np.nan)
    reasons = built.copy()
    res = model_result(kernel, spec, cal, shape, [configs[i] for i in idx]) if idx.size else None
    if res is not None:
        time_s[idx] = np.asarray(res["time_s"], dtype=float)
        reasons[idx] = np.asarray(res["infeasible"], dtype=object)
    return time_s, reasons, idx, res


def search(kernel: str, gpu, shape: dict, calibration="auto", top: int = 10, progress=None) -> SearchResult:
    """Rank every configuration of `kernel`'s search space for `shape` on `gpu`."""
    fam, spec, cal, s = prepare(kernel, gpu, shape, calibration)
    shape_model(kernel, s)  # derive once, untimed
    t0 = time.perf_counter()
    configs = fam.candidates(s)
    time_s, reasons, idx, res = _model_over_buildable(kernel, spec, cal, s, configs, build_reasons(configs))
    local = []
    if res is not None:
        smem = np.broadcast_to(np.asarray(res["kernels"][0]["smem_bytes"], dtype=float), idx.shape)
        local = [j for j in np.lexsort((smem, time_s[idx])) if not reasons[idx[j]]]
    if not local:
        raise ModelError(f"no {kernel} configuration fits {spec.key} for this shape")
    ranked = [make_prediction(kernel, spec, cal, s, configs[idx[j]], res, j) for j in local[:top]]
    seconds = time.perf_counter() - t0
    if progress:
        progress(f"evaluated {len(configs)} configurations in {seconds * 1e3:.0f} ms")
    tflops = problem_flops(fam, s) / time_s / 1e12
    return SearchResult(kernel, spec.key, s, configs, time_s, tflops, reasons, ranked, len(configs), seconds)


def parse_tiles(kernel: str, text: str) -> dict:
    """'block_m=128,block_n=64,warps=4,stages=2' (any order) -> the searched sizes, checked for keys
    (fields the shape fixes, like head_dim, come from the shape)."""
    fam = families.get(kernel)
    sizes = tuple(fam.space)
    # switches of the code with a default (flash_sm80's q_regs: 0 or 1) may be left out, and may be 0
    optional = {f.name for f in dataclasses.fields(fam.config_type) if f.default is not dataclasses.MISSING} \
        if dataclasses.is_dataclass(fam.config_type) else set()
    out = {}
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        if "=" not in part:
            raise ModelError(f"--tiles expects key=value pairs like block_m=128; got {part!r}")
        k, v = part.split("=", 1)
        if k not in sizes:
            raise ModelError(f"--tiles: {kernel} has no size {k!r}; sizes: {', '.join(sizes)}")
        try:
            out[k] = int(v)
        except ValueError:
            raise ModelError(f"--tiles: {k} must be an integer, got {v!r}") from None
        if out[k] <= 0 and k not in optional:
            raise ModelError(f"--tiles: {k} must be positive, got {out[k]}")
    missing = [k for k in sizes if k not in out and k not in optional]
    if missing:
        raise ModelError(f"--tiles: missing {', '.join(missing)} for {kernel}")
    return out
