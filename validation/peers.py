"""Peers: PyTorch's scaled_dot_product_attention pinned to one backend each.

``sdpa_flash`` is FlashAttention-2 (``SDPBackend.FLASH_ATTENTION``),
``sdpa_cudnn`` cuDNN's fused attention (``SDPBackend.CUDNN_ATTENTION``),
``sdpa_efficient`` the memory-efficient kernel (``SDPBackend.EFFICIENT_ATTENTION``).
torch is imported inside the functions.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["PEERS", "peer_runners"]

#: peer kernel name -> SDPBackend member name
PEERS: dict[str, str] = {
    "sdpa_flash": "FLASH_ATTENTION",
    "sdpa_cudnn": "CUDNN_ATTENTION",
    "sdpa_efficient": "EFFICIENT_ATTENTION",
}


def peer_runners(torch) -> dict[str, tuple[Callable[..., Any] | None, str | None]]:
    """For each peer, ``(run(q, k, v, causal) -> out, None)`` or ``(None, why not)``.

    ``run`` calls SDPA inside ``sdpa_kernel(backend)`` so that torch may not
    fall back to another backend: an unsupported input raises instead.
    """
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as exc:
        why = f"torch {torch.__version__} has no torch.nn.attention.sdpa_kernel ({exc})"
        return {name: (None, why) for name in PEERS}
    import torch.nn.functional as F

    out: dict[str, tuple[Callable[..., Any] | None, str | None]] = {}
    for name, member in PEERS.items():
        backend = getattr(SDPBackend, member, None)
        if backend is None:
            out[name] = (None, f"torch {torch.__version__} has no SDPBackend.{member}")
            continue

        def run(q, k, v, causal=False, _backend=backend):
            with sdpa_kernel(_backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))

        out[name] = (run, None)
    return out
