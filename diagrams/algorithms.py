"""More algorithms written with the diagram API, each returned fully relabeled (one kernel's loop nest,
or a program of kernels). Sizes and tiles are symbols unless given; `unit_threads` is 32 for warps and
128 for warpgroups. `diagrams.library` re-exports every public function here.
"""
from __future__ import annotations

from .core import Array, Contraction, DiagramError, Map, Op, Reduce, axis, product, size_expr
from .diagram import Diagram, Program
from .numeric import EXP_SUB, GELU, LOG_ADD, SQUARE, SUB

GELU_COSTS = (("fp32", 8), ("exp", 1))  # tanh form: the cubic, the scale, tanh from one exp, 0.5 x (1 + t)


def _kernel(name: str, ops: tuple[Op, ...], outputs: tuple[str, ...], blocks, streams, stages, units,
            unit_threads, staged) -> Diagram:
    """Relabel one kernel: `blocks` (axis, tile) over thread blocks, `streams` (axis, chunk or None) through
    SMEM in order (outer first), `units` (axis, tile) over warps or warpgroups, `staged` inputs in SMEM."""
    d = Diagram(name, ops, outputs)
    for a, tile in blocks:
        d = d.group(a, tile)
    for a, chunk in streams:
        if chunk is not None:
            d = d.stream(a, chunk, "smem", stages=stages)
    for a, tile in units:
        d = d.group(a, tile, "reg", unit_threads=unit_threads)
    for x in staged:
        d = d.stage(x, "smem")
    return d


def _per(tile, parts):
    return size_expr(tile) / size_expr(parts)


def chained_matmul(block_m="Bm", chunk_n="Bn", chunk_k="Bk", warps="w", stages=2, unit_threads=32, dtype="bf16",
                   m="M", k="K", n="N", p="P") -> Diagram:
    """E[m, p] = sum_n (sum_k A[m, k] B[k, n]) C[n, p], fused: blocks own `block_m` rows of E (all of p);
    n streams in chunks of `chunk_n`, and inside each n chunk k streams in chunks of `chunk_k` (nested
    streams); the intermediate D = A.B stays in registers (fp32 accumulator, `dtype` operand of the second
    product). Rows split over `warps` units."""
    M, K, N, P = axis("m", m), axis("k", k), axis("n", n), axis("p", p)
    A, B, C = Array("A", (M, K), dtype), Array("B", (K, N), dtype), Array("C", (N, P), dtype)
    D, E = Array("D", (M, N), dtype), Array("E", (M, P), dtype)
    ops = (Contraction("D=A.B", (A, B), D), Contraction("E=D.C", (D, C), E))
    return _kernel("chained-matmul", ops, ("E",), [("m", block_m)], [("n", chunk_n), ("k", chunk_k)], stages,
                   [("m", _per(block_m, warps))], unit_threads, ("A", "B", "C"))


def _mlp_arrays(tokens, model, hidden, dtype):
    t, d, f, e = axis("t", tokens), axis("d", model), axis("f", hidden), axis("e", model)
    X, W1, W2 = Array("X", (t, d), dtype), Array("W1", (d, f), dtype), Array("W2", (f, e), dtype)
    H, G, Y = Array("H", (t, f), "fp32"), Array("G", (t, f), dtype), Array("Y", (t, e), dtype)
    return (Contraction("H=X.W1", (X, W1), H), Map("gelu", (H,), G, costs=GELU_COSTS, formula="gelu", **GELU),
            Contraction("Y=G.W2", (G, W2), Y))


def mlp(fused=True, block_t="Bt", chunk_f="Bf", chunk_d="Bd", warps="w", warps_c=None, stages=2, unit_threads=32,
        dtype="bf16", tokens="T", model="D", hidden="F") -> Diagram | Program:
    """Y[t, e] = sum_f gelu(sum_d X[t, d] W1[d, f]) W2[f, e], the output axis e of size `model` (D).

    fused: one kernel; blocks own `block_t` tokens (all of e), f streams in chunks of `chunk_f` and, inside,
    d in chunks of `chunk_d` (nested streams): H = X.W1 for one f chunk, its GeLU, then Y += G.W2; the
    tokens split over `warps` units. Unfused: a program of two tiled matmuls through global memory, the
    GeLU in the first one's epilogue (tiles `block_t` x `chunk_f`, d streamed by `chunk_d`; then
    `block_t` x `chunk_d`, f streamed by `chunk_f`), `warps_c` of the warps along the columns."""
    up, gelu, down = _mlp_arrays(tokens, model, hidden, dtype)
    if fused:
        if warps_c is not None:
            raise DiagramError("mlp: warps_c splits the columns of the unfused kernels; the fused one splits tokens")
        return _kernel("fused-mlp", (up, gelu, down), ("Y",), [("t", block_t)], [("f", chunk_f), ("d", chunk_d)],
                       stages, [("t", _per(block_t, warps))], unit_threads, ("X", "W1", "W2"))

    def units(cols, tile_c):
        rows = size_expr(warps) / (1 if warps_c is None else size_expr(warps_c))
        grid = [("t", _per(block_t, rows))]
        return grid + ([(cols, _per(tile_c, warps_c))] if warps_c is not None else [])

    first = _kernel("mlp-up", (up, gelu), ("G",), [("t", block_t), ("f", chunk_f)], [("d", chunk_d)], stages,
                    units("f", chunk_f), unit_threads, ("X", "W1"))
    second = _kernel("mlp-down", (down,), ("Y",), [("t", block_t), ("e", chunk_d)], [("f", chunk_f)], stages,
                     units("e", chunk_d), unit_threads, ("G", "W2"))
    return Program("mlp", (first, second))


