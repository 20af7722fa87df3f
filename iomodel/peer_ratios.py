"""Our kernels against the peers, shape by shape and family by family: the model's pick among a family's measured
rows of a shape (what that family runs there) and each peer's measured time over that row's.  Above 1 ours is faster.
The report's "Against the peers" table (``iomodel.accuracy.Report.peer_ratios``); rows are duck-typed
(``source``, ``shape``, ``kernel``, ``config_label``, ``is_peer``, ``measured_s``, ``predicted_s``).  Over several
files, ``parity`` gathers each shape's ratios and says whether a peer wins it (``Report.parity``, "Over the runs")."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from .results import shape_key

__all__ = ["PeerRatio", "ShapeParity", "WGMMA_PEERS", "WIN_MEDIAN", "closest", "faces", "parity", "peer_ratios"]


@dataclass
class PeerRatio:
    source: str
    shape: dict
    kernel: str                    # our family
    config: str                    # the config of its row the model predicts fastest
    ours_s: float                  # that row's measured time
    peers: dict[str, float] = field(default_factory=dict)   # peer -> its measured time over ours

    @property
    def best_peer(self) -> tuple[str, float] | None:
        """The fastest peer and its ratio (the smallest), or None without peers."""
        return min(self.peers.items(), key=lambda kv: kv[1]) if self.peers else None


def peer_ratios(rows: Iterable[Any]) -> list[PeerRatio]:
    """One PeerRatio a (results file, shape, our family) with a row of the family the model predicts and a peer
    row on the shape, in the rows' order."""
    groups: dict[tuple, list[Any]] = {}
    for r in rows:
        groups.setdefault((r.source, shape_key(r.shape)), []).append(r)
    out = []
    for (source, _), group in groups.items():
        peers = {r.kernel: r.measured_s for r in group if r.is_peer}
        if not peers:
            continue
        for kernel in dict.fromkeys(r.kernel for r in group if not r.is_peer and r.predicted_s):
            pick = min((r for r in group if r.kernel == kernel and r.predicted_s), key=lambda r: r.predicted_s)
            out.append(PeerRatio(source, dict(pick.shape), kernel, pick.config_label, pick.measured_s,
                                 {p: t / pick.measured_s for p, t in peers.items()}))
    return out


# On a GPU with wgmma these peers run it (cuDNN's Hopper kernels, FlashAttention-4's Hopper path); SDPA's flash and
# efficient backends run mma.sync everywhere.  A family of ours on mma.sync is A100's kernel: on Hopper its bar is
# the peers on its own instructions, not the wgmma kernels our wgmma family faces.
WGMMA_PEERS = ("sdpa_cudnn", "fa4")
WIN_MEDIAN = 0.99   # a peer's median time over ours below this, over the runs of a shape, is a win


@dataclass
class ShapeParity:
    """One peer against one family of ours at one shape over every results file that timed both."""
    shape: dict
    kernel: str
    peer: str
    ratios: list[float]            # the peer's time over our pick's, a file each
    sources: list[str]
    median: float
    peer_wins: bool                # faster in every run (two or more), or by a median below WIN_MEDIAN


def faces(kernel: str, peer: str, device: str) -> bool:
    """Whether our family `kernel` is measured against `peer` on `device`: always, except an mma.sync family
    against a peer that runs wgmma on a GPU that has it."""
    from . import families
    from .errors import ModelError
    from .hardware import HardwareError, resolve_gpu

    if peer not in WGMMA_PEERS:
        return True
    try:
        if families.get(kernel).requires_wgmma:
            return True
        return resolve_gpu(device).wgmma is None
    except (ModelError, HardwareError):   # an unknown family or GPU: compare, as the per-file table does
        return True


def parity(ratios: Iterable[PeerRatio], devices: dict[str, str] | None = None) -> list[ShapeParity]:
    """Each (shape, family, peer) over the files that hold it, with the verdict.  One run's lead is not a win:
    our time and a peer's each move a few percent between runs on one GPU (power, clocks); a lead that repeats in
    every run, or a median lead beyond 1%, is.  ``devices``: file -> device name, for ``faces``."""
    by: dict[tuple, list[tuple[str, float]]] = {}
    shapes: dict[tuple, dict] = {}
    for pr in ratios:
        device = (devices or {}).get(pr.source, "")
        for peer, ratio in pr.peers.items():
            if not faces(pr.kernel, peer, device):
                continue
            key = (shape_key(pr.shape), pr.kernel, peer)
            by.setdefault(key, []).append((pr.source, ratio))
            shapes[key] = pr.shape
    out = []
    for key, runs in by.items():
        rs = [r for _, r in runs]
        median = statistics.median(rs)
        wins = (len(rs) >= 2 and max(rs) < 1.0) or median < WIN_MEDIAN
        out.append(ShapeParity(dict(shapes[key]), key[1], key[2], rs, [s for s, _ in runs], median, wins))
    return out


def closest(parities: Iterable[ShapeParity]) -> list[ShapeParity]:
    """The peer with the smallest median ratio at each (shape, family), by family and then the closest first."""
    best: dict[tuple, ShapeParity] = {}
    for sp in parities:
        key = (shape_key(sp.shape), sp.kernel)
        if key not in best or sp.median < best[key].median:
            best[key] = sp
    return sorted(best.values(), key=lambda sp: (sp.kernel, sp.median))
