"""Peers: the attention backends timed beside our kernels, and the ones the model can describe.

FlashAttention-2 states its tile choices (csrc/flash_attn/src/flash_fwd_launch_template.h, for
sm80/sm90 without Hopper instructions), so the model predicts SDPA's flash backend as a flash_sm80
config, with the online softmax FlashAttention-2 runs (O rescaled every chunk: ``flash_sm80_eager``, where
our kernel keeps a stale max). cuDNN, the memory-efficient kernel and FlashAttention-4 (``fa4``, timed where its
package is installed: validation/peers.py) state none we can cite: they are timed, not predicted.
"""
from __future__ import annotations

from typing import Mapping

from . import families
from .api import Prediction, predict
from .errors import ModelError
from .families import flash_sm80

families.register(flash_sm80.EAGER_PEER)

PEERS = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "fa4")
PEER_CONFIGS = {
    "sdpa_flash": (flash_sm80.EAGER_PEER.name, {64: dict(block_m=128, block_n=128, warps=4, stages=1),
                                  128: dict(block_m=128, block_n=64, warps=4, stages=1),
                                  256: dict(block_m=64, block_n=64, warps=4, stages=1)}),
}


def peer_prediction(peer: str, gpu, shape: Mapping, calibration="auto") -> Prediction | None:
    """The model's prediction of a peer on `shape`, or None when the peer states no tiles for it."""
    if peer not in PEERS:
        raise ModelError(f"unknown peer {peer!r}; known: {', '.join(PEERS)}")
    if peer not in PEER_CONFIGS:
        return None
    kernel, by_d = PEER_CONFIGS[peer]
    cfg = by_d.get(int(shape["d"]))
    if cfg is None:
        return None
    return predict(kernel, gpu, shape, cfg, calibration)