def rmsnorm_then_matmul(tokens="T", model="D", out="N", dtype="bf16") -> Diagram:
    """Y[t, n] = sum_d (X[t, d] * g[d] * r[t]) W[d, n] with r[t] = 1/sqrt(mean_d X[t, d]^2 + eps), plain
    (not relabeled). d cannot stream as drawn: r needs all of d before the first product."""
    t, d, n = axis("t", tokens), axis("d", model), axis("n", out)
    X, g, W = Array("X", (t, d), dtype), Array("g", (d,), dtype), Array("W", (d, n), dtype)
    sq, ms, r = Array("X2", (t, d), "fp32"), Array("ms", (t,), "fp32"), Array("r", (t,), "fp32")
    Xn, Y = Array("Xn", (t, d), dtype), Array("Y", (t, n), dtype)
    ops = (Map("square", (X,), sq, formula="x*x", **SQUARE),
           Reduce("sum_d", (sq,), ms, axis_name="d", combine="sum"),
           Map("rsqrt", (ms,), r, costs=(("fp32", 2), ("exp", 1)), formula="rsqrt(ms/D + eps)"),
           product("normalize", (X, g, r), Xn),
           Contraction("Y=Xn.W", (Xn, W), Y))
    return Diagram("rmsnorm-matmul", ops, ("Y",))


def rmsnorm_matmul(block_t="Bt", block_n="Bn", chunk_d="Bd", warps="w", warps_c=None, stages=2, unit_threads=32,
                   dtype="bf16", tokens="T", model="D", out="N") -> Diagram:
    """RMSNorm then matmul in one kernel: `rmsnorm_then_matmul` with the 1/rms factor moved past the
    contraction (`defer_scales`), so d streams: blocks own `block_t` x `block_n` of Y, d streams in chunks
    of `chunk_d` with the sum of squares reduced alongside, and 1/rms scales the accumulator once at the
    end. `warps` units split the rows (`warps_c` of them along the columns: a 2-D grid)."""
    d = rmsnorm_then_matmul(tokens, model, out, dtype).defer_scales()
    rows = size_expr(warps) / (1 if warps_c is None else size_expr(warps_c))
    units = [("t", _per(block_t, rows))] + ([("n", _per(block_n, warps_c))] if warps_c is not None else [])
    return _kernel("rmsnorm-matmul", d.ops, d.outputs, [("t", block_t), ("n", block_n)], [("d", chunk_d)], stages,
                   units, unit_threads, ("X", "g", "W"))


def logsumexp_ops(x: Array, over: str, out_name: str) -> tuple[Op, ...]:
    """Primitives of log(sum over `over` of exp(x)), numerically safe, tagged `logsumexp:<out_name>`."""
    tag = f"logsumexp:{out_name}"
    rows = tuple(a for a in x.axes if a.name != over)
    mx, ex = Array(f"{out_name}_rowmax", rows, "fp32"), Array(f"{out_name}_exp", x.axes, "fp32")
    sm, out = Array(f"{out_name}_rowsum", rows, "fp32"), Array(out_name, rows, "fp32")
    return (Reduce(f"max_{over}", (x,), mx, tag=tag, axis_name=over, combine="max"),
            Map("exp", (x, mx), ex, tag=tag, costs=(("fp32", 1), ("exp", 1)), formula="exp(x - max)", **EXP_SUB),
            Reduce(f"sum_{over}", (ex,), sm, tag=tag, axis_name=over, combine="sum"),
            Map("log", (sm, mx), out, tag=tag, costs=(("fp32", 1), ("exp", 1)), formula="log(sum) + max", **LOG_ADD))


