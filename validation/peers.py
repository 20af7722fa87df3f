"""Peers: PyTorch's scaled_dot_product_attention pinned to one backend each, and FlashAttention-4.

``sdpa_flash`` is FlashAttention-2 (``SDPBackend.FLASH_ATTENTION``),
``sdpa_cudnn`` cuDNN's fused attention (``SDPBackend.CUDNN_ATTENTION``),
``sdpa_efficient`` the memory-efficient kernel (``SDPBackend.EFFICIENT_ATTENTION``),
``fa4`` FlashAttention-4's CuTe-DSL kernels (package ``flash-attn-4``, module ``flash_attn.cute``; its Hopper
path on sm_90, the strongest Hopper peer), timed where it is installed: it is not a dependency (docs/validation.md
says how to carry its wheels to a GPU machine).
torch is imported inside the functions.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["PEERS", "FA4", "PEER_FEATURES", "peer_runners", "peer_takes"]

#: peer kernel name -> SDPBackend member name
PEERS: dict[str, str] = {
    "sdpa_flash": "FLASH_ATTENTION",
    "sdpa_cudnn": "CUDNN_ATTENTION",
    "sdpa_efficient": "EFFICIENT_ATTENTION",
}
FA4 = "fa4"
#: the compute capabilities (major) FlashAttention-4's forward runs on
FA4_ARCHS = (9, 10)
#: the features beyond (causal) attention each peer takes (``iomodel.problems``' names): SDPA's backends none,
#: FlashAttention-4 a sliding window and a softcap (no ALiBi slopes)
PEER_FEATURES: dict[str, frozenset] = {FA4: frozenset({"window", "softcap"})}


def peer_takes(peer: str, shape) -> bool:
    """Whether `peer` runs the shape's features (its window and score modifiers; every peer runs a shape without)."""
    from iomodel.problems import is_windowed, score_mods_of

    wanted = set(score_mods_of(shape)) | ({"window"} if is_windowed(shape) else set())
    return wanted <= PEER_FEATURES.get(peer, frozenset())


def peer_runners(torch) -> dict[str, tuple[Callable[..., Any] | None, str | None]]:
    """For each peer, ``(run(q, k, v, causal) -> out, None)`` or ``(None, why not)``.

    An SDPA ``run`` calls SDPA inside ``sdpa_kernel(backend)`` so that torch may not
    fall back to another backend: an unsupported input raises instead.  FlashAttention-4's carries its
    package's version as ``run.version``.
    """
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as exc:
        why = f"torch {torch.__version__} has no torch.nn.attention.sdpa_kernel ({exc})"
        return {**{name: (None, why) for name in PEERS}, FA4: _fa4_runner(torch)}
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
    out[FA4] = _fa4_runner(torch)
    return out


def _fa4_runner(torch) -> tuple[Callable[..., Any] | None, str | None]:
    """FlashAttention-4's forward on the harness's (B, H, N, d) tensors, or (None, why not)."""
    if not torch.cuda.is_available():
        return None, "no CUDA device"
    major, minor = torch.cuda.get_device_capability()
    if major not in FA4_ARCHS:
        return None, f"FlashAttention-4 runs on sm_90 and sm_100; this device is sm_{major}{minor}"
    try:
        from flash_attn.cute import flash_attn_func
    except Exception as exc:  # noqa: BLE001 - any import failure of the optional package skips the peer
        return None, f"flash_attn.cute (pip install flash-attn-4) not importable: {type(exc).__name__}: {exc}"[:300]

    def run(q, k, v, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None):
        # FlashAttention-4 takes (B, N, H, d): the (B, H, N, d) tensors go in as transposed views, which it reads
        # in place (last dimension contiguous, strides 16-byte aligned: its maybe_contiguous copies nothing), and
        # its (B, N, H, d) output comes back as a (B, H, N, d) view.  A window side below 0 is None there (it
        # reads (-1, 0) as a left bound of -1).
        if alibi_slopes is not None:
            raise ValueError("FlashAttention-4 takes no ALiBi slopes")
        window = tuple(None if w < 0 else int(w) for w in window_size)
        out = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=bool(causal),
                              window_size=window, softcap=float(softcap))
        return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)

    run.version = _fa4_version()
    return run, None


def _fa4_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("flash-attn-4", "nvidia-cutlass-dsl"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} (version unknown)")
    return ", ".join(found)
