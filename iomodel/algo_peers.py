"""PyTorch peers of the library's algorithms: the rows of a results file that time ``torch.matmul``
(cuBLAS), a cross-entropy loss over a large vocabulary, an MLP, and the attention backward (SDPA's
flash, cuDNN and memory-efficient backends), as PyTorch runs them.

Such a row names its peer as ``kernel`` and its shape by the sizes the library's diagrams use:
matmul ``{"M", "N", "K"}`` (C[M,N] = A[M,K] B[K,N]); cross-entropy ``{"T", "D", "V"}`` (logits = H[T,D]
W[D,V], then the loss); mlp ``{"T", "D", "F"}`` (gelu(X[T,D] W1[D,F]) W2[F,D]); attention-backward
``{"B", "H", "N", "M", "d"}`` (dQ, dK, dV of softmax(Q K^T / sqrt(d)) V, Q[B,H,N,d], K and V [B,H,M,d]);
plus ``"dtype"``, and ``"causal"`` for the backward.  FLOPs are counted the conventional way: the
matrix products only (2 per multiply-add); the softmax of the loss and the GeLU add under 0.1% at the
sizes run.  The backward is counted as 2.5 forwards, 10BHNMd (its five products of the forward's 4BHNMd,
FlashAttention's count), causal as the forward is (``iomodel.problems.conventional_flops``).

Our own backward kernels (``BACKWARD_KERNELS``: the ``flash_bwd_sm80`` families, and on sm_90 the
``flash_bwd_sm90`` ones) are timed in the same phase on the same shapes, so their rows name the
algorithm too (``algo_of``) though they are no peers.

Decode (attention of a few new queries over a KV cache, ``validation/decode.py``) has its rows in the
same phase: our ``flash_decode_sm80`` (``DECODE_KERNELS``) and SDPA's backends on a dense cache
(``DECODE_PEERS``, named as the forward sweep's peers with ``_decode``: a decode is an attention
forward, so its rows say ``"pass": "fwd"``).  Their shape is the attention form ``{"B", "H", "H_kv",
"N_q", "N_k", "d", "causal", "dtype"}`` (``N_k`` keys in the cache, all of them live), plus
``"page_size"`` for a paged cache; FLOPs the attention forward's, 4BHN_qN_kd (causal: the live pairs).
Nothing here imports torch.
"""
from __future__ import annotations

from typing import Any, Mapping

from .problems import conventional_flops

__all__ = ["ALGO_PEERS", "BACKWARD_KERNELS", "DETERMINISTIC_KERNELS", "DECODE", "DECODE_FAMILY", "DECODE_KERNELS",
           "DECODE_PEERS", "ALGO_KERNELS", "ALGO_SIZES", "algo_of", "algo_flops", "algo_shape_label", "algo_prediction",
           "attention_shape", "decode_family", "decode_model_shape", "decode_prediction",
           "default_pass"]

#: peer kernel -> the library algorithm it runs
ALGO_PEERS = {"torch_matmul": "matmul", "torch_cross_entropy": "cross-entropy", "torch_mlp": "mlp",
              "torch_sdpa_flash_bwd": "attention-backward", "torch_sdpa_cudnn_bwd": "attention-backward",
              "torch_sdpa_efficient_bwd": "attention-backward"}