def cross_entropy_loss(tokens="T", model="D", vocab="V", dtype="bf16") -> Diagram:
    """The loss kernel's plain diagram: loss[t] = logsumexp_v(sum_d H[t, d] W[d, v]) - target[t]."""
    t, d, v = axis("t", tokens), axis("d", model), axis("v", vocab)
    H, W = Array("H", (t, d), dtype), Array("W", (d, v), dtype)
    logits, target, loss = Array("logits", (t, v), "fp32"), Array("target", (t,), "fp32"), Array("loss", (t,), "fp32")
    ops = ((Contraction("logits=H.W", (H, W), logits),) + logsumexp_ops(logits, "v", "lse")
           + (Map("loss", (Array("lse", (t,), "fp32"), target), loss, formula="lse - target", **SUB),))
    return Diagram("cross-entropy", ops, ("loss",))


def cross_entropy(block_t="Bt", chunk_v="Bv", chunk_d="Bd", warps="w", stages=2, unit_threads=32, dtype="bf16",
                  tokens="T", model="D", vocab="V") -> Program:
    """Cross-entropy over a streamed vocabulary, no probabilities written: loss[t] = logsumexp_v(logits[t, v])
    - logits[t, target_t] with logits = H.W (contracted over d).

    The target logit is modelled generally as its own contraction: an input Wt[t, d] holds the gathered
    target column W[:, target_t] of each token, and target[t] = sum_d H[t, d] Wt[t, d] (a first kernel,
    blocks of `block_t` tokens, as Cut Cross-Entropy's indexed matmul). The loss kernel runs the
    log-sum-exp online (`online_logsumexp`): blocks of `block_t` tokens, v streamed in chunks of
    `chunk_v` and, inside, d in chunks of `chunk_d` (None: d whole, H loaded once per block); the tokens
    split over `warps` units."""
    t, d = axis("t", tokens), axis("d", model)
    H, Wt = Array("H", (t, d), dtype), Array("Wt", (t, d), dtype)
    target = Diagram("target-logit", (Contraction("target=H.Wt", (H, Wt), Array("target", (t,), "fp32")),),
                     ("target",)).group("t", block_t)
    lse = cross_entropy_loss(tokens, model, vocab, dtype).online_logsumexp()
    loss = _kernel("cross-entropy", lse.ops, lse.outputs, [("t", block_t)], [("v", chunk_v), ("d", chunk_d)], stages,
                   [("t", _per(block_t, warps))], unit_threads, ("H", "W"))
    return Program("cross-entropy", (target, loss))


def split_k_matmul(parts="sp", tile_a="Ba", tile_c="Bc", chunk_b="Bk", stages=1, warps="w", warps_c="wc",
                   unit_threads=32, dtype="bf16", a="M", b="K", c="N") -> Program:
    """C = A.B with the contraction split over `parts` blocks (split-K): each block owns a
    `tile_a` x `tile_c` output tile and one part of K, streamed in chunks of `chunk_b`, and writes an
    fp32 partial tile; a combine kernel sums the parts. For outputs with too few tiles to fill the GPU
    (K much larger than M and N). Units form a grid of warps / warps_c rows by warps_c columns."""
    from .library import matmul

    d = matmul(a, b, c, dtype).group("a", tile_a).group("c", tile_c)
    rows = size_expr(warps) / size_expr(warps_c)
    d = d.group("a", size_expr(tile_a) / rows, "reg", unit_threads=unit_threads)
    d = d.group("c", size_expr(tile_c) / size_expr(warps_c), "reg", unit_threads=unit_threads)
    d = d.stage("A", "smem").stage("B", "smem")
    prog = d._replace(name="split-k-matmul").split("b", parts, chunk_b, stages)
    return Program("split-k-matmul", prog.kernels)


def cross_entropy_split(parts="sp", block_t="Bt", chunk_v="Bv", chunk_d="Bd", warps="w", stages=2, unit_threads=32,
                        dtype="bf16", tokens="T", model="D", vocab="V") -> Program:
    """Cross-entropy with the vocabulary split over `parts` blocks (as `cross_entropy`, plus a split of v):
    each block folds the log-sum-exp of its part of the vocabulary for `block_t` tokens and writes it; a
    combine kernel merges the parts' LSEs and subtracts the target logit. More blocks for few tokens,
    each reading 1/parts of W."""
    t, d = axis("t", tokens), axis("d", model)
    H, Wt = Array("H", (t, d), dtype), Array("Wt", (t, d), dtype)
    target = Diagram("target-logit", (Contraction("target=H.Wt", (H, Wt), Array("target", (t,), "fp32")),),
                     ("target",)).group("t", block_t)
    lse = cross_entropy_loss(tokens, model, vocab, dtype).online_logsumexp()
    lse = lse.group("t", block_t).group("t", _per(block_t, warps), "reg", unit_threads=unit_threads)
    lse = lse.stage("H", "smem").stage("W", "smem")
    partial, combine = lse._replace(name="cross-entropy").split("v", parts, chunk_v, stages).kernels
    partial = partial.stream("d", chunk_d, "smem", stages=stages)
    return Program("cross-entropy-split", (target, partial, combine))
