"""A forward shape's features beyond (B, H, N, d, causal): a sliding window and FlashAttention's score
modifiers, as the model's shape fields (``window_left``, ``window_right``, ``softcap``, ``alibi``,
``iomodel.problems``; labelled by ``iomodel.results.shape_label``) and as the kernels' and the reference's
arguments.

A shape with features has rows of our kernels and of the peers that take them (SDPA's backends none,
FlashAttention-4 a window and a softcap: ``validation.peers.peer_takes``); its ALiBi slopes are the standard
geometric ones, 2^(-8 (h + 1) / H), made once per (H, device).
"""
from __future__ import annotations

from typing import Any, Mapping

from iomodel.problems import is_windowed, score_mods_of

__all__ = ["has_features", "feature_args", "alibi_slopes", "window_size"]


def has_features(shape: Mapping[str, Any]) -> bool:
    """Whether the shape has a window (beyond plain causal attention), a softcap or ALiBi."""
    return is_windowed(shape) or bool(score_mods_of(shape))


def window_size(shape: Mapping[str, Any]) -> tuple[int, int]:
    """FlashAttention's window_size of the shape ((-1, -1) without one)."""
    return int(shape.get("window_left", -1)), int(shape.get("window_right", -1))


_SLOPES: dict = {}


def alibi_slopes(torch, H: int, device) -> Any:
    """The standard ALiBi slopes of H heads, float32 on `device` (made once)."""
    key = (H, str(device))
    if key not in _SLOPES:
        _SLOPES[key] = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], dtype=torch.float32,
                                    device=device)
    return _SLOPES[key]


def feature_args(torch, shape: Mapping[str, Any], device) -> dict:
    """Keyword arguments of ``kernels.run`` and of the reference for the shape's features ({} without)."""
    if not has_features(shape):
        return {}
    return {"window_size": window_size(shape), "softcap": float(shape.get("softcap", 0.0)),
            "alibi_slopes": alibi_slopes(torch, shape["H"], device) if shape.get("alibi") else None}
