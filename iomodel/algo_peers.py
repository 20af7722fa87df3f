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

Variable-length prefill (packed sequences back to back, ``validation/varlen.py``) has its rows there too:
our varlen kernel (``VARLEN_KERNELS``: ``flash_varlen_sm80``, the mma.sync forward in its varlen form,
and ``flash_varlen``, the family the model picks, flash_sm90 on an H100), our dense forward on the same
tokens as a batch of equal sequences (``VARLEN_DENSE``) and PyTorch's native varlen forwards
(``VARLEN_PEERS``), all ``"pass": "fwd"``.  Their shape is ``{"B", "H", "H_kv", "T", "N_max", "d",
"causal", "dtype", "seqlens", "layout"}`` (B sequences of ``seqlens`` tokens each, N_q = N_k per
sequence, T tokens in all, the longest N_max; ``layout`` "packed" or "dense"; our rows also the
``backend`` whose families they run, "sm80" or "auto"); FLOPs the sum over sequences of the attention
forward's (``varlen_flops``), so a packed row and a dense row compare in TFLOP/s.
Nothing here imports torch.
"""
from __future__ import annotations

from typing import Any, Mapping

from .problems import conventional_flops

__all__ = ["ALGO_PEERS", "BACKWARD_KERNELS", "DETERMINISTIC_KERNELS", "DECODE", "DECODE_FAMILY", "DECODE_KERNELS",
           "DECODE_FLOOR", "DECODE_PEERS", "ALGO_KERNELS", "ALGO_SIZES", "algo_of", "algo_flops", "algo_shape_label", "algo_prediction",
           "attention_shape", "decode_family", "decode_model_shape", "decode_prediction",
           "default_pass", "VARLEN", "VARLEN_FAMILY", "VARLEN_KERNELS", "VARLEN_DENSE", "VARLEN_PEERS",
           "VARLEN_BASE_FAMILY", "varlen_seqlens", "varlen_sequence_shape", "varlen_dense_shape", "varlen_flops",
           "varlen_dense_families", "varlen_prediction"]

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
#: the decode rows' floor: a kernel that only reads the group's K and V caches once (16-byte loads, an
#: integer sum of the words a block; validation/read_floor.py), timed as the others
DECODE_FLOOR = "read_floor_decode"
VARLEN = "varlen"   # the algorithm of the variable-length prefill rows (and the name ``--only`` takes)
#: our varlen kernel's name in results (``kernels.flash_attention_varlen`` with a flash_sm80 FlashConfig:
#: the mma.sync forward in its varlen form)
VARLEN_FAMILY = "flash_varlen_sm80"
#: our varlen rows -> the backend whose families their config comes from: flash_sm80's, or the model's
#: pick over the forward families this GPU runs (flash_sm90's varlen form on an H100)
VARLEN_KERNELS = {VARLEN_FAMILY: "sm80", "flash_varlen": "auto"}
#: the family whose dense model predicts each sequence of a packed row without a backend (the peers')
VARLEN_BASE_FAMILY = "flash_sm80"
#: our dense forward on the same tokens (``kernels.flash_attention``) -> the ``backend`` it is called with;
#: each is the dense twin of the varlen row of the same backend
VARLEN_DENSE = {"flash_dense_sm80": "sm80", "flash_dense": "auto"}
#: PyTorch's forwards that take packed sequences natively -> what they call
VARLEN_PEERS = {"torch_varlen_attn": "torch.nn.attention.varlen.varlen_attn",
                "sdpa_flash_nested": "F.scaled_dot_product_attention on nested (jagged) tensors, FLASH_ATTENTION"}
#: every kernel of the algorithm phase (``--algo-peers`` takes these names) -> the algorithm it runs
ALGO_KERNELS = {**ALGO_PEERS, **{k: "attention-backward" for k in BACKWARD_KERNELS},
                **{k: DECODE for k in (*DECODE_KERNELS, *DECODE_PEERS, DECODE_FLOOR)},
                **{k: VARLEN for k in (*VARLEN_KERNELS, *VARLEN_DENSE, *VARLEN_PEERS)}}
#: algorithm -> the size names of its shape, in label order
ALGO_SIZES = {"matmul": ("M", "N", "K"), "cross-entropy": ("T", "D", "V"), "mlp": ("T", "D", "F"),
              "attention-backward": ("B", "H", "N", "M", "d"), DECODE: ("B", "H", "H_kv", "N_q", "N_k", "d"),
              VARLEN: ("B", "H", "H_kv", "T", "N_max", "d")}


def algo_of(kernel: str) -> str | None:
    """The algorithm a kernel of the algorithm phase runs, or None for any other kernel (attention rows)."""
    return ALGO_KERNELS.get(kernel)


def default_pass(kernel: str) -> str | None:
    """The attention pass a row of ``kernel`` times when its row does not say: ``"bwd"`` for the
    attention backward's rows, ``"fwd"`` for the attention rows (every file before the field held only
    forward attention rows), None for matmul, cross-entropy and the MLP (no attention pass)."""
    algo = algo_of(kernel)
    if algo is None or algo in (DECODE, VARLEN):   # decode and varlen are attention forwards
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
    if algo == VARLEN:
        return varlen_flops(shape)
    raise ValueError(f"unknown algorithm {algo!r}; known: {', '.join(ALGO_SIZES)}")


def algo_shape_label(shape: Mapping[str, Any]) -> str | None:
    """``M8192 N8192 K8192`` (the dtype when not bf16), or None when the shape is no algorithm's (decode
    shapes are in the attention form, which ``iomodel.results.shape_label`` writes); a varlen shape as
    ``packed B32 T51746 Nmax6524 H32/8 d128 causal``."""
    if all(k in shape for k in ALGO_SIZES[VARLEN]):
        kv = "" if shape["H_kv"] == shape["H"] else f"/{shape['H_kv']}"
        dt = "" if shape.get("dtype", "bf16") == "bf16" else f" {shape['dtype']}"
        return (f"{shape.get('layout', 'packed')} B{shape['B']} T{shape['T']} Nmax{shape['N_max']} H{shape['H']}{kv} "
                f"d{shape['d']}" + (" causal" if shape.get("causal") else "") + dt)
    for algo, sizes in ALGO_SIZES.items():
        if algo in (DECODE, VARLEN):
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
    decode shape gets ``decode_prediction``, a varlen shape ``varlen_prediction``."""
    try:
        from .algorithms import best_prediction  # type: ignore[import-not-found]
    except ImportError:
        return None, None
    try:
        if algo == DECODE:
            pred = decode_prediction(gpu_key, shape)
        elif algo == VARLEN:
            pred = varlen_prediction(gpu_key, shape)
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
    dense cache, so a causal or paged row is predicted as its dense, non-causal twin).  A paged row's
    page size goes to a family whose plan models the gather (``paged_rows``).  Raises
    ModelError when nothing fits."""
    fam = decode_family()
    if fam is not None:
        from .chooser import choose
        from .problems import fields_of

        try:
            fields = tuple(fields_of(fam))
        except (KeyError, AttributeError):   # a problem name this module's table does not list
            fields = ()
        if fam.plan.paged_rows is not None:   # the family models the paged gather: it takes the page size
            fields += ("page_size",)
        return choose([DECODE_FAMILY], gpu, decode_model_shape(shape, fields), calibration)
    from .algorithms import best_prediction

    sizes = {"B": shape["B"], "Hk": shape["H_kv"], "g": shape["H"] // shape["H_kv"], "N": shape["N_q"],
             "M": shape["N_k"], "d": shape["d"], "dtype": shape.get("dtype", "bf16")}
    return best_prediction("attention-split-kv", gpu, sizes, calibration)


# --------------------------------------------------------------------------- variable-length prefill

def varlen_seqlens(shape: Mapping[str, Any]) -> list[int]:
    """Every sequence's length (N_q = N_k): ``seqlens``, or B sequences of N_max where a shape has none."""
    lens = shape.get("seqlens")
    return [int(n) for n in lens] if lens is not None else [int(shape["N_max"])] * int(shape["B"])


