"""Algorithms written with the diagram API, and their standard relabelings.

FlashAttention is not written here by hand: `flash_attention` takes plain
`attention` and relabels it (group batch, heads and query rows over thread
blocks; online-softmax rewrite; stream keys; split query rows over warps).
"""
from __future__ import annotations

import dataclasses

import sympy as sp

from .core import Array, Contraction, DiagramError, Map, Reduce, axis, size_expr
from .numeric import DIV, EXP_SUB, TANH
from .diagram import Diagram, Program


def matmul(a="a", b="b", c="c", dtype="bf16", out_dtype=None) -> Diagram:
    """C[a, c] = sum_b A[a, b] B[b, c]."""
    A_, B_, C_ = axis("a", a), axis("b", b), axis("c", c)
    A = Array("A", (A_, B_), dtype)
    B = Array("B", (B_, C_), dtype)
    C = Array("C", (A_, C_), out_dtype or dtype)
    return Diagram("matmul", (Contraction("C=A.B", (A, B), C),), ("C",))


def softmax_ops(scores: Array, over: str, out_name: str, out_dtype: str, scale: bool = True):
    """Primitives of a numerically safe softmax of `scores` over axis `over` (tagged as one composite)."""
    tag = f"softmax:{out_name}"
    rows = tuple(a for a in scores.axes if a.name != over)
    mx = Array(f"{out_name}_max", rows, "fp32")
    ex = Array(f"{out_name}_exp", scores.axes, "fp32")
    sm = Array(f"{out_name}_sum", rows, "fp32")
    pr = Array(out_name, scores.axes, out_dtype)
    return (
        Reduce(f"max_{over}", (scores,), mx, tag=tag, axis_name=over, combine="max"),
        # exp2((s - max) * scale*log2e): one FMA and one ex2 per score
        Map("exp", (scores, mx), ex, tag=tag, costs=(("fp32", 1), ("exp", 1)),
            formula="exp(scale*(s - max))" if scale else "exp(s - max)", **EXP_SUB),
        Reduce(f"sum_{over}", (ex,), sm, tag=tag, axis_name=over, combine="sum"),
        Map("normalize", (ex, sm), pr, tag=tag, costs=(("fp32", 1),), formula="e / sum", **DIV),
    )


def softmax(rows="n", cols="m", dtype="bf16") -> Diagram:
    """P[n, m] = softmax over m of S[n, m] (S in fp32)."""
    n, m = axis("n", rows), axis("m", cols)
    S = Array("S", (n, m), "fp32")
    ops = softmax_ops(S, "m", "P", dtype, scale=False)
    return Diagram("softmax", ops, ("P",))


def streamed_softmax(d: Diagram, rows_per_block, chunk=128, row="n", col="m") -> Diagram:
    """A softmax kernel as it runs: two passes over each row (online max and sum, then normalize), blocks of
    `rows_per_block` rows (and one of each other axis), a warp per row, `chunk` columns a step."""
    d = d.online_softmax()
    for a in d.axes():
        if a not in (row, col):
            d = d.group(a, 1)
    return d.group(row, rows_per_block).group(row, 1, "reg").stream(col, chunk, "reg")


