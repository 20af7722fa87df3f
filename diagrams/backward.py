"""Attention's backward pass as loop nests (issue 15): FlashAttention-2's, whose dQ is added into global
memory with atomics, and the deterministic one, whose dQ has a kernel of its own. Both start with the
preprocessing kernel D = rowsum(dO * O) (O saved by the forward, with the LSE of every row), take grouped-
query attention (`kv_heads`: K, V, dK and dV carry the KV heads only, dK and dV sum over the g query heads
of a group) and the bottom-right causal mask (`causal`: key m is seen by query n when m <= n + M - N).
`diagrams.library` re-exports both.
"""
from __future__ import annotations

from .algorithms import _kernel, _per
from .core import Array, Contraction, DiagramError, Map, Reduce, product
from .diagram import Diagram, Program
from .numeric import EXP_SUB, IDENTITY, SOFTMAX_GRAD, ZERO

STAGED = ("Q", "dO", "LSE", "Dvec", "K", "V")


def _axes(batch, heads, seqlen, kv_seqlen, head_dim, kv_heads, causal):
    """(b, query-head axes, KV-head axes, n, m, d) as `attention` draws them."""
    if not isinstance(causal, bool):
        raise DiagramError(f"attention backward: causal must be True or False, got {causal!r}")
    from .library import _attention_axes   # library imports this module at its end
    return _attention_axes(batch, heads, seqlen, kv_seqlen, head_dim, kv_heads)


def _ops(axes, dtype, want: tuple[str, ...], save_p: bool = False):
    """The backward of attention for the gradients `want` (of dQ, dK, dV), recomputing S and P from Q, K and
    the saved LSE: S = Q K^T, P = exp(scale S - LSE), dV = P^T dO, dP = dO V^T, dS = P (dP - D) scale,
    dK = dS^T Q, dQ = dS K. dK and dV contract over the query rows and, with GQA, the query heads g. With
    `save_p`, P is read (the forward wrote it) instead of recomputed."""
    b, qh, kvh, n, m, d = axes
    Q, dO = Array("Q", (b, *qh, n, d), dtype), Array("dO", (b, *qh, n, d), dtype)
    K, V = Array("K", (b, *kvh, m, d), dtype), Array("V", (b, *kvh, m, d), dtype)
    lse, delta = Array("LSE", (b, *qh, n), "fp32"), Array("Dvec", (b, *qh, n), "fp32")
    S, dP = Array("S", (b, *qh, n, m), "fp32"), Array("dP", (b, *qh, n, m), "fp32")
    P, dS = Array("P", (b, *qh, n, m), dtype), Array("dS", (b, *qh, n, m), dtype)
    dQ, dK, dV = Array("dQ", (b, *qh, n, d), dtype), Array("dK", (b, *kvh, m, d), dtype), Array("dV", (b, *kvh, m, d), dtype)
    ops = [] if save_p else [Contraction("S=Q.K", (Q, K), S),
                             Map("P", (S, lse), P, costs=(("fp32", 1), ("exp", 1)), formula="exp(scale*s - lse)",
                                 **EXP_SUB)]
    if "dV" in want:
        ops.append(Contraction("dV=P.dO", (P, dO), dV))
    ops += [Contraction("dP=dO.V", (dO, V), dP),
            Map("dS", (P, dP, delta), dS, costs=(("fp32", 2),), formula="p*(dp - D)*scale", **SOFTMAX_GRAD)]
    if "dK" in want:
        ops.append(Contraction("dK=dS.Q", (dS, Q), dK))
    if "dQ" in want:
        ops.append(Contraction("dQ=dS.K", (dS, K), dQ))
    return tuple(ops)


def _heads(axes) -> list[tuple[str, int]]:
    """Block-level groups of the batch and every head axis: one of each per block."""
    b, qh = axes[0], axes[1]
    return [(b.name, 1)] + [(a.name, 1) for a in qh]