def varlen_sequence_shape(shape: Mapping[str, Any], n: int) -> dict[str, Any]:
    """One sequence of ``n`` tokens of a varlen shape, in the attention form with B = 1 (causal is
    bottom-right, which is top-left at N_q = N_k)."""
    return {"B": 1, "H": shape["H"], "H_kv": shape.get("H_kv", shape["H"]), "N_q": n, "N_k": n, "d": shape["d"],
            "causal": bool(shape.get("causal", False)), "dtype": shape.get("dtype", "bf16")}


def varlen_dense_shape(shape: Mapping[str, Any]) -> dict[str, Any]:
    """A dense row's batch (B sequences of N_max) in the attention form the dense families take."""
    return {**varlen_sequence_shape(shape, int(shape["N_max"])), "B": int(shape["B"])}


def varlen_flops(shape: Mapping[str, Any]) -> float:
    """The conventional forward FLOPs summed over the sequences (4 H n^2 d each, halved causal): a
    packed row and a dense row of the same tokens count alike."""
    return float(sum(conventional_flops(varlen_sequence_shape(shape, n)) for n in varlen_seqlens(shape) if n > 0))


def varlen_dense_families(backend: str, gpu) -> list[str]:
    """The families ``kernels.flash_attention`` picks among for ``backend``: flash_sm80 for "sm80",
    and for "auto" flash_sm90 too where the GPU is sm_90 (the wgmma kernel runs there only)."""
    if backend == "sm80":
        return ["flash_sm80"]
    if backend == "sm90":
        return ["flash_sm90"]
    from .hardware import resolve_gpu

    return ["flash_sm80"] + (["flash_sm90"] if tuple(resolve_gpu(gpu).compute_capability) == (9, 0) else [])


