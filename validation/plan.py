"""What a validation run measures: its shapes and its rows (kernel family x config x shape, peers).

The shipped configurations come from the kernel-family registry (``iomodel.families``); the model
orders them, so the rows of one shape run best-predicted first.  Nothing here imports torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from iomodel import families as _registry
from iomodel.accuracy import OUR_KERNELS, PEER_KERNELS
from iomodel.algo_peers import algo_of
from iomodel.results import config_label, shape_label
from .peers import peer_takes

__all__ = ["SWEEP_KERNELS", "ONLY_CHOICES", "DEFAULT_ONLY", "SWEEP_N", "TOKENS", "HIDDEN", "make_shape",
           "default_shapes", "KernelFamily", "PlannedRow", "build_plan"]

#: our attention families the attention sweep times: not those whose rows are the algorithm phase's
#: (flash_decode_sm80 takes the attention form but runs on a KV cache: validation/decode.py)
SWEEP_KERNELS = tuple(k for k in OUR_KERNELS if algo_of(k) is None)
DEFAULT_ONLY = (*SWEEP_KERNELS, "peers")  # the attention sweep: what a run measures unless told
# what ``--only`` may name: the algorithm phase (validation/algorithms.py), or its decode rows alone
# (validation/decode.py), or its variable-length prefill rows alone (validation/varlen.py)
ONLY_CHOICES = (*DEFAULT_ONLY, "algorithms", "decode", "varlen")
SWEEP_N = 4096          # every shipped config is timed at this sequence length
TOKENS = 16384          # B * N
HIDDEN = 2048           # H * d


def make_shape(N: int, d: int, causal: bool, dtype: str = "bf16", tokens: int = TOKENS,
               hidden: int = HIDDEN, **features) -> dict[str, Any]:
    """An attention shape of ``tokens`` = B*N tokens and ``hidden`` = H*d model width; `features`: a
    window and score modifiers (the model's shape fields: ``window_left``, ``window_right``, ``softcap``,
    ``alibi``)."""
    B = max(1, tokens // N)
    H = max(1, hidden // d)
    return {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": bool(causal), "dtype": dtype,
            **features}


def default_shapes(quick: bool = False, dtype: str = "bf16") -> list[dict[str, Any]]:
    """B*N = 16384 tokens, H*d = 2048; N in {1024, 4096, 16384}, d in {64, 128},
    causal and not.  The N = 4096 shapes (where every config runs) come first.
    ``quick``: d=128 N=4096 non-causal (all configs) and d=64 N=1024 causal."""
    if quick:
        return [make_shape(4096, 128, False, dtype), make_shape(1024, 64, True, dtype)]
    return [make_shape(N, d, causal, dtype) for N in (4096, 1024, 16384) for d in (128, 64) for causal in (False, True)]


@dataclass
class KernelFamily:
    """One kernel family as the sweep sees it: its candidate configs (the registry's shipped ones;
    tests pass their own), ``run(config, q, k, v, causal) -> output``, and ``skip``: why the whole
    family cannot run here (then it has no rows)."""

    name: str
    configs: Sequence[Any] = ()
    run: Callable[..., Any] | None = None
    skip: str | None = None

    @classmethod
    def shipped(cls, name: str, run: Callable[..., Any]) -> "KernelFamily":
        return cls(name, _registry.get(name).shipped, run)

    def configs_for(self, shape: Mapping[str, Any]) -> list[Any]:
        """The configs that fit ``shape``: the fields the family binds to it (head_dim = d) match, and the
        kernels offer their variant for the shape's features (causal, a window, score modifiers: not one the
        family lists as spilling, as ``kernels`` picks from ``shipped_for``)."""
        return _registry.get(self.name).offered(self.configs, shape)


@dataclass
class PlannedRow:
    kernel: str
    shape: dict[str, Any]
    config: Any = None
    why: str = ""            # "sweep" (all configs at N=4096), "model-top", "peer"
    predicted_rank: int | None = None

    @property
    def is_peer(self) -> bool:
        return self.kernel in PEER_KERNELS

    @property
    def label(self) -> str:
        return config_label(self.kernel, self.config)


def _model_order(kname: str, shape: dict, cfgs: list, predictor, notes: list[str]) -> tuple[list[int], set[int]]:
    """Indices of ``cfgs`` in the model's order (the shipped order where it cannot rank), every index
    once, and the set the model ranked (its infeasible configs come last, unranked)."""
    order, why = predictor.rank(kname, shape, cfgs) if predictor is not None else (None, "no model")
    if order is None:
        msg = f"{kname} {shape_label(shape)}: model could not rank configs ({why}); using shipped order"
        if msg not in notes:
            notes.append(msg)
        order = list(range(len(cfgs)))
    elif not order:
        notes.append(f"{kname} {shape_label(shape)}: the model finds no feasible config; timing them all")
        order = list(range(len(cfgs)))
    ranked = set(order)
    return order + [i for i in range(len(cfgs)) if i not in ranked], ranked


def _family_rows(fam: KernelFamily, shape: dict, predictor, sweep_n: int, notes: list[str]) -> list[PlannedRow]:
    """Every shipped config of the shape at ``N == sweep_n``, else the model's top one."""
    cfgs = fam.configs_for(shape)
    if not cfgs:
        notes.append(f"{fam.name}: no shipped config for d={shape['d']}")
        return []
    order, ranked = _model_order(fam.name, shape, cfgs, predictor, notes)
    if shape["N_q"] != sweep_n:
        order = order[:1]
    why = "sweep" if shape["N_q"] == sweep_n else "model-top"
    return [PlannedRow(fam.name, shape, cfgs[i], why, r if i in ranked else None) for r, i in enumerate(order)]


def build_plan(
    shapes: Sequence[Mapping[str, Any]],
    families: Mapping[str, KernelFamily],
    predictor=None,
    *,
    only: Iterable[str] = DEFAULT_ONLY,
    sweep_n: int = SWEEP_N,
    notes: list[str] | None = None,
) -> list[PlannedRow]:
    """Rows to run, grouped by shape (inputs are made once per shape).

    At ``N == sweep_n`` every shipped config of the head dim (model order when the model ranks them,
    through ``predictor.rank``); elsewhere the model's top config (the first shipped one when the
    model cannot rank).  Peers at every shape that they take (a window or score modifier: FlashAttention-4's
    window and softcap alone, ``validation.peers.peer_takes``)."""
    only = set(only)
    notes = notes if notes is not None else []
    rows: list[PlannedRow] = []
    for shape in map(dict, shapes):
        for kname in SWEEP_KERNELS:
            fam = families.get(kname)
            if kname in only and fam is not None and not fam.skip:
                rows += _family_rows(fam, shape, predictor, sweep_n, notes)
        if "peers" in only:   # a shape with a window or a modifier: the peers that take it (validation.peers)
            rows += [PlannedRow(peer, shape, None, "peer") for peer in PEER_KERNELS if peer_takes(peer, shape)]
    return rows
