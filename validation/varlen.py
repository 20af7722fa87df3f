"""The variable-length prefill rows of the algorithm phase (``--only varlen``; or ``--only algorithms``,
with ``--algo-peers`` naming them to run them alone): packed sequences back to back, our
``kernels.flash_attention_varlen`` beside our dense forward on the same tokens and PyTorch's native
varlen forwards, in the same run.

A group (``GROUPS``: head dims and heads ``HEADS``, causal and not, three mixes of sequence lengths
``MIXES``) is one set of packed inputs (T tokens, ``cu_seqlens`` int32) and its rows:

* ``flash_varlen_sm80`` and ``flash_varlen``: our varlen kernel with the config the chooser picks on the
  group's dense batch among ``flash_sm80``'s configs, or among those of the families the GPU runs
  (flash_sm90's on an H100, whose varlen form the kernel has too), so that each runs the tiles of its
  dense twin and their ratio (``varlen.dense_ratio``) is the cost of the packing alone;
* ``flash_dense_sm80`` and ``flash_dense``, the twins: ``kernels.flash_attention`` (``backend`` "sm80",
  and "auto", flash_sm90 on an H100) on the group's first B * ``DENSE_N`` tokens as a dense batch of B =
  T // ``DENSE_N`` sequences of ``DENSE_N``: the same tokens as far as whole sequences go (the mixes of
  ``DENSE_MIXES``; the edge mix, there for its edge cases, has none);
* the peers (``VARLEN_PEERS``): ``torch.nn.attention.varlen.varlen_attn`` and SDPA's flash backend on
  nested (jagged) tensors, each looked up at run time; a torch without one records the error.

Every row is checked against one float32 reference of the group (per sequence for the packed rows, the
dense batch's for the dense rows), then the rows that passed are timed together, interleaved in the
sweep's rounds (``validation.groups.run_groups``, as the decode rows).  Rows count FLOPs per sequence
(``varlen_flops``), so packed and dense rows compare in TFLOP/s, and a packed row's
``varlen.ratio_to_dense`` is its TFLOP/s over each dense row's of the group.
(A kernel with a config of the sm_90 family on a device that is not sm_90 fails, and its row says so.)
Predictions: ``iomodel.algo_peers.varlen_prediction`` with the run's calibration.  The device side is
the environment's ``varlen()`` (``validation.varlen_torch.TorchVarlen``, ``validation.fake_env.FakeVarlen``).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from iomodel.algo_peers import (VARLEN, VARLEN_DENSE, VARLEN_KERNELS, VARLEN_PEERS, algo_flops,
                                varlen_dense_families, varlen_dense_shape, varlen_prediction)
from iomodel.results import ResultRow, config_label, jsonable, shape_key, shape_label

from .algorithms import AlgoRow
from .groups import run_groups
from .records import new_record, short_error

__all__ = ["HEADS", "MIX_SEED", "MIXES", "DENSE_MIXES", "DENSE_N", "GROUPS", "QUICK_GROUPS", "log_uniform_lengths",
           "varlen_shape", "dense_shape", "VarlenRow", "TWINS", "varlen_rows", "summary", "ratios", "run_varlen",
           "varlen_table"]


def log_uniform_lengths(count: int, lo: int, hi: int, seed: int) -> tuple[int, ...]:
    """``count`` lengths drawn log-uniformly in [lo, hi] from a fixed seed: the same mix every run."""
    rng = random.Random(seed)
    return tuple(min(hi, max(lo, round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))) for _ in range(count))


#: (d, H, H_kv): MHA at both head dims, GQA 32:8 at d = 128
HEADS = ((128, 16, 16), (128, 32, 8), (64, 16, 16))
MIX_SEED = 20261125
DENSE_N = 4096   # the dense rows' sequence length: B = T // DENSE_N
#: the mixes of sequence lengths: log-uniform (the issue's), all equal (a sanity row: packed = dense), and
#: one with empty and one-token sequences among others, the first and last included (the kernels' edge
#: cases, checked first of all; timed too, but without dense rows: its ratio would say nothing)
MIXES = {"log-uniform": log_uniform_lengths(32, 128, 8192, MIX_SEED), "uniform": (DENSE_N,) * 32,
         "edge": (0, 1, 300, 1, 4096, 0, 17, 1000, 1, 129, 2047, 1)}
DENSE_MIXES = ("log-uniform", "uniform")   # the mixes whose groups have the dense rows
#: (d, H, H_kv, causal, mix) of every group, in run order
GROUPS = tuple((d, H, H_kv, causal, mix) for d, H, H_kv in HEADS for causal in (False, True) for mix in MIXES)
QUICK_GROUPS = ((128, 16, 16, False, "log-uniform"), (128, 32, 8, True, "edge"))


def varlen_shape(seqlens, d: int, H: int, H_kv: int, causal: bool, dtype: str = "bf16") -> dict[str, Any]:
    """A packed row's shape (``iomodel.algo_peers``: B sequences, T tokens, the longest N_max)."""
    lens = [int(n) for n in seqlens]
    return {"B": len(lens), "H": H, "H_kv": H_kv, "T": sum(lens), "N_max": max(lens), "d": d, "causal": bool(causal),
            "dtype": dtype, "seqlens": lens, "layout": "packed"}