def _dot(axes, block_n, stages, unit_threads, dtype, zero_dq: bool = False) -> Diagram:
    """The preprocessing kernel: Dvec[b, heads, n] = sum_d dO * O, blocks of `block_n` query rows; with
    `zero_dq` it also zeroes the fp32 dQ accumulator the main kernel adds into (drawn as dQacc = 0 * O:
    one fp32 write an element, O being read there anyway)."""
    b, qh, _, n, _, d = axes
    dO, O = Array("dO", (b, *qh, n, d), dtype), Array("O", (b, *qh, n, d), dtype)
    prod, delta = Array("dO_O", (b, *qh, n, d), "fp32"), Array("Dvec", (b, *qh, n), "fp32")
    ops = (product("dO_O", (dO, O), prod), Reduce("sum_d", (prod,), delta, axis_name="d", combine="sum"))
    outputs = ("Dvec",)
    if zero_dq:
        ops += (Map("zero_dQacc", (O,), Array("dQacc", (b, *qh, n, d), "fp32"), costs=(), formula="0", **ZERO),)
        outputs += ("dQacc",)
    return _kernel("attention-backward-dot", ops, outputs, _heads(axes) + [("n", block_n)], [], stages, [],
                   unit_threads, ())


def _convert(axes, block_n, stages, unit_threads, dtype) -> Diagram:
    """dQ = scale * dQacc in the input dtype, blocks of `block_n` query rows: the fp32 accumulator read once."""
    b, qh, _, n, _, d = axes
    acc, dq = Array("dQacc", (b, *qh, n, d), "fp32"), Array("dQ", (b, *qh, n, d), dtype)
    ops = (Map("dQ=scale*dQacc", (acc,), dq, costs=(("fp32", 1),), formula="scale*dq", **IDENTITY),)
    return _kernel("attention-backward-convert", ops, ("dQ",), _heads(axes) + [("n", block_n)], [], stages, [],
                   unit_threads, ())


def _dkdv(axes, want, name, block_n, block_m, warps, stages, unit_threads, dtype, causal, save_p=False) -> Diagram:
    """Blocks own (batch, KV head, a `block_m` tile of keys); the query tiles stream through SMEM (with GQA
    the g query heads of the group outside them); the keys split over `warps` units. Causal: the band
    n >= m + N - M with m as its rows, so the stream over n skips the query tiles no key of the tile sees."""
    b, qh, kvh, n, m, d = axes
    streams = [(a.name, 1) for a in qh if a not in kvh] + [("n", block_n)]
    staged = tuple(x for x in STAGED if not save_p or x not in ("LSE",)) + (("P",) if save_p else ())
    k = _kernel(name, _ops(axes, dtype, want, save_p), want,
                [(b.name, 1)] + [(a.name, 1) for a in kvh] + [("m", block_m)],
                streams, stages, [("m", _per(block_m, warps))], unit_threads, staged)
    return k.band("m", "n", lower=n.size - m.size) if causal else k


