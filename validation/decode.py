"""The decode rows of the algorithm phase (``--only decode``; or ``--only algorithms``, with
``--algo-peers`` naming them to run them alone): attention of N_q new queries over a KV cache of N_k
keys a sequence, as inference runs it, our ``kernels.flash_attention_with_kvcache`` beside SDPA's
backends on the same values in the same run.

A shape (``DECODE_SHAPES``: bf16, d = 128, every sequence's cache full, ``cache_seqlens`` = N_k, so
the peers compare on the same keys) is one group of rows: ``flash_decode_sm80`` on a contiguous cache
(B, N_k, H_kv, d), on its paged twins where the shape has them (pools of 16- and 256-token pages
behind a shuffled block table, the same values), and the SDPA peers (``DECODE_PEERS``) on a dense
copy (B, H_kv, N_k, d).  The group's inputs and float32 reference are made once; every row is
checked against it, then the rows that passed are timed together, interleaved in the sweep's rounds
(``validation.groups.run_groups``, as the varlen rows), each share of a round queued behind a GPU
sleep (``queue_ahead`` in ``validation/timing.py``): decode kernels take microseconds, less than a
Python call may take to launch them, and the event pairs must time the GPU, not the launch.  Input
sets rotate as elsewhere, more of them for small caches (``input_sets``), so no call finds its cache
in L2.

Before the first group the phase measures a read roof (``torch.sum`` of 2 GiB, ``ceilings.measure_read``:
a decode kernel reads its cache once and writes almost nothing), kept in the results as ``read_roof``;
each row's ``decode`` object holds the bytes it must move (K, V and Q read, O written:
``decode_bytes``), its effective bandwidth (those bytes over the measured time) and that as a
fraction of the roof.  Each group also times a read floor (``read_floor_decode``, validation/read_floor.py:
a kernel that reads the group's K and V once and nothing else, checked by an exact integer sum of the
caches' words): a decode row's ``read_floor_fraction`` is the floor's time over its own, 1 when it is
as fast as reading its cache can be in this run (a launch, the first loads' ramp and the last ones' tail
included, which a bandwidth roof leaves out).  Predictions: the model's fastest decode for the shape
(``iomodel.algo_peers.decode_prediction``: the chooser's pick of ``flash_decode_sm80`` where that
family exists, which is also our rows' config, else the library's split-KV diagram), with the run's
calibration.  The device side is the environment's ``decode()`` (``validation.decode_torch.TorchDecode``,
``validation.fake_env.FakeDecode``).
"""
from __future__ import annotations

import math
from typing import Any

from iomodel.algo_peers import (DECODE, DECODE_FAMILY, DECODE_FLOOR, DECODE_KERNELS, DECODE_PEERS, algo_flops,
                                decode_family, decode_prediction)
from iomodel.results import ResultRow, config_label, shape_key, shape_label

from .algorithms import AlgoRow
from .groups import run_groups
from .predictor import Predictor
from .records import new_record, recover, short_error

__all__ = ["HEAD_DIM", "DECODE_SHAPES", "QUICK_SHAPES", "MAX_INPUT_SETS", "decode_shape", "base_shape",
           "decode_bytes", "input_sets", "decode_rows", "bandwidth_fields", "run_decode", "decode_table"]

HEAD_DIM = 128
#: (B, N_k, H, H_kv, N_q, page sizes of the paged twins); K+V span 32 MiB (B1 N8192 GQA) to 4 GiB
DECODE_SHAPES = (
    # one new query, GQA 32:8 (K+V = B * N_k * 4 KiB)
    (1, 8192, 32, 8, 1, ()), (1, 32768, 32, 8, 1, ()), (1, 131072, 32, 8, 1, (16, 256)),
    (8, 8192, 32, 8, 1, ()), (8, 32768, 32, 8, 1, (16, 256)), (32, 8192, 32, 8, 1, ()),
    (64, 4096, 32, 8, 1, ()), (64, 16384, 32, 8, 1, ()),
    # one new query, MHA 32:32 (K+V = B * N_k * 16 KiB)
    (1, 8192, 32, 32, 1, ()), (1, 131072, 32, 32, 1, ()), (8, 8192, 32, 32, 1, ()), (32, 4096, 32, 32, 1, ()),
    # four new queries (speculative decoding), GQA 32:8, causal aligned bottom-right
    (1, 32768, 32, 8, 4, ()), (8, 8192, 32, 8, 4, ()),
)
QUICK_SHAPES = ((8, 8192, 32, 8, 1, (16, 256)), (1, 8192, 32, 8, 4, ()))
#: input sets of a group at most: enough for three times the L2 when the cache is small
MAX_INPUT_SETS = 8
_ELEMENT_BYTES = {"bf16": 2, "fp16": 2}


