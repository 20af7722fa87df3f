"""The problems families solve (attention, its backward, matmul, softmax): shape fields, checks, symbols, FLOPs.

A shape is a plain dict (``B, H, H_kv, N_q, N_k, d, causal, dtype`` for attention and its backward, and
``window_left, window_right`` for a sliding window, FlashAttention's ``window_size``, and ``softcap`` (a
float, 0: none) and ``alibi`` (a bool), FlashAttention's score modifiers;
``M, N, K`` for a matmul; ``rows, cols`` for a softmax). This module is the one place that knows those fields.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .errors import ModelError

DTYPES = ("bf16", "fp16")
ATTENTION_FIELDS = ("B", "H", "H_kv", "N_q", "N_k", "d")
# the backward takes the forward's shape (its dO and gradients have the shapes of O, Q, K and V)
ATTENTION_PROBLEMS = ("attention", "attention-backward")
PROBLEM_FIELDS = {"attention": ATTENTION_FIELDS, "attention-backward": ATTENTION_FIELDS, "matmul": ("M", "N", "K"),
                  "softmax": ("rows", "cols")}
BACKWARD_FLOP_RATIO = 2.5   # five products per (query, key) pair against the forward's two


def fields_of(family) -> tuple[str, ...]:
    """The size fields of a family's shapes: its problem's, or a diagram family's size symbols."""
    return family.shape_fields if family.problem == "diagram" else PROBLEM_FIELDS[family.problem]


def problem_flops(family, shape: Mapping) -> float:
    """The FLOPs a family's results are reported against: the derivation's for a diagram family
    (its contractions' live points), the convention of :func:`conventional_flops` otherwise."""
    return family.useful_flops(shape) if family.useful_flops is not None else conventional_flops(shape, family.problem)


def check_shape(family, shape: Mapping) -> dict:
    """`shape` with its defaults filled in (H_kv = H, N_k = N_q, not causal, bf16), checked for
    `family`: positive integer sizes, whole query groups, a dtype and head dim the family supports."""
    s = dict(shape)
    attention = family.problem in ATTENTION_PROBLEMS
    if attention:
        defaults = {"H_kv": s.get("H"), "N_k": s.get("N_q"), "causal": False, "dtype": "bf16"}
    else:
        defaults = {"dtype": "bf16", "causal": False}
    for key, val in defaults.items():
        s.setdefault(key, val)
    for key in fields_of(family):
        val = s.get(key)
        if not isinstance(val, (int, np.integer)) or isinstance(val, bool) or val <= 0:
            raise ModelError(f"shape field {key} must be a positive integer, got {val!r}")
    if attention and s["H"] % s["H_kv"]:
        raise ModelError(f"heads ({s['H']}) must be a multiple of kv heads ({s['H_kv']})")
    if s["dtype"] not in family.dtypes:
        raise ModelError(f"dtype {s['dtype']!r} not supported; use one of {', '.join(family.dtypes)}")
    if family.head_dims and s["d"] not in family.head_dims:
        raise ModelError(f"head dim {s['d']} not supported by {family.name}; supported: {family.head_dims}")
    for key in ("window_left", "window_right"):
        val = s.get(key, -1)
        if not isinstance(val, (int, np.integer)) or isinstance(val, bool) or val < -1:
            raise ModelError(f"shape field {key} must be an integer >= -1 (-1: unbounded), got {val!r}")
    if attention:
        check_features(family, s)
    else:
        _check_score_mods(family, s)
    return s


def check_features(family, s: Mapping) -> None:
    """The variant's features `family` must have: a sliding window's band, each score modifier (their values
    checked too).  Raises ModelError naming the one it lacks."""
    if is_windowed(s) and family.window_band is None:
        raise ModelError(f"{family.name} has no sliding window (window_left, window_right)")
    _check_score_mods(family, s)


