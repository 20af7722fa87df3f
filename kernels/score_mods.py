"""FlashAttention's score modifiers, ``softcap`` and ``alibi_slopes``: checked, and turned into what the
model's shape and the forward kernels' MODS variants take.

With ``softcap`` = c > 0 the logits are c * tanh(scale * q.k / c) (Gemma 2, Grok); with ALiBi slopes the
logits of query i and key j lose slope[b, h] * |i + N_k - N_q - j| (the distance to the bottom-right
diagonal), after the softcap when both are given: FlashAttention's definitions.  (FlashAttention's causal
kernels add slope * j instead, which differs per row by a constant: the same O, and an LSE that is not
the logits' log-sum-exp; ours is.)  The kernels apply both to the raw scores q.k before the masks
(``score_mods`` in ``csrc/warp_tiles.cuh`` and ``csrc/flash_fwd_sm90.cuh``): softcap as tanh(q.k *
scale / c) with c as the softmax scale, ALiBi as slope / (softmax scale) in raw-score units.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

__all__ = ["ScoreMods", "score_mods", "check_softcap", "mods_key", "NO_MODS", "SOFTCAP", "ALIBI"]

SOFTCAP, ALIBI = 1, 2   # the kernels' MODS bits


@dataclass(frozen=True, eq=False)
class ScoreMods:
    """A call's checked modifiers: ``softcap`` (0: none) and ``alibi`` (a float32 CUDA tensor of slopes,
    (H,) or (B, H), or None)."""

    softcap: float = 0.0
    alibi: object = None

    @property
    def bits(self) -> int:
        """The kernels' MODS template value (0: none)."""
        return (SOFTCAP if self.softcap > 0 else 0) | (ALIBI if self.alibi is not None else 0)

    def shape_fields(self) -> dict:
        """The model shape's fields (``iomodel.problems``): ``softcap`` and ``alibi`` where set."""
        fields = {}
        if self.softcap > 0:
            fields["softcap"] = float(self.softcap)
        if self.alibi is not None:
            fields["alibi"] = True
        return fields

    def softmax_scale(self, scale: float) -> float:
        """The scale the kernel's softmax applies to its (modified) scores: the cap under a softcap."""
        return float(self.softcap) if self.softcap > 0 else scale

    def kernel_args(self, scale: float) -> list:
        """(softcap_mul, alibi slopes pointer, their batch stride) as ctypes kernel arguments."""
        mul = scale / self.softcap if self.softcap > 0 else 0.0
        ptr = self.alibi.data_ptr() if self.alibi is not None else 0
        sb = self.alibi.stride(0) if self.alibi is not None and self.alibi.dim() == 2 else 0
        return [ctypes.c_float(mul), ctypes.c_void_p(ptr), ctypes.c_longlong(sb)]


#: the arguments of a call without modifiers (MODS = 0 reads none of them)
NO_MODS = ScoreMods()


def mods_key(mods: ScoreMods | None):
    """What a launch plan (``kernels.plans``) depends on in a call's modifiers: None without any, the softcap,
    or the slopes tensor itself (whose pointer is a kernel argument: ``plans.key`` then keeps no plan)."""
    if mods is None or not mods.bits:
        return None
    return mods.alibi if mods.alibi is not None else ("softcap", float(mods.softcap))


def check_softcap(softcap) -> float:
    """The softcap as a float (raises ValueError naming it)."""
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float)) or not (0.0 <= softcap < math.inf):
        raise ValueError(f"softcap must be a finite number >= 0 (0: none), got {softcap!r}.")
    return float(softcap)


def _check_alibi(alibi, q, B: int, H: int):
    import torch

    if not isinstance(alibi, torch.Tensor):
        raise TypeError(f"alibi_slopes must be a torch.Tensor of float32 slopes, got {type(alibi).__name__}.")
    if alibi.dtype != torch.float32:
        raise TypeError(f"alibi_slopes must be float32, got {alibi.dtype}.")
    if alibi.device != q.device:
        raise ValueError(f"alibi_slopes must be on q's device {q.device}, got {alibi.device}.")
    if tuple(alibi.shape) not in ((H,), (B, H)):
        raise ValueError(f"alibi_slopes must have shape ({H},) or ({B}, {H}) (heads, or batch x heads), "
                         f"got {tuple(alibi.shape)}.")
    if alibi.stride(-1) != 1 and H > 1:
        raise ValueError(f"alibi_slopes must be contiguous along the heads, got strides {tuple(alibi.stride())}.")
    return alibi


def score_mods(softcap, alibi_slopes, q, B: int, H: int) -> ScoreMods | None:
    """The checked modifiers of a call (None when it has none); raises naming the bad argument.
    q: the call's query tensor (the slopes' device); B, H: its batch and query heads."""
    cap = check_softcap(softcap)
    alibi = _check_alibi(alibi_slopes, q, B, H) if alibi_slopes is not None else None
    if cap == 0.0 and alibi is None:
        return None
    return ScoreMods(cap, alibi)
