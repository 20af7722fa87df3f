"""What a shape asks of a GPU before any model runs: memory for its tensors and the kernel's launch limits.

The model predicts a time for any sizes; a shape whose tensors do not fit the GPU's memory, or whose
grid or indices pass a hardware or 32-bit limit, never launches, so a time for it would be fiction.
:func:`fit_problem` says why in one line; :func:`check_fits` raises it (api and tile search call it
before predicting).  A family adds its own part through ``workspace_bytes`` and ``launch_problem``.
"""
from __future__ import annotations

import math
from typing import Mapping

from .errors import ModelError
from .problems import fields_of

__all__ = ["GRID_YZ_MAX", "INDEX_LIMIT", "ELEM_BYTES", "io_bytes", "fit_problem", "check_fits", "format_bytes",
           "blocks"]

GRID_YZ_MAX = 65535      # gridDim.y and gridDim.z (CUDA launch limit)
INDEX_LIMIT = 2**31      # sizes reach the kernels as 32-bit ints
ELEM_BYTES = {"bf16": 2, "fp16": 2}


def io_bytes(problem: str, shape: Mapping) -> float:
    """Bytes of a checked shape's inputs and outputs in GPU memory."""
    e = ELEM_BYTES[shape["dtype"]]
    if problem == "matmul":
        m, n, k = shape["M"], shape["N"], shape["K"]
        return float(e * (m * k + k * n + m * n))
    if problem == "softmax":  # float32 scores in, probabilities out (step 2 of the unfused attention)
        return float(shape["rows"] * shape["cols"] * (4 + e))
    q = shape["B"] * shape["H"] * shape["N_q"] * shape["d"]
    kv = shape["B"] * shape["H_kv"] * shape["N_k"] * shape["d"]
    lse = 4 * shape["B"] * shape["H"] * shape["N_q"]  # the flash kernels' float32 log-sum-exp
    if problem == "attention-backward":  # q, o, dO, dq and k, v, dk, dv, with the forward's LSE
        return float(e * (4 * q + 4 * kv) + lse)
    return float(e * (2 * q + 2 * kv) + lse)


def format_bytes(n: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:.0f} B"


def fit_problem(family, spec, shape: Mapping) -> str:
    """Why a checked `shape` cannot run with `family` on `spec` at all ("" when it can): a size past
    the 32-bit limit, the kernel's grid or indices, or more memory than the GPU has."""
    for key in fields_of(family):
        if shape[key] >= INDEX_LIMIT:
            return f"{key}={shape[key]} passes the kernels' 32-bit size limit (2^31)"
    launch = family.launch_problem(shape) if family.launch_problem else ""
    if launch:
        return launch
    io = family.memory_bytes(shape) if family.memory_bytes else io_bytes(family.problem, shape)
    work = family.workspace_bytes(shape) if family.workspace_bytes else 0.0
    if io + work > spec.hbm_bytes:
        what = f" + {format_bytes(work)} the {family.name} kernel allocates" if work else ""
        return (f"needs {format_bytes(io + work)} of GPU memory ({format_bytes(io)} inputs and outputs{what}); "
                f"{spec.key} has {format_bytes(spec.hbm_bytes)}")
    return ""


def check_fits(family, spec, shape: Mapping) -> None:
    """ModelError (one line) when `shape` cannot run with `family` on `spec`."""
    problem = fit_problem(family, spec, shape)
    if problem:
        sizes = ", ".join(f"{k}={shape[k]}" for k in fields_of(family))
        raise ModelError(f"{family.name} cannot run {sizes} on {spec.key}: {problem}")


def blocks(n: int, block: int) -> int:
    """Blocks of `block` covering `n` (a grid dimension)."""
    return math.ceil(n / block)
