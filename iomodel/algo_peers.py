"""PyTorch peers of the library's algorithms: the rows of a results file that time ``torch.matmul``
(cuBLAS), a cross-entropy loss over a large vocabulary, an MLP, and the attention backward (SDPA's
flash, cuDNN and memory-efficient backends), as PyTorch runs them.

Such a row names its peer as ``kernel`` and its shape by the sizes the library's diagrams use:
matmul ``{"M", "N", "K"}`` (C[M,N] = A[M,K] B[K,N]); cross-entropy ``{"T", "D", "V"}`` (logits = H[T,D]
W[D,V], then the loss); mlp ``{"T", "D", "F"}`` (gelu(X[T,D] W1[D,F]) W2[F,D]); attention-backward
``{"B", "H", "N", "M", "d"}`` (dQ, dK, dV of softmax(Q K^T / sqrt(d)) V, Q[B,H,N,d], K and V [B,H,M,d]);
plus ``"dtype"``.  FLOPs are counted the conventional way: the matrix products only (2 per
multiply-add); the softmax of the loss and the GeLU add under 0.1% at the sizes run.  The backward is
counted as 2.5 forwards, 10BHNMd (its five products of the forward's 4BHNMd, FlashAttention's count).
Nothing here imports torch.
"""
from __future__ import annotations

from typing import Any, Mapping

__all__ = ["ALGO_PEERS", "ALGO_SIZES", "algo_of", "algo_flops", "algo_shape_label", "algo_prediction"]

#: peer kernel -> the library algorithm it runs
ALGO_PEERS = {"torch_matmul": "matmul", "torch_cross_entropy": "cross-entropy", "torch_mlp": "mlp",
              "torch_sdpa_flash_bwd": "attention-backward", "torch_sdpa_cudnn_bwd": "attention-backward",
              "torch_sdpa_efficient_bwd": "attention-backward"}
#: algorithm -> the size names of its shape, in label order
ALGO_SIZES = {"matmul": ("M", "N", "K"), "cross-entropy": ("T", "D", "V"), "mlp": ("T", "D", "F"),
              "attention-backward": ("B", "H", "N", "M", "d")}


def algo_of(kernel: str) -> str | None:
    """The algorithm a peer kernel runs, or None for any other kernel (attention rows)."""
    return ALGO_PEERS.get(kernel)


def algo_flops(algo: str, shape: Mapping[str, Any]) -> float:
    """Conventional FLOPs: 2MNK (matmul), 2TDV (the logits of cross-entropy), 4TDF (the two products
    of the MLP), 10BHNMd (the attention backward: 2.5 times the forward's 4BHNMd)."""
    if algo == "matmul":
        return 2.0 * shape["M"] * shape["N"] * shape["K"]
    if algo == "cross-entropy":
        return 2.0 * shape["T"] * shape["D"] * shape["V"]
    if algo == "mlp":
        return 4.0 * shape["T"] * shape["D"] * shape["F"]
    if algo == "attention-backward":
        return 10.0 * shape["B"] * shape["H"] * shape["N"] * shape["M"] * shape["d"]
    raise ValueError(f"unknown algorithm {algo!r}; known: {', '.join(ALGO_SIZES)}")


def algo_shape_label(shape: Mapping[str, Any]) -> str | None:
    """``M8192 N8192 K8192`` (the dtype when not bf16), or None when the shape is no algorithm's."""
    for sizes in ALGO_SIZES.values():
        if all(k in shape for k in sizes):
            dt = "" if shape.get("dtype", "bf16") == "bf16" else f" {shape['dtype']}"
            return " ".join(f"{k}{shape[k]}" for k in sizes) + dt
    return None


def algo_prediction(algo: str, gpu_key: str, shape: Mapping[str, Any]) -> tuple[dict | None, str | None]:
    """(prediction dict, error) of the model's best configuration for the algorithm, through
    ``iomodel.algorithms.best_prediction`` where that imports; (None, None) where it does not (yet)."""
    try:
        from .algorithms import best_prediction  # type: ignore[import-not-found]
    except ImportError:
        return None, None
    try:
        pred = best_prediction(algo, gpu_key, dict(shape))
        d = pred.as_dict() if hasattr(pred, "as_dict") else dict(pred)
    except Exception as exc:  # noqa: BLE001 - a model failure is recorded, the measurement stays
        return None, f"{type(exc).__name__}: {exc}"
    return d, None
