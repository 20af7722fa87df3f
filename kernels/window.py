"""FlashAttention's ``window_size`` (a sliding window) with ``causal``: checked, made canonical, and turned
into what the model's shape and the forward kernels' window variants take.

Query i (bottom-right: its diagonal key is i + N_k - N_q) sees keys i + N_k - N_q - left ..
i + N_k - N_q + right; -1 leaves a side unbounded.  ``causal=True`` sets right = 0 (as FlashAttention
does).  A window that bounds nothing is plain attention, (-1, 0) is plain causal attention; anything
else is local: the kernels' window variant (IS_LOCAL, kLocal), whose upper bound is its causal flag's
diagonal moved by ``right`` and whose lower bound is ``left`` (``UNBOUNDED`` standing for none).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["UNBOUNDED", "Window", "window"]

UNBOUNDED = 1 << 30   # the kernel's win_left for no lower bound (i + diag - 2^30 is below every key)


@dataclass(frozen=True)
class Window:
    """A canonical window: ``left``, ``right`` (-1: unbounded)."""

    left: int = -1
    right: int = -1

    @property
    def causal(self) -> bool:
        """Whether the band has an upper bound (the kernel's causal flag)."""
        return self.right >= 0

    @property
    def local(self) -> bool:
        """Whether the kernel needs its window variant: a left bound, or a right one past the diagonal."""
        return self.left >= 0 or self.right > 0

    def kernel_args(self) -> tuple[int, int]:
        """(win_left, win_right) as the kernel takes them."""
        return (self.left if self.left >= 0 else UNBOUNDED, max(self.right, 0))

    def shape_fields(self) -> dict:
        """The model shape's fields: ``causal``, and for a local window ``window_left``, ``window_right``."""
        fields = {"causal": self.causal}
        if self.local:
            fields.update(window_left=self.left, window_right=self.right)
        return fields


def _side(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise ValueError(f"window_size's {name} must be an int >= -1 (-1: unbounded), got {value!r}.")
    return value


def window(window_size=(-1, -1), causal: bool = False) -> Window:
    """The canonical window of a call's ``window_size`` and ``causal`` (raises ValueError naming the bad one)."""
    if not isinstance(causal, bool):   # (a Python bool takes this one check: torch.compile traces it)
        if not (type(causal).__module__ == "numpy" and type(causal).__name__ in ("bool", "bool_")):
            raise TypeError(f"causal must be a bool, got {type(causal).__name__}.")
        causal = bool(causal)   # numpy's bool
    if not isinstance(window_size, (tuple, list)) or len(window_size) != 2:
        raise ValueError(f"window_size must be a pair (left, right), got {window_size!r}.")
    left, right = _side("left", window_size[0]), _side("right", window_size[1])
    if causal:
        right = 0
    return Window(left, right)