def _attention_axes(batch, heads, seqlen, kv_seqlen, head_dim, kv_heads):
    b, n, m, d = axis("b", batch), axis("n", seqlen), axis("m", kv_seqlen), axis("d", head_dim)
    if kv_heads is None:
        h = axis("h", heads)
        return b, (h,), (h,), n, m, d
    hk = axis("hk", kv_heads)
    hq, hkv = sp.sympify(size_expr(heads)), sp.sympify(size_expr(kv_heads))
    if hq.is_number and hkv.is_number:
        if hq % hkv:
            raise DiagramError(f"heads ({hq}) must be a multiple of kv_heads ({hkv})")
        g = axis("g", hq // hkv)
    else:
        g = axis("g")  # query heads per KV head; H = hk * g
    return b, (hk, g), (hk,), n, m, d


def attention(batch="B", heads="H", seqlen="N", kv_seqlen="M", head_dim="d", dtype="bf16",
              kv_heads=None) -> Diagram:
    """O = softmax(scale * Q K^T) V. With `kv_heads`, query heads split as (hk, g) and K, V carry hk only
    (grouped-query attention; kv_heads=1 is multi-query)."""
    b, qh, kvh, n, m, d = _attention_axes(batch, heads, seqlen, kv_seqlen, head_dim, kv_heads)
    Q = Array("Q", (b, *qh, n, d), dtype)
    K = Array("K", (b, *kvh, m, d), dtype)
    V = Array("V", (b, *kvh, m, d), dtype)
    S = Array("S", (b, *qh, n, m), "fp32")
    O = Array("O", (b, *qh, n, d), dtype)
    P = Array("P", (b, *qh, n, m), dtype)
    ops = (Contraction("S=Q.K", (Q, K), S),) + softmax_ops(S, "m", "P", dtype) + (Contraction("O=P.V", (P, V), O),)
    name = "attention" if kv_heads is None else "gqa-attention"
    return Diagram(name, ops, ("O",))


def flash_attention(block_m="Br", block_n="Bc", warps="w", stages=2, causal=False, share_kv_heads=False,
                    unit_threads=32, skip_per_unit=False, smem_row_align=None, stale_max=0.0, **shape) -> Diagram:
    """FlashAttention forward, derived from `attention` by relabeling.

    group b, heads, query rows (tile `block_m`) over thread blocks; online-softmax rewrite;
    stream keys in chunks of `block_n` with `stages` buffers in SMEM; split the block's query
    rows over `warps` units at the register level. With GQA, `share_kv_heads` puts all query
    heads of a KV group in one block (the g axis grouped whole) so K and V are loaded once per group.
    With `causal` and `skip_per_unit`, each unit computes only the key chunks its own rows see.
    `smem_row_align`: Q, K and V tiles hold their rows padded to a multiple of that many elements (whole
    swizzle groups: a head dim of 96 in rows of 128).  `stale_max`: the online softmax's rows keep a stale max
    within 2^stale_max of their scores (`Diagram.online_softmax`).
    """
    att = attention(**shape)
    blk_m, blk_n = size_expr(block_m), size_expr(block_n)
    d = att.group("b", 1)
    if "h" in att.axes():
        d = d.group("h", 1)
    else:
        d = d.group("hk", 1)
        g = att.axes()["g"]
        d = d.group("g", g if share_kv_heads else 1)
    d = d.group("n", blk_m)
    d = d.online_softmax(stale_max=stale_max)
    d = d.stream("m", blk_n, "smem", stages=stages)
    d = d.group("n", blk_m / size_expr(warps), "reg", unit_threads=unit_threads)
    if causal:
        axes = d.axes()
        d = d.mask("n", "m", axes["m"] - axes["n"], per_unit=skip_per_unit)
    for x in ("Q", "K", "V"):
        d = d.stage(x, "smem", row_align=smem_row_align)
    return d._replace(name=("causal-" if causal else "") + "flash-attention" + ("-gqa" if "g" in att.axes() else ""))


def tiled_matmul(tile_a="ta", tile_c="tc", chunk_b="kb", stages=1, warps=None, warps_c=None, unit_threads=32,
                 raster=None, **sizes) -> Diagram:
    """Matmul with output tiles over blocks and the contraction streamed through fast memory.
    With `warps` (units of `unit_threads` threads), the block's output tile is split over them at the
    register level: `warps_c` of them along the columns (a 2-D grid of warps / warps_c rows by warps_c
    columns), all along the rows when `warps_c` is None. Without `warps` the accumulator stays in SMEM
    (the single-level model)."""
    d = matmul(**sizes).group("a", tile_a).group("c", tile_c).stream("b", chunk_b, "smem", stages=stages)
    d = d.stage("A", "smem").stage("B", "smem")
    if raster is not None:  # blocks in groups of `raster` row tiles (grouped rasterization)
        d = d.raster("a", raster)
    if warps is None:
        if warps_c is not None:
            raise DiagramError("tiled_matmul: warps_c splits the warps' columns; give warps too")
        return d.stage("C", "smem")
    rows = size_expr(warps) / (1 if warps_c is None else size_expr(warps_c))
    d = d.group("a", size_expr(tile_a) / rows, "reg", unit_threads=unit_threads)
    if warps_c is not None:
        d = d.group("c", size_expr(tile_c) / size_expr(warps_c), "reg", unit_threads=unit_threads)
    return d


def unfused_attention(block_m="bm", block_n="bn", block_k="bk", warps_m=2, warps_n=2, stages=2, rows_per_block=4,
                      batch="B", heads="H", seqlen="N", kv_seqlen="M", head_dim="d", dtype="bf16",
                      softmax_chunk=128) -> Program:
    """Three kernels through global memory: S = Q K^T (fp32), P = softmax(S), O = P V.
    The matmul kernels split their output tile over warps_m x warps_n warps."""
    att = attention(batch, heads, seqlen, kv_seqlen, head_dim, dtype)
    ops = {op.name: op for op in att.ops}
    bm, bn, bk = size_expr(block_m), size_expr(block_n), size_expr(block_k)
    rows_warp = bm / size_expr(warps_m)
    cols_warp = bn / size_expr(warps_n)

    scores = Diagram("scores", (ops["S=Q.K"],), ("S",))
    scores = (scores.group("b", 1).group("h", 1).group("n", bm).group("m", bn)
              .stream("d", bk, "smem", stages).group("n", rows_warp, "reg").group("m", cols_warp, "reg")
              .stage("Q", "smem").stage("K", "smem"))

    sm_ops = tuple(op for op in att.ops if op.tag.startswith("softmax:"))
    soft = streamed_softmax(Diagram("softmax", sm_ops, ("P",)), rows_per_block, softmax_chunk)

    out = Diagram("output", (ops["O=P.V"],), ("O",))
    out = (out.group("b", 1).group("h", 1).group("n", bm).group("d", bn)
           .stream("m", bk, "smem", stages).group("n", rows_warp, "reg").group("d", cols_warp, "reg")
           .stage("P", "smem").stage("V", "smem"))
    return Program("unfused-attention", (scores, soft, out))


def window_band(d: Diagram, left: bool, right: bool, left_size="Wl", right_size="Wr",
                per_unit: bool = False) -> Diagram:
    """FlashAttention's window_size on an attention diagram's (n, m): query n sees keys n + M - N - Wl ..
    n + M - N + Wr (bottom-right; an absent side unbounded).  The key stream visits only the chunks in
    the band (a causal window is right = 0); with `per_unit` each register-level unit computes only the
    chunks of its own rows' band."""
    if not (left or right):
        raise DiagramError("window_band: a window needs a left or a right bound")
    axes = d.axes()
    diag = axes["m"] - axes["n"]
    lower = diag - size_expr(left_size) if left else None
    upper = diag + size_expr(right_size) if right else None
    return d.band("n", "m", lower=lower, upper=upper, per_unit=per_unit)._replace(name=d.name + "-window")


#: Per-score work of the score modifiers (``score_mods``), as the kernels run them: softcap multiplies the
#: raw score by scale / cap (one FMUL) and takes tanh (one MUFU op, the exponential's unit); ALiBi adds the
#: head's slope times the row's distance to the key, from a float distance per row and a constant per
#: column (one FADD, one FFMA with |.| as a source modifier).
SOFTCAP_COSTS = (("fp32", 1), ("exp", 1))
ALIBI_COSTS = (("fp32", 2),)
SCORE_MODS = ("softcap", "alibi")


def score_mods(d: Diagram, mods, scores: str = "S") -> Diagram:
    """The attention diagram `d` (plain or relabeled) with score modifiers applied to its scores array
    `scores` before the softmax, in FlashAttention's order: ``softcap`` (s -> cap * tanh(s / cap)) then
    ``alibi`` (s -> s - slope[h] * |n + M - N - m|, the slope per query head read from global memory).
    Each is an elementwise map on the scores' axes, so every relabeling of the diagram (tiles, streams,
    masks, bands) carries it: its work is counted where the scores are, chunk by chunk."""
    mods = tuple(mods)
    unknown = [m for m in mods if m not in SCORE_MODS]
    if unknown or len(set(mods)) != len(mods):
        raise DiagramError(f"score_mods: {mods!r}: each of {SCORE_MODS} at most once")
    producer = d.producer(scores)
    if producer is None:
        raise DiagramError(f"score_mods: {d.name} computes no scores array {scores!r}")
    raw = d.arrays()[scores]
    cur = dataclasses.replace(raw, name=f"{scores}_raw")   # what the producer writes now
    renamed = dataclasses.replace(producer, output=cur)
    ops = []
    for i, mod in enumerate(m for m in SCORE_MODS if m in mods):
        out = Array(scores if i == len(mods) - 1 else f"{scores}_{mod}", raw.axes, raw.dtype)
        if mod == "softcap":
            ops.append(Map("softcap", (cur,), out, costs=SOFTCAP_COSTS, formula="cap * tanh(s / cap)",
                           in_place=True, **TANH))
        else:
            heads = tuple(a for a in raw.axes if a.name in ("h", "hk", "g"))
            slopes = Array("alibi_slopes", heads, "fp32")
            ops.append(Map("alibi", (cur, slopes), out, costs=ALIBI_COSTS,
                           formula="s - slope[h] * |n + M - N - m|", in_place=True))
        cur = out
    new_ops = []
    for op in d.ops:
        new_ops.append(renamed if op is producer else op)
        if op is producer:
            new_ops.extend(ops)
    return d._replace(ops=tuple(new_ops), name=d.name + "".join(f"-{m}" for m in SCORE_MODS if m in mods))


def sliding_window_attention(window="W", block_m="Br", block_n="Bc", warps="w", stages=2, unit_threads=32,
                             skip_per_unit=False, **shape) -> Diagram:
    """FlashAttention with a causal sliding window: query i sees keys i - W + 1 .. i (with N_k = N_q; in
    general the causal band shifted by N_k - N_q). The causal mask and the window's lower bound are two
    masks on (n, m); they compose into one band, and the key stream visits only the chunks in it."""
    d = flash_attention(block_m, block_n, warps, stages, causal=True, unit_threads=unit_threads,
                        skip_per_unit=skip_per_unit, **shape)
    axes = d.axes()
    d = d.band("n", "m", lower=axes["m"] - axes["n"] - size_expr(window) + 1, per_unit=skip_per_unit)
    return d._replace(name="sliding-window-attention")


def attention_split_kv(parts="sp", block_n="Bc", stages=2, unit_threads=32, heads="H", kv_heads="Hk", batch="B",
                       seqlen="N", kv_seqlen="M", head_dim="d", dtype="bf16") -> Program:
    """Decode attention split over the keys (flash-decoding): a block per (batch, KV head, part of the keys)
    holds all g query heads of its KV head and all N query rows, so K and V are read once; it streams its
    part in chunks of `block_n` and writes an fp32 partial output and LSE per row; a combine kernel merges the
    parts by LSE. One register-level unit (a warp: `unit_threads`) per query head of the group."""
    att = attention(batch, heads, seqlen, kv_seqlen, head_dim, dtype, kv_heads=kv_heads)
    axes = att.axes()
    d = att.group("b", 1).group("hk", 1).group("g", axes["g"]).group("n", axes["n"]).online_softmax()
    d = d.group("g", 1, "reg", unit_threads=unit_threads)
    for x in ("Q", "K", "V"):
        d = d.stage(x, "smem")
    prog = d._replace(name="attention-split-kv").split("m", parts, block_n, stages)
    return Program("attention-split-kv", prog.kernels)


def flash_decode(parts="sp", block_n="Bc", warps="w", stages=2, rows="R", combine_rows=4, unit_threads=32,
                 heads="H", kv_heads="Hk", batch="B", seqlen="N", kv_seqlen="M", head_dim="d",
                 dtype="bf16") -> Program:
    """Decode attention as a split-KV kernel with warps over the keys runs it (`attention_split_kv`'s
    algorithm, relabeled for a few query rows): the g query heads of a KV head and the N query rows are
    fused into g N rows, in blocks of `rows` (an m16 tile or two), so one read of K and V serves them all;
    a thread block owns (batch, KV head, row block, part of the keys) and streams its part in chunks of
    `block_n` through `stages` SMEM slots; its `warps` split every chunk's keys, each with its own online
    softmax, merged by LSE through SMEM after the stream (`split_units`). Then each part's fp32 O and LSE
    go to a combine kernel (one warp an output row, `combine_rows` rows a block), which does not run for
    a single part: that part writes O and the LSE itself (`split(direct_when_one=True)`)."""
    att = attention(batch, heads, seqlen, kv_seqlen, head_dim, dtype, kv_heads=kv_heads).fuse(("g", "n"), "r")
    d = att.group("b", 1).group("hk", 1).group("r", rows).online_softmax(lse=True)
    for x in ("Q", "K", "V"):
        d = d.stage(x, "smem")
    partial, combine = d._replace(name="flash-decode").split("m", parts, block_n, stages, direct_when_one=True).kernels
    partial = partial.split_units("m", warps, unit_threads)
    combine = combine._replace(partitions=()).group("b", 1).group("hk", 1).group("r", combine_rows)
    return Program("flash-decode", (partial, combine.group("r", 1, "reg", unit_threads)))


# more algorithms (their own module keeps this one short); imported last: they build on the primitives above
from .algorithms import (chained_matmul, cross_entropy, mlp, rmsnorm_matmul,  # noqa: E402,F401
                         cross_entropy_split, rmsnorm_then_matmul, split_k_matmul)
from .backward import attention_backward, attention_backward_deterministic  # noqa: E402,F401