def dense_shape(packed: dict[str, Any], backend: str, n: int = DENSE_N) -> dict[str, Any] | None:
    """The dense rows' shape of a packed one: B = T // n sequences of n tokens (None when T < n)."""
    B = packed["T"] // n
    if B < 1:
        return None
    return {**packed, "B": B, "T": B * n, "N_max": n, "seqlens": [n] * B, "layout": "dense", "backend": backend}


@dataclass
class VarlenRow(AlgoRow):
    """A varlen row: its group (the rows sharing one set of inputs) and that group's packed shape, its
    mix, and the model family of its config (flash_sm80's FlashConfig for our varlen kernel, which
    names its tiles)."""

    group: int = 0
    mix: str = ""
    family: str | None = None
    packed: dict | None = None

    @property
    def label(self) -> str:
        return config_label(self.family or self.kernel, self.config)


def _note(notes: list[str], msg: str) -> None:
    if msg not in notes:
        notes.append(msg)


def _pick(kernel: str, shape: dict[str, Any], predictor, notes: list[str]) -> tuple[str | None, Any]:
    """(family, config) a row runs: the chooser's pick with the run's calibration over the families of
    the row's backend (``varlen_dense_families``), on its batch for a dense row, on the group's dense
    batch (B = T // DENSE_N, at least one sequence) for a varlen one; (None, None) without a model, or
    when the chooser picks nothing (a note says why; the kernel then picks its own, but for
    ``flash_varlen_sm80``, whose row then fails: without a config it could run another family)."""
    if predictor is None:
        return None, None
    from iomodel.chooser import choose

    backend = VARLEN_DENSE.get(kernel) or VARLEN_KERNELS[kernel]
    fams = varlen_dense_families(backend, predictor.spec)
    if kernel in VARLEN_DENSE:
        s = varlen_dense_shape(shape)
    else:
        s = varlen_dense_shape(dense_shape(shape, backend) or {**shape, "B": 1, "N_max": DENSE_N})
    try:
        p = choose(fams, predictor.spec.key, s, predictor.calibration)
    except Exception as exc:  # noqa: BLE001 - the row runs with the kernel's own pick; the note says why
        _note(notes, f"{kernel} {shape_label(shape)}: the chooser picked nothing ({short_error(exc)})")
        return None, None
    return p.kernel, p.config


def varlen_rows(quick: bool = False, dtype: str = "bf16", peers: tuple[str, ...] | None = None,
                predictor=None, notes: list[str] | None = None) -> list[VarlenRow]:
    """The varlen rows, group by group: ours, the dense rows (where the mix holds a dense sequence), then
    the peers; ``peers`` keeps the kernels named (None: all)."""
    notes = notes if notes is not None else []
    rows: list[VarlenRow] = []
    for g, (d, H, H_kv, causal, mix) in enumerate(QUICK_GROUPS if quick else GROUPS):
        packed = varlen_shape(MIXES[mix], d, H, H_kv, causal, dtype)
        planned = [(k, {**packed, "backend": b}) for k, b in VARLEN_KERNELS.items()]
        if mix in DENSE_MIXES:
            planned += [(k, dense_shape(packed, b)) for k, b in VARLEN_DENSE.items() if dense_shape(packed, b)]
        planned += [(k, packed) for k in VARLEN_PEERS]
        for kernel, shape in planned:
            if peers is not None and kernel not in peers:
                continue
            if kernel in VARLEN_PEERS:
                rows.append(VarlenRow(kernel, shape, group=g, mix=mix, packed=packed))
            else:
                family, cfg = _pick(kernel, shape, predictor, notes)
                rows.append(VarlenRow(kernel, shape, cfg, "model-top", group=g, mix=mix, family=family,
                                      packed=packed))
    return rows


