"""Tile search: enumerate the free sizes of a kernel family, check them, rank by predicted time.

Candidates are checked, in order, against the instruction shape (tiles must be multiples of the
matrix instruction the family issues), then the model's capacity limits (SMEM per block,
registers per thread, threads per block, at least one block per SM). Everything is vectorized:
one model evaluation covers the whole grid of candidates.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from .api import (FAMILIES, Prediction, _prediction, check_shape, conventional_flops, evaluate_configs, family,
                  resolve_gpu, shape_model)
from .perf import ModelError

# the free sizes each family may take (the search space; instruction checks prune it)
SEARCH_SPACE = {
    "flash_sm80": {"block_m": (16, 32, 64, 96, 128, 192, 256), "block_n": (16, 32, 48, 64, 96, 128, 160, 192, 256),
                   "warps": (1, 2, 4, 8, 16), "stages": (1, 2, 3, 4)},
    "flash_sm90": {"block_m": (64, 128, 192, 256, 384), "block_n": tuple(range(16, 257, 16)),
                   "stages": (1, 2, 3, 4), "consumers": (1, 2, 3)},
    "matmul_sm80": {"block_m": (32, 64, 128, 256), "block_n": (32, 64, 128, 256), "block_k": (16, 32, 64),
                    "warps": (2, 4, 8), "stages": (1, 2, 3, 4)},
    "softmax": {"rows_per_block": (1, 2, 4, 8, 16)},
    "unfused": {"block_m": (32, 64, 128, 256), "block_n": (32, 64, 128, 256), "block_k": (16, 32, 64),
                "warps": (2, 4, 8), "stages": (1, 2, 3, 4)},
}


@dataclass
class SearchResult:
    kernel: str
    gpu: str
    shape: dict
    configs: list[dict]
    time_s: np.ndarray
    tflops: np.ndarray
    reasons: np.ndarray          # "" when feasible
    ranked: list[tuple[dict, Prediction]]
    evaluated: int
    seconds: float

    def rejected(self) -> list[tuple[dict, str]]:
        return [(c, str(r)) for c, r in zip(self.configs, self.reasons) if r]


def instruction_reasons(kernel: str, spec, configs: list[dict], d: int) -> np.ndarray:
    """Why each config breaks the instruction shape of the family's code ("" when it does not)."""
    check = family(kernel).instruction_check
    return np.array([check(spec, c, d) if check is not None else "" for c in configs], dtype=object)


def enumerate_configs(kernel: str, space: dict | None = None) -> list[dict]:
    space = space or SEARCH_SPACE[kernel]
    keys = list(space)
    return [dict(zip(keys, vals)) for vals in itertools.product(*(space[k] for k in keys))]


def search(kernel: str, gpu, shape: dict, space: dict | None = None, calibration="auto", top: int = 10,
           progress=None) -> SearchResult:
    """Rank every configuration of `kernel`'s search space for `shape` on `gpu`."""
    family(kernel)
    spec = resolve_gpu(gpu)
    s = check_shape(kernel, shape)
    shape_model(kernel, s)  # derive once, untimed
    t0 = time.perf_counter()
    configs = enumerate_configs(kernel, space)
    inst = instruction_reasons(kernel, spec, configs, s.get("d", s.get("K", 16)))
    spec, cal, s, res = evaluate_configs(kernel, spec, s, configs, calibration)
    reasons = np.where(inst != "", inst, res["infeasible"])
    time_s = np.asarray(res["time_s"], dtype=float)
    tflops = conventional_flops(s) / time_s / 1e12
    smem = np.asarray(res["kernels"][0]["smem_bytes"], dtype=float)
    order = [i for i in np.lexsort((np.broadcast_to(smem, time_s.shape), time_s)) if not reasons[i]]
    if not order:
        raise ModelError(f"no {kernel} configuration fits {spec.key} for this shape")
    ranked = [(configs[i], _prediction(kernel, spec, cal, s, configs[i], res, i)) for i in order[:top]]
    seconds = time.perf_counter() - t0
    if progress:
        progress(f"evaluated {len(configs)} configurations in {seconds * 1e3:.0f} ms")
    return SearchResult(kernel, spec.key, s, configs, time_s, tflops, reasons, ranked, len(configs), seconds)


def config_label(kernel: str, c: dict) -> str:
    fam = FAMILIES.get(kernel)
    return fam.label.format(**c) if fam is not None and fam.label else str(c)


def parse_tiles(kernel: str, text: str) -> dict:
    """'block_m=128,block_n=64,warps=4,stages=2' (any order) -> config dict, checked for keys."""
    fam = FAMILIES[kernel]
    out = {}
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        if "=" not in part:
            raise ModelError(f"--tiles expects key=value pairs like block_m=128; got {part!r}")
        k, v = part.split("=", 1)
        if k not in fam.config_keys:
            raise ModelError(f"--tiles: {kernel} has no size {k!r}; sizes: {', '.join(fam.config_keys)}")
        try:
            out[k] = int(v)
        except ValueError:
            raise ModelError(f"--tiles: {k} must be an integer, got {v!r}") from None
        if out[k] <= 0:
            raise ModelError(f"--tiles: {k} must be positive, got {out[k]}")
    missing = [k for k in fam.config_keys if k not in out]
    if missing:
        raise ModelError(f"--tiles: missing {', '.join(missing)} for {kernel}")
    return out