#: our kernel families timed in the algorithm phase: the attention backward (atomic dQ, deterministic dQ),
#: mma.sync (sm_80 and newer) then wgmma (sm_90 only)
BACKWARD_KERNELS = ("flash_bwd_sm80", "flash_bwd_sm80_deterministic", "flash_bwd_sm90", "flash_bwd_sm90_deterministic")
#: those that sum dQ in a fixed order (the harness times only the model's pick of these)
DETERMINISTIC_KERNELS = ("flash_bwd_sm80_deterministic", "flash_bwd_sm90_deterministic")
DECODE = "decode"   # the algorithm of the decode rows (and the name ``--only`` takes for them alone)
#: the kernel family of our decode kernel (``iomodel.families.flash_decode_sm80`` once it lands)
DECODE_FAMILY = "flash_decode_sm80"
#: our decode kernels timed in the algorithm phase (``kernels.flash_attention_with_kvcache``)
DECODE_KERNELS = (DECODE_FAMILY,)
#: decode peer -> the ``SDPBackend`` member it is pinned to (kept out of ``ALGO_PEERS``, the forward
#: algorithms' peers of issue 14, whose committed runs hold exactly those)
DECODE_PEERS = {"sdpa_flash_decode": "FLASH_ATTENTION", "sdpa_cudnn_decode": "CUDNN_ATTENTION",
                "sdpa_efficient_decode": "EFFICIENT_ATTENTION"}
#: every kernel of the algorithm phase (``--algo-peers`` takes these names) -> the algorithm it runs
ALGO_KERNELS = {**ALGO_PEERS, **{k: "attention-backward" for k in BACKWARD_KERNELS},
                **{k: DECODE for k in (*DECODE_KERNELS, *DECODE_PEERS)}}
#: algorithm -> the size names of its shape, in label order
ALGO_SIZES = {"matmul": ("M", "N", "K"), "cross-entropy": ("T", "D", "V"), "mlp": ("T", "D", "F"),
              "attention-backward": ("B", "H", "N", "M", "d"), DECODE: ("B", "H", "H_kv", "N_q", "N_k", "d")}


def algo_of(kernel: str) -> str | None:
    """The algorithm a kernel of the algorithm phase runs, or None for any other kernel (attention rows)."""
    return ALGO_KERNELS.get(kernel)


def default_pass(kernel: str) -> str | None:
    """The attention pass a row of ``kernel`` times when its row does not say: ``"bwd"`` for the
    attention backward's rows, ``"fwd"`` for the attention rows (every file before the field held only
    forward attention rows), None for matmul, cross-entropy and the MLP (no attention pass)."""
    algo = algo_of(kernel)
    if algo is None or algo == DECODE:   # a decode is an attention forward over a cache
        return "fwd"
    return "bwd" if algo == "attention-backward" else None


def attention_shape(shape: Mapping[str, Any]) -> dict[str, Any]:
    """A backward shape ``{"B", "H", "N", "M", "d", "causal", "dtype"}`` in the attention families' form
    (``B, H, H_kv, N_q, N_k, d, causal, dtype``), which the model's backward families take."""
    return {"B": shape["B"], "H": shape["H"], "H_kv": shape.get("H_kv", shape["H"]), "N_q": shape["N"],
            "N_k": shape["M"], "d": shape["d"], "causal": bool(shape.get("causal", False)),
            "dtype": shape.get("dtype", "bf16")}


def decode_model_shape(shape: Mapping[str, Any], fields: tuple[str, ...] = ()) -> dict[str, Any]:
    """A decode row's shape as the model takes it: the attention form, causal only where it masks
    anything (N_q > 1: the shape ``kernels.kvcache`` chooses with, so the harness's pick is the kernel's),
    and ``page_size`` only where the family's shape ``fields`` name it (a family that does not model
    paging predicts the dense cache)."""
    out = {k: shape[k] for k in ("B", "H", "H_kv", "N_q", "N_k", "d")}
    out.update(causal=bool(shape.get("causal", False)) and shape["N_q"] > 1, dtype=shape.get("dtype", "bf16"))
    if shape.get("page_size") and "page_size" in fields:
        out["page_size"] = shape["page_size"]
    return out