# --------------------------------------------------------------------------- one row's record

def summary(shape: dict[str, Any], mix: str = "") -> dict[str, Any]:
    """The ``varlen`` object's lengths and sizes: the sequences' count, min, max, total and empty ones,
    and the FLOPs the row's TFLOP/s count."""
    lens = shape["seqlens"]
    out = {"mix": mix, "layout": shape.get("layout", "packed"), "sequences": len(lens), "min": min(lens),
           "max": max(lens), "total": sum(lens), "empty": lens.count(0), "flops": algo_flops(VARLEN, shape)}
    if mix == "log-uniform":
        out["mix_seed"] = MIX_SEED
    if shape.get("backend"):
        out["backend"] = shape["backend"]
    if shape.get("layout") == "dense":
        out["dense_N"] = shape["N_max"]
    return out


_CALLS = {**{k: "kernels.flash_attention_varlen(q, k, v, cu_seqlens, cu_seqlens, N_max, N_max, causal=..., "
                "validate=False, config=cfg)" for k in VARLEN_KERNELS},
          **{k: f"kernels.flash_attention(q, k, v, causal=..., config=cfg, backend={b!r})"
             for k, b in VARLEN_DENSE.items()}, **VARLEN_PEERS}


def _predict(rec: ResultRow, row: VarlenRow, run, cache: dict) -> None:
    """``varlen_prediction`` with the run's calibration, at our kernel's config for its rows (one call a
    shape and config)."""
    cfg = row.config if row.kernel in VARLEN_KERNELS else None
    key = (shape_key(rec.shape), rec.config_label if cfg is not None else None)
    if key not in cache:
        cal = run.predictor.calibration if run.predictor is not None else "auto"
        try:
            cache[key] = (varlen_prediction(run.spec.key, rec.shape, cal, cfg), None)
        except Exception as exc:  # noqa: BLE001 - a model failure is recorded, the measurement stays
            cache[key] = (None, short_error(exc))
    pred, err = cache[key]
    if pred is not None:
        rec.prediction = jsonable(pred)
        rec.predicted_ms = pred["time_s"] * 1e3
        rec.predicted_tflops = pred["tflops"]
        rec.predicted_bottleneck = pred.get("bottleneck")
        rec.extra["varlen"]["prediction_method"] = pred["method"]
    if err:
        rec.prediction_error = err


def _record(row: VarlenRow, run, cache: dict) -> ResultRow:
    rec = new_record(row, "fwd")   # a varlen prefill is an attention forward
    rec.extra["varlen"] = {**summary(row.shape, row.mix), "call": _CALLS[row.kernel]}
    if row.family:
        rec.extra["varlen"]["family"] = row.family
    _predict(rec, row, run, cache)
    return rec


def _ratio_text(rec: ResultRow) -> str:
    ratio = rec.extra["varlen"].get("ratio_to_dense") or {}
    return "".join(f", {r:.2f}x {k}" for k, r in ratio.items())


def _progress(i: int, n: int, rec: ResultRow, elapsed_s: float) -> str:
    cfg = f" {rec.config_label}" if rec.config else ""
    mix = rec.extra["varlen"]["mix"]
    body = (f"{rec.measured_tflops:.1f} TFLOP/s, {rec.measured_ms:.3f} ms{_ratio_text(rec)}" if rec.ok
            else f"FAILED ({rec.error or '?'})")
    pred = f" (pred {rec.predicted_ms:.3f} ms)" if rec.predicted_ms else " (pred -)"
    return f"[{i}/{n}] {rec.kernel}{cfg} {mix} {shape_label(rec.shape)}: {body}{pred}  [{elapsed_s:.0f}s]"


# --------------------------------------------------------------------------- the phase

#: our varlen row -> its dense twin (the same backend, the same config)
TWINS = {k: next(d for d, db in VARLEN_DENSE.items() if db == b) for k, b in VARLEN_KERNELS.items()}