def decode_shape(B: int, N_k: int, H: int, H_kv: int, N_q: int, dtype: str = "bf16",
                 page_size: int | None = None) -> dict[str, Any]:
    """A decode row's shape: causal as the kernel's call (for N_q = 1 it masks nothing), ``page_size``
    only for a paged cache."""
    s = {"B": B, "H": H, "H_kv": H_kv, "N_q": N_q, "N_k": N_k, "d": HEAD_DIM, "causal": True, "dtype": dtype}
    if page_size:
        s["page_size"] = page_size
    return s


def base_shape(shape: dict[str, Any]) -> dict[str, Any]:
    """The shape without its cache layout: the rows of one group share it (and their inputs)."""
    return {k: v for k, v in shape.items() if k != "page_size"}


def decode_bytes(shape: dict[str, Any]) -> dict[str, int]:
    """The bytes a decode must move, whatever the kernel: K and V of every key read once, Q read, O
    written (the block table and the sequence lengths, a few KiB, are left out)."""
    e = _ELEMENT_BYTES.get(shape.get("dtype", "bf16"), 2)
    kv = 2 * shape["B"] * shape["N_k"] * shape["H_kv"] * shape["d"] * e
    q = shape["B"] * shape["N_q"] * shape["H"] * shape["d"] * e
    return {"kv_read": kv, "q_read": q, "o_written": q, "total": kv + 2 * q}


def input_sets(shape: dict[str, Any], base: int, l2_bytes: float) -> int:
    """Input sets of a group: ``base``, more when the cache is small, so the sets rotated through hold
    three times the L2 and a call finds none of its cache there (at most ``MAX_INPUT_SETS``)."""
    kv = decode_bytes(shape)["kv_read"]
    return max(base, min(MAX_INPUT_SETS, math.ceil(3 * l2_bytes / kv)))


def _note(notes: list[str], msg: str) -> None:
    if msg not in notes:
        notes.append(msg)


def _pick(shape: dict[str, Any], predictor, notes: list[str]) -> Any:
    """Our row's config: the chooser's pick (``iomodel.chooser.choose`` through ``decode_prediction``)
    with the run's calibration; None (the kernel picks its own, ``num_splits=0``) while the family is
    not in the registry, without a model, or when the chooser picks nothing (a note says so)."""
    if decode_family() is None:
        _note(notes, f"{DECODE_FAMILY}: no model family in iomodel.families yet; our decode rows carry no "
                     "config and the kernel picks its own split (num_splits=0)")
        return None
    if predictor is None:
        return None
    try:
        return decode_prediction(predictor.spec.key, shape, predictor.calibration).config
    except Exception as exc:  # noqa: BLE001 - the row runs with the kernel's own pick; the note says why
        _note(notes, f"{DECODE_FAMILY} {shape_label(shape)}: the chooser picked nothing ({short_error(exc)})")
        return None


def decode_rows(quick: bool = False, dtype: str = "bf16", peers: tuple[str, ...] | None = None,
                predictor=None, notes: list[str] | None = None) -> list[AlgoRow]:
    """The decode rows, group by group: ours on the contiguous cache, then on each paged twin, then the
    SDPA peers and the read floor; ``peers`` keeps the kernels named (None: all)."""
    notes = notes if notes is not None else []
    rows: list[AlgoRow] = []
    for B, N_k, H, H_kv, N_q, pages in (QUICK_SHAPES if quick else DECODE_SHAPES):
        for kernel in DECODE_KERNELS:
            if peers is None or kernel in peers:
                for page in (None, *pages):
                    shape = decode_shape(B, N_k, H, H_kv, N_q, dtype, page)
                    rows.append(AlgoRow(kernel, shape, _pick(shape, predictor, notes), "model-top"))
        rows += [AlgoRow(p, decode_shape(B, N_k, H, H_kv, N_q, dtype)) for p in (*DECODE_PEERS, DECODE_FLOOR)
                 if peers is None or p in peers]
    return rows


# --------------------------------------------------------------------------- one row's record