def algo_flops(algo: str, shape: Mapping[str, Any]) -> float:
    """Conventional FLOPs: 2MNK (matmul), 2TDV (the logits of cross-entropy), 4TDF (the two products
    of the MLP), 10BHNMd (the attention backward: 2.5 times the forward's 4BHNMd; causal, the live
    fraction of the forward's count: half when N == M, exact otherwise), 4BHN_qN_kd (decode, the
    forward's count on its cache, causal the live pairs)."""
    if algo == "matmul":
        return 2.0 * shape["M"] * shape["N"] * shape["K"]
    if algo == "cross-entropy":
        return 2.0 * shape["T"] * shape["D"] * shape["V"]
    if algo == "mlp":
        return 4.0 * shape["T"] * shape["D"] * shape["F"]
    if algo == "attention-backward":
        return conventional_flops(attention_shape(shape), "attention-backward")
    if algo == DECODE:
        return conventional_flops(decode_model_shape(shape))
    raise ValueError(f"unknown algorithm {algo!r}; known: {', '.join(ALGO_SIZES)}")


def algo_shape_label(shape: Mapping[str, Any]) -> str | None:
    """``M8192 N8192 K8192`` (the dtype when not bf16), or None when the shape is no algorithm's (decode
    shapes are in the attention form, which ``iomodel.results.shape_label`` writes)."""
    for algo, sizes in ALGO_SIZES.items():
        if algo == DECODE:
            continue
        if all(k in shape for k in sizes):
            dt = "" if shape.get("dtype", "bf16") == "bf16" else f" {shape['dtype']}"
            return " ".join(f"{k}{shape[k]}" for k in sizes) + (" causal" if shape.get("causal") else "") + dt
    return None


def algo_prediction(algo: str, gpu_key: str, shape: Mapping[str, Any]) -> tuple[dict | None, str | None]:
    """(prediction dict, error) of the model's best configuration for the algorithm, through
    ``iomodel.algorithms.best_prediction`` where that imports; (None, None) where it does not (yet).
    The library's backward diagrams behind ``best_prediction`` are not causal, so a causal backward
    is the best of the ``flash_bwd_sm80`` family's search (``iomodel.tiles.search``) instead.  A
    decode shape gets ``decode_prediction``."""
    try:
        from .algorithms import best_prediction  # type: ignore[import-not-found]
    except ImportError:
        return None, None
    try:
        if algo == DECODE:
            pred = decode_prediction(gpu_key, shape)
        elif algo == "attention-backward" and shape.get("causal"):
            from .tiles import search

            pred = search(BACKWARD_KERNELS[0], gpu_key, attention_shape(shape), top=1).ranked[0]
        else:   # best_prediction has no causal size: a non-causal shape goes without the key
            pred = best_prediction(algo, gpu_key, {k: v for k, v in shape.items() if k != "causal"})
        d = pred.as_dict() if hasattr(pred, "as_dict") else dict(pred)
    except Exception as exc:  # noqa: BLE001 - a model failure is recorded, the measurement stays
        return None, f"{type(exc).__name__}: {exc}"
    return d, None


def decode_family():
    """Our decode kernel's family where the registry has it (another change adds it), else None."""
    from . import families

    return families.FAMILIES.get(DECODE_FAMILY)


def decode_prediction(gpu, shape: Mapping[str, Any], calibration="auto"):
    """The model's fastest decode for a decode shape: the chooser's pick among ``flash_decode_sm80``'s
    shipped configs (``iomodel.chooser.choose``) where that family exists, else (before it lands) the
    best configuration of the library's split-KV decode diagram (``attention-split-kv``: not causal,
    dense cache, so a causal or paged row is predicted as its dense, non-causal twin).  Raises
    ModelError when nothing fits."""
    fam = decode_family()
    if fam is not None:
        from .chooser import choose
        from .problems import fields_of

        try:
            fields = tuple(fields_of(fam))
        except (KeyError, AttributeError):   # a problem name this module's table does not list
            fields = ()
        return choose([DECODE_FAMILY], gpu, decode_model_shape(shape, fields), calibration)
    from .algorithms import best_prediction

    sizes = {"B": shape["B"], "Hk": shape["H_kv"], "g": shape["H"] // shape["H_kv"], "N": shape["N_q"],
             "M": shape["N_k"], "d": shape["d"], "dtype": shape.get("dtype", "bf16")}
    return best_prediction("attention-split-kv", gpu, sizes, calibration)