def _check_score_mods(family, s: Mapping) -> None:
    cap = s.get("softcap", 0.0)
    if isinstance(cap, bool) or not isinstance(cap, (int, float, np.integer, np.floating)) or not 0 <= cap < np.inf:
        raise ModelError(f"shape field softcap must be a finite number >= 0 (0: none), got {cap!r}")
    if not isinstance(s.get("alibi", False), (bool, np.bool_)):
        raise ModelError(f"shape field alibi must be a bool, got {s.get('alibi')!r}")
    missing = [m for m in score_mods_of(s) if m not in family.score_mods]
    if missing:
        has = f"it has {', '.join(family.score_mods)}" if family.score_mods else "it has none"
        raise ModelError(f"{family.name} has no {' or '.join(missing)} ({has})")


def variant_features(shape: Mapping) -> frozenset:
    """The features that pick a forward kernel's compiled variant for a shape: ``causal`` (a right bound:
    the kernels' causal flag), ``window`` (a left bound or a right one past the diagonal) and the score
    modifiers."""
    feats = {"causal"} if window_of(shape)[1] >= 0 else set()
    if is_windowed(shape):
        feats.add("window")
    return frozenset(feats | set(score_mods_of(shape)))


def score_mods_of(shape: Mapping) -> tuple[str, ...]:
    """The score modifiers a shape asks for, in the order they apply: ``softcap`` (``softcap`` > 0), then
    ``alibi``."""
    return (("softcap",) if shape.get("softcap", 0) > 0 else ()) + (("alibi",) if shape.get("alibi") else ())


def shape_symbols(problem: str, shape: Mapping, fields: tuple[str, ...] = ()) -> dict:
    """The diagram symbols a checked shape sets (the library's names for each problem's sizes; a
    diagram family's fields are its symbols)."""
    if problem == "diagram":
        return {k: shape[k] for k in fields}
    if problem == "matmul":
        return {"Ma": shape["M"], "Nc": shape["N"], "Kb": shape["K"]}
    if problem == "softmax":
        return {"R": shape["rows"], "C": shape["cols"]}
    return {"B": shape["B"], "H": shape["H"], "N": shape["N_q"], "M": shape["N_k"],
            "d": shape["d"], "Hk": shape["H_kv"], "g": shape["H"] // shape["H_kv"]}


def conventional_flops(shape: Mapping, problem: str = "attention") -> float:
    """The FLOPs a result is reported against (ANCHORS.md): 4*B*H*N_q*N_k*d for attention, halved when
    causal with N_q == N_k (the exact live fraction otherwise), 2.5 times that for its backward
    (10*B*H*N_q*N_k*d); 2*M*N*K for a matmul; 5 operations per element for a softmax (max, subtract,
    exp, sum, divide)."""
    if problem == "attention-backward":
        return BACKWARD_FLOP_RATIO * conventional_flops(shape)
    if "K" in shape and "M" in shape:
        return 2.0 * shape["M"] * shape["N"] * shape["K"]
    if "rows" in shape:
        return 5.0 * shape["rows"] * shape["cols"]
    nq, nk = shape["N_q"], shape.get("N_k", shape["N_q"])
    full = 4.0 * shape["B"] * shape["H"] * nq * nk * shape["d"]
    left, right = window_of(shape)
    if left < 0 and right < 0:
        return full
    if left < 0 and right == 0 and nq == nk:
        return full / 2
    rows = np.arange(nq) + (nk - nq)   # query i's diagonal key (bottom-right)
    hi = np.minimum(rows + right, nk - 1) if right >= 0 else np.full(nq, nk - 1)
    lo = np.maximum(rows - left, 0) if left >= 0 else np.zeros(nq, dtype=np.int64)
    live = np.clip(hi - lo + 1, 0, None).sum()
    return full * float(live) / (nq * nk)


def window_of(shape: Mapping) -> tuple[int, int]:
    """(left, right) of an attention shape's band, FlashAttention's window_size (-1: unbounded): query i
    sees keys i + N_k - N_q - left .. i + N_k - N_q + right.  ``causal`` is (-1, 0) (a window's right
    bound, when the shape has one, is the shape's own)."""
    left = int(shape.get("window_left", -1))
    right = int(shape.get("window_right", -1))
    if shape.get("causal") and right < 0:
        right = 0
    return left, right


def is_windowed(shape: Mapping) -> bool:
    """Whether a shape's band has a left bound, or a right one other than the causal diagonal."""
    left, right = window_of(shape)
    return left >= 0 or right > 0