def attention_backward(block_n="Br", block_m="Bc", warps="w", stages=2, unit_threads=32, dtype="bf16",
                       batch="B", heads="H", seqlen="N", kv_seqlen="M", head_dim="d", kv_heads=None,
                       causal=False, save_p=False, dq_accumulator=True) -> Program:
    """FlashAttention-2's backward pass as a program of three kernels.

    1. `attention-backward-dot`: Dvec = rowsum(dO * O), O the forward's output (blocks of `block_n` rows).
    2. `attention-backward`: blocks own (batch, KV head, a `block_m` tile of keys and values); the query
    tiles stream in chunks of `block_n` through SMEM (Q, dO, LSE, Dvec), with GQA those of each of the g
    query heads of the group in turn; each chunk recomputes S = Q K^T and P = exp(scale S - LSE), then
    dV += P^T dO, dP = dO V^T, dS = P (dP - Dvec), dK += dS^T Q in registers, and dQ += dS K is added into
    global memory in fp32 by every block (`accumulate_global`: read-modify-write). The keys of a block split
    over `warps` units. Causal (bottom-right): the stream skips the query tiles the key tile cannot see.
    3. `attention-backward-convert`: dQ = scale * the fp32 accumulator, in the input dtype (the dot kernel
    zeroed the accumulator). `dq_accumulator=False` leaves both out (two kernels, the accumulator's cost
    unaccounted). Tensor FLOPs 10 B H N M d (five products a (query, key) pair). The final scaling of dK is
    left out. With `save_p` the probabilities P (written by the
    forward: 2 B H N M bytes in bf16) are read per chunk instead of recomputed: 8 B H N M d tensor FLOPs and
    no exponentials, for those bytes read (the save-or-recompute choice, diagrams.autodiff)."""
    axes = _axes(batch, heads, seqlen, kv_seqlen, head_dim, kv_heads, causal)
    dot = _dot(axes, block_n, stages, unit_threads, dtype, zero_dq=dq_accumulator)
    main = _dkdv(axes, ("dQ", "dK", "dV"), "attention-backward", block_n, block_m, warps, stages, unit_threads,
                 dtype, causal, save_p)
    if not dq_accumulator:
        return Program("attention-backward", (dot, main.accumulate_global("dQ")))
    main = main.rename_array("dQ", "dQacc").accumulate_global("dQacc")
    return Program("attention-backward", (dot, main, _convert(axes, block_n, stages, unit_threads, dtype)))


def attention_backward_deterministic(block_n="Br", block_m="Bc", warps="w", stages=2, unit_threads=32,
                                     dtype="bf16", batch="B", heads="H", seqlen="N", kv_seqlen="M", head_dim="d",
                                     kv_heads=None, causal=False) -> Program:
    """The backward pass without atomics, as three kernels (the arguments of `attention_backward`).

    1. `attention-backward-dot`: Dvec = rowsum(dO * O).
    2. `attention-backward-dkdv`: as `attention_backward`'s main kernel without dQ: blocks own a key tile,
    stream the query tiles, dK and dV in registers.
    3. `attention-backward-dq`: blocks own (batch, query head, a `block_n` tile of query rows) and stream
    the keys in chunks of `block_m` (K, V), recomputing S and P from Q, K and the LSE and dP from dO and V,
    then dQ += dS K in registers, written once in the input dtype; the rows split over `warps` units.
    Causal: the standard mask m <= n + M - N prunes the key stream.

    Each gradient is summed in one block in a fixed order, so the result is the same from run to run. The
    price is recomputation: S, P, dP and dS are computed twice, 14 B H N M d tensor FLOPs (8 in the dK/dV
    kernel, 6 in the dQ kernel) against 10, 1.4x, and 2 B H N M exponentials against 1; the atomic adds'
    fp32 dQ traffic (8 B H N d M / Bc bytes) becomes K and V read per query tile of each query head
    (4 B H M d N / Br: the dQ kernel does not share K and V over a GQA group) and dQ written once in bf16."""
    axes = _axes(batch, heads, seqlen, kv_seqlen, head_dim, kv_heads, causal)
    b, qh, _, n, m, _ = axes
    dot = _dot(axes, block_n, stages, unit_threads, dtype)
    dkdv = _dkdv(axes, ("dK", "dV"), "attention-backward-dkdv", block_n, block_m, warps, stages, unit_threads,
                 dtype, causal)
    dq = _kernel("attention-backward-dq", _ops(axes, dtype, ("dQ",)), ("dQ",), _heads(axes) + [("n", block_n)],
                 [("m", block_m)], stages, [("n", _per(block_n, warps))], unit_threads, STAGED)
    if causal:
        dq = dq.mask("n", "m", m.size - n.size)
    return Program("attention-backward-deterministic", (dot, dkdv, dq))