def ratios(recs: list[ResultRow]) -> None:
    """Each packed row's TFLOP/s over each timed dense row's of its group (``ratio_to_dense``); ours also
    over its twin's alone (``dense_ratio``, ``dense_twin``: the issue's acceptance, at least 0.9)."""
    dense = {r.kernel: r.measured_tflops for r in recs if r.kernel in VARLEN_DENSE and r.ok and r.measured_tflops}
    for r in recs:
        if r.ok and r.kernel not in VARLEN_DENSE and dense:
            v = r.extra["varlen"]
            v["ratio_to_dense"] = {k: r.measured_tflops / t for k, t in dense.items()}
            if TWINS.get(r.kernel) in dense:
                v.update(dense_twin=TWINS[r.kernel], dense_ratio=v["ratio_to_dense"][TWINS[r.kernel]])


class _VarlenPhase:
    """The varlen rows' part in ``validation.groups.run_groups``: a group is one set of packed inputs
    (``VarlenRow.group``), with the dense batch and the nested tensors where its rows need them."""

    algo, extra = VARLEN, "varlen"
    progress = staticmethod(_progress)

    def __init__(self, run):
        self.run, self.cache = run, {}

    def device(self):
        return self.run.env.varlen()

    def record(self, row: VarlenRow) -> ResultRow:
        return _record(row, self.run, self.cache)

    def group_key(self, row: VarlenRow) -> int:
        return row.group

    def make_inputs(self, impl, rows: list[VarlenRow], seed: int) -> list:
        dense = next((row.shape for row in rows if row.kernel in VARLEN_DENSE), None)
        nested = any(row.kernel == "sdpa_flash_nested" for row in rows)
        return impl.make_inputs(rows[0].packed, dense, nested, self.run.opts.input_sets, seed)

    def runner(self, impl, row: VarlenRow):
        return impl.runner(row.kernel, row.config, row.shape)

    timed = staticmethod(ratios)


def run_varlen(run, rows: list[VarlenRow], first: int, seed: int) -> None:
    """Every varlen row, numbered from ``first``, group by group (a group's rows are adjacent, as
    ``varlen_rows`` plans them).  Never raises for a row."""
    run_groups(run, _VarlenPhase(run), rows, first, seed)


# --------------------------------------------------------------------------- the table at the end

def _cells(r: dict) -> list[str]:
    s, v = r["shape"], r.get("varlen") or {}
    kv = "" if s["H_kv"] == s["H"] else f":{s['H_kv']}"
    head = [v.get("mix", "-"), f"d{s['d']} H{s['H']}{kv}{' causal' if s.get('causal') else ''}", r["kernel"],
            str(s["T"])]
    if not r.get("ok"):
        return head + ["-", "-", "-", "-", "-", (r.get("error") or "not ok")[:60]]
    ratio = v.get("ratio_to_dense") or {}
    pred = f"{r['predicted_ms']:.3f}" if r.get("predicted_ms") else "-"
    return head + [f"{r['measured_ms']:.3f}", f"{r['measured_tflops']:.1f}"] + [
        f"{ratio[k]:.2f}" if k in ratio else "-" for k in VARLEN_DENSE] + [pred, r.get("config_label") or ""]


def varlen_table(results: dict[str, Any]) -> str | None:
    """The varlen rows of a run as a short table (None without any): per row the mix, heads, kernel,
    tokens, measured ms and TFLOP/s, the ratio to each dense row of its group, predicted ms."""
    rows = [r.as_dict() if isinstance(r, ResultRow) else r for r in results.get("rows", [])]
    rows = [r for r in rows if r.get("kernel") in (*VARLEN_KERNELS, *VARLEN_DENSE, *VARLEN_PEERS)]
    if not rows:
        return None
    cols = ["mix", "heads", "kernel", "tokens", "ms", "TFLOP/s", *(f"x {k}" for k in VARLEN_DENSE), "pred ms",
            "config / error"]
    table = [cols] + [_cells(r) for r in rows]
    widths = [max(len(line[c]) for line in table) for c in range(len(cols) - 1)]
    lines = [f"Variable-length prefill rows (x {', x '.join(VARLEN_DENSE)}: TFLOP/s over the dense row's "
             "of the same group):"]
    for line in table:
        lines.append("  " + "  ".join(c.rjust(w) if 3 <= k <= 8 else c.ljust(w)
                                      for k, (c, w) in enumerate(zip(line, widths))) + "  " + line[-1])
    return "\n".join(lines)