def _layout(kernel: str, shape: dict[str, Any]) -> dict[str, Any]:
    page = shape.get("page_size")
    if kernel == DECODE_FLOOR:   # reads the contiguous caches and nothing else
        cache, layout = "read floor", "k and v caches (B, N_k, H_kv, d), read once, nothing written"
        nbytes = decode_bytes(shape)["kv_read"]
        return {"cache": cache, "layout": layout, "cache_seqlens": shape["N_k"], "kv_read": nbytes,
                "q_read": 0, "o_written": 0, "total": nbytes}
    if kernel in DECODE_PEERS:
        cache, layout = "dense", "q (B, H, N_q, d), k and v (B, H_kv, N_k, d)"
    elif page:
        cache, layout = "paged", f"k and v pools (blocks, {page}, H_kv, d), block table (B, N_k / {page}) shuffled"
    else:
        cache, layout = "contiguous", "q (B, N_q, H, d), k and v caches (B, N_k, H_kv, d)"
    out = {"cache": cache, "layout": layout, "cache_seqlens": shape["N_k"], **decode_bytes(shape)}
    if page:
        out.update(page_size=page, block_table="shuffled")
    return out


def _predict(rec: ResultRow, run, cache: dict) -> None:
    """The model's fastest decode for the row's shape with the run's calibration (one call a shape)."""
    key = shape_key(rec.shape)
    if key not in cache:
        cal = run.predictor.calibration if run.predictor is not None else "auto"
        try:
            cache[key] = (decode_prediction(run.spec.key, rec.shape, cal), None)
        except Exception as exc:  # noqa: BLE001 - a model failure is recorded, the measurement stays
            cache[key] = (None, short_error(exc))
    pred, err = cache[key]
    t = getattr(pred, "time_s", None)
    if isinstance(t, (int, float)) and t > 0 and getattr(pred, "feasible", True) is not False:
        rec.prediction = Predictor.summarize(pred)
        rec.predicted_ms = t * 1e3
        rec.predicted_tflops = algo_flops(DECODE, rec.shape) / t / 1e12
        rec.predicted_bottleneck = getattr(pred, "bottleneck", None)
        kernel, cfg = getattr(pred, "kernel", None), getattr(pred, "config", None)
        rec.extra["decode"].update(   # which kernel and tiles the model's time is of
            predicted_kernel=kernel, predicted_config=config_label(kernel or "", cfg) if cfg is not None else None,
            predicted_bandwidth=rec.extra["decode"]["total"] / t)
    if err:
        rec.prediction_error = err


def _record(row: AlgoRow, run, cache: dict) -> ResultRow:
    rec = new_record(row, "fwd")   # a decode is an attention forward over a cache
    rec.extra["decode"] = _layout(row.kernel, row.shape)
    if row.kernel != DECODE_FLOOR:   # the model's time is a decode's, not the floor's
        _predict(rec, run, cache)
    return rec


def bandwidth_fields(rec: ResultRow, roof: float | None, floor_ms: float | None = None) -> None:
    """A timed row's effective bandwidth (the bytes it must move over its measured time), that as a
    fraction of the read roof measured in the same run, and the group's read floor over its time (1: as
    fast as reading the cache alone)."""
    dec = rec.extra["decode"]
    dec["effective_bandwidth"] = dec["total"] / (rec.measured_ms / 1e3)
    dec["read_roof_fraction"] = dec["effective_bandwidth"] / roof if roof else None
    dec["read_floor_fraction"] = floor_ms / rec.measured_ms if floor_ms else None


def _progress(i: int, n: int, rec: ResultRow, elapsed_s: float) -> str:
    dec = rec.extra["decode"]
    cfg = f" {rec.config_label}" if rec.config else ""
    layout = f" paged{dec['page_size']}" if dec.get("page_size") else ""
    if rec.ok:
        frac = dec.get("read_roof_fraction")
        rate = f"{dec['effective_bandwidth'] / 1e12:.2f} TB/s"
        body = (f"{rate} ({frac:.0%} of read roof)" if frac is not None else rate) + f", {rec.measured_ms * 1e3:.1f} us"
    else:
        body = f"FAILED ({rec.error or '?'})"
    pred = f" (pred {rec.predicted_ms * 1e3:.1f} us)" if rec.predicted_ms else " (pred -)"
    return f"[{i}/{n}] {rec.kernel}{cfg} {shape_label(rec.shape)}{layout}: {body}{pred}  [{elapsed_s:.0f}s]"


# --------------------------------------------------------------------------- the phase

def _roof(run, impl) -> float | None:
    """Measure the read roof once, before the first group; recorded (or its error) as ``read_roof``."""
    try:
        roof = dict(impl.read_roof(run.opts.quick))
        run.log(f"  read roof: {roof['bandwidth'] / 1e12:.2f} TB/s ({roof.get('source', '')})")
    except Exception as exc:  # noqa: BLE001 - the rows are timed all the same, without a fraction
        roof = {"bandwidth": None, "error": short_error(exc)}
        recover(run.env)
        run.log(f"  read roof failed: {roof['error']}")
    run.results["read_roof"] = roof
    run.save()
    return roof["bandwidth"]


