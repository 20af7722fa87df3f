"""Our kernels against the peers, shape by shape and family by family: the model's pick among a family's measured
rows of a shape (what that family runs there) and each peer's measured time over that row's.  Above 1 ours is faster.
The report's "Against the peers" table (``iomodel.accuracy.Report.peer_ratios``); rows are duck-typed
(``source``, ``shape``, ``kernel``, ``config_label``, ``is_peer``, ``measured_s``, ``predicted_s``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from .results import shape_key

__all__ = ["PeerRatio", "peer_ratios"]


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