def _compact(pred, method: str, flops: float, time_s: float, config: str | None) -> dict[str, Any]:
    return {"time_s": time_s, "tflops": flops / time_s / 1e12, "flops": flops, "bottleneck": pred.bottleneck,
            "feasible": True, "kernel": pred.kernel, "config": config, "method": method}


def _config_family(config, names: list[str]) -> str:
    """The family among ``names`` whose config type ``config`` is (a dict: flash_sm90's with consumers)."""
    from . import families

    if isinstance(config, Mapping):
        want = "flash_sm90" if "consumers" in config else "flash_sm80"
        return want if want in names else names[0]
    return next((n for n in names if isinstance(config, families.get(n).config_type)), names[0])


def _sequence_predictions(gpu, shape: Mapping[str, Any], calibration, config) -> list[tuple[Any, int]]:
    """(prediction, count) for each distinct non-empty sequence length: the chooser's pick over the
    families of the shape's ``backend`` (flash_sm80 without one), or ``config`` (one config for every
    sequence, as one varlen launch runs)."""
    from collections import Counter

    from .api import predict
    from .chooser import choose
    from .errors import ModelError

    fams = varlen_dense_families(shape["backend"], gpu) if shape.get("backend") else [VARLEN_BASE_FAMILY]
    out = []
    for n, count in sorted(Counter(n for n in varlen_seqlens(shape) if n > 0).items()):
        s = varlen_sequence_shape(shape, n)
        p = (choose(fams, gpu, s, calibration) if config is None
             else predict(_config_family(config, fams), gpu, s, config, calibration))
        if not p.feasible or not p.time_s > 0:
            raise ModelError(f"{p.kernel} is infeasible for a sequence of {n}: {p.reason or '?'}")
        out.append((p, count))
    return out


def varlen_prediction(gpu, shape: Mapping[str, Any], calibration="auto", config=None) -> dict[str, Any]:
    """The model's time of a varlen row, as a compact prediction dict with its ``method`` named.

    A dense row (``layout`` "dense"): the chooser's pick over the families its ``backend`` runs for the
    batch, what the harness runs it with.  A packed row: the sum over its sequences of the dense
    prediction of each sequence alone (B = 1), by ``flash_sm80`` (the peers'; our rows' by the families
    of their ``backend``), at ``config`` (our kernel's) or at the chooser's pick for each sequence (None:
    the peers', and what ``iomodel validate`` recomputes).  The sum ignores that one varlen launch shares
    its waves among the sequences, so short sequences weigh more in it than on the GPU.  Raises
    ModelError when nothing fits."""
    from . import families
    from .chooser import choose

    flops = varlen_flops(shape)
    if shape.get("layout") == "dense":
        fams = varlen_dense_families(shape.get("backend", "auto"), gpu)
        p = choose(fams, gpu, varlen_dense_shape(shape), calibration)
        label = families.get(p.kernel).label(p.config)
        return _compact(p, f"dense batch: the chooser's pick over {', '.join(fams)}", flops, p.time_s, label)
    preds = _sequence_predictions(gpu, shape, calibration, config)
    total = sum(p.time_s * c for p, c in preds)
    labels = {families.get(p.kernel).label(p.config) for p, _c in preds}
    kernels = sorted({p.kernel for p, _c in preds})
    at = "the given config" if config is not None else "the chooser's pick for each sequence"
    slowest = max(preds, key=lambda pc: pc[0].time_s * pc[1])[0]
    return _compact(slowest, f"sum over sequences of {'/'.join(kernels)} (B=1) at {at}", flops, total,
                    labels.pop() if len(labels) == 1 else "per sequence")