class _DecodePhase:
    """The decode rows' part in ``validation.groups.run_groups``: a group is a shape, whatever its cache
    layout; the read roof is measured before the first group."""

    algo, extra = DECODE, "decode"
    progress = staticmethod(_progress)

    def __init__(self, run):
        self.run, self.cache, self.roof = run, {}, None

    def device(self):
        impl = self.run.env.decode()
        self.roof = None if self.run.out_of_time() else _roof(self.run, impl)
        return impl

    def record(self, row: AlgoRow) -> ResultRow:
        return _record(row, self.run, self.cache)

    def group_key(self, row: AlgoRow):
        return shape_key(base_shape(row.shape))

    def make_inputs(self, impl, rows: list[AlgoRow], seed: int) -> list:
        """One cache and the pools of every page size and the peers' dense copies the group's rows need."""
        shape = base_shape(rows[0].shape)
        pages = sorted({row.shape["page_size"] for row in rows if row.shape.get("page_size")})
        peers = any(row.kernel in DECODE_PEERS for row in rows)   # (the floor reads the contiguous caches)
        n_sets = input_sets(shape, self.run.opts.input_sets, float(getattr(self.run.spec, "l2_bytes", 0) or 0))
        return impl.make_inputs(shape, pages, peers, n_sets, seed)

    def runner(self, impl, row: AlgoRow):
        return impl.runner(row.kernel, row.config, row.shape.get("page_size"))

    def timed(self, recs: list[ResultRow]) -> None:
        floor = next((r.measured_ms for r in recs if r.kernel == DECODE_FLOOR and r.ok), None)
        for rec in recs:
            if rec.ok:
                bandwidth_fields(rec, self.roof, floor)


def run_decode(run, rows: list[AlgoRow], first: int, seed: int) -> None:
    """Every decode row, numbered from ``first``, group by group (a group's rows are adjacent, as
    ``decode_rows`` plans them).  Never raises for a row."""
    run_groups(run, _DecodePhase(run), rows, first, seed)


# --------------------------------------------------------------------------- the table at the end

def _cells(r: dict) -> list[str]:
    s, dec = r["shape"], r.get("decode") or {}
    cache = f"paged{s['page_size']}" if s.get("page_size") else dec.get("cache", "-")
    head = [f"B{s['B']} Nk{s['N_k']} H{s['H']}:{s['H_kv']} Nq{s['N_q']}", r["kernel"], cache,
            f"{decode_bytes(s)['kv_read'] / 2**20:.0f}"]
    if not r.get("ok"):
        return head + ["-", "-", "-", "-", "-", (r.get("error") or "not ok")[:60]]
    frac, floor = dec.get("read_roof_fraction"), dec.get("read_floor_fraction")
    pred = f"{r['predicted_ms'] * 1e3:.1f}" if r.get("predicted_ms") else "-"
    return head + [f"{r['measured_ms'] * 1e3:.1f}", f"{dec.get('effective_bandwidth', 0) / 1e12:.2f}",
                   f"{frac:.0%}" if frac is not None else "-", f"{floor:.0%}" if floor is not None else "-", pred,
                   r.get("config_label") or ""]


def decode_table(results: dict[str, Any]) -> str | None:
    """The decode rows of a run as a short table (None without any): per row the shape, kernel, cache,
    K+V MiB, measured us, effective TB/s, fraction of the read roof, the read floor's time over the
    row's, predicted us."""
    rows = [r.as_dict() if isinstance(r, ResultRow) else r for r in results.get("rows", [])]
    rows = [r for r in rows if r.get("kernel") in (*DECODE_KERNELS, *DECODE_PEERS, DECODE_FLOOR)]
    if not rows:
        return None
    roof = results.get("read_roof") or {}
    head = (f"read roof {roof['bandwidth'] / 1e12:.2f} TB/s ({roof.get('source', '')})" if roof.get("bandwidth")
            else f"no read roof ({roof.get('error', 'not measured')})")
    cols = ["shape", "kernel", "cache", "KV MiB", "us", "TB/s", "roof", "floor", "pred us", "config / error"]
    table = [cols] + [_cells(r) for r in rows]
    widths = [max(len(line[c]) for line in table) for c in range(len(cols) - 1)]
    lines = [f"Decode rows ({head}):"]
    for line in table:
        lines.append("  " + "  ".join(c.rjust(w) if 3 <= k <= 8 else c.ljust(w)
                                      for k, (c, w) in enumerate(zip(line, widths))) + "  " + line[-1])
    return "\n".join(lines)
