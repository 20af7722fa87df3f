"""Rewrites that make an axis streamable: a late per-row factor moved past a contraction, online log-sum-exp."""
import pytest
import sympy as sp

from diagrams import library
from diagrams.algorithms import cross_entropy_loss, rmsnorm_then_matmul
from diagrams.core import Array, Contraction, DiagramError, Map, OnlineLogSumExp, Product, Reduce, axis, product
from diagrams.diagram import Diagram
from iomodel.derive import derive
from iomodel.symbolic import sym


def test_rmsnorm_cannot_stream_d_until_the_scale_moves_past_the_matmul():
    plain = rmsnorm_then_matmul()
    with pytest.raises(DiagramError, match="operation 'normalize'.*needs 'r'"):
        plain.stream("d", "Bd")
    moved = plain.defer_scales()
    assert moved.stream("d", "Bd").partitions  # now it streams
    by_out = {op.output.name: op for op in moved.ops}
    # the contraction no longer sees r; r multiplies its fp32 accumulator once, after the stream
    assert {x.name for x in by_out["Xn_unscaled"].inputs} == {"X", "g"}
    assert isinstance(by_out["Y"], Product) and {x.name for x in by_out["Y"].inputs} == {"Y_unscaled", "r"}
    assert by_out["Y_unscaled"].output.dtype == "fp32" and isinstance(by_out["Y_unscaled"], Contraction)
    assert len(plain.ops) == 5 and plain.producer("Y").inputs[0].name == "Xn"   # the original is untouched


def test_defer_scales_finds_the_pattern_from_the_graph_not_the_names():
    """Another late factor under other names: a column scale 1/max_k|A| applied before a matmul over k."""
    i, k, j = axis("i"), axis("k"), axis("j")
    A, B = Array("A", (i, k)), Array("B", (k, j))
    peak, inv = Array("peak", (i,), "fp32"), Array("inv", (i,), "fp32")
    scaled, out = Array("scaled", (i, k)), Array("out", (i, j))
    d = Diagram("amax-scaled", (Reduce("amax", (A,), peak, axis_name="k", combine="max"),
                                Map("recip", (peak,), inv, formula="1/p"),
                                product("apply", (A, inv), scaled),
                                Contraction("out=scaled.B", (scaled, B), out)), ("out",))
    moved = d.defer_scales()
    # the product had one factor left: the contraction reads A directly
    assert {x.name for x in moved.producer("out_unscaled").inputs} == {"A", "B"}
    k_costs = derive(moved.group("i", "ti").stream("k", "tk")).kernels[0]
    I, J, K = sym("i"), sym("j"), sym("k")
    # the scale costs one multiply per output element now, not one per input element
    assert sp.simplify(k_costs.flops["fp32"] - (I * K + I + I * J)) == 0
    assert sp.simplify(k_costs.flops["tensor"] - 2 * I * J * K) == 0


def test_defer_scales_leaves_what_it_cannot_move_and_says_so():
    with pytest.raises(DiagramError, match="defer_scales: diagram matmul has no product"):
        library.matmul().defer_scales()
    # a factor carrying the contracted axis is not constant along it: nothing moves
    i, k, j = axis("i"), axis("k"), axis("j")
    A, B, s = Array("A", (i, k)), Array("B", (k, j)), Array("s", (i, k))
    d = Diagram("elementwise", (product("mul", (A, s), Array("As", (i, k))),
                                Contraction("o", (Array("As", (i, k)), B), Array("O", (i, j)))), ("O",))
    with pytest.raises(DiagramError, match="no product"):
        d.defer_scales()


def test_online_logsumexp_streams_the_vocabulary_without_probabilities():
    plain = cross_entropy_loss()
    with pytest.raises(DiagramError, match="cannot stream v: operation 'exp'"):
        plain.stream("v", "Bv")
    online = plain.online_logsumexp()
    lse = [op for op in online.ops if isinstance(op, OnlineLogSumExp)]
    assert len(lse) == 1 and lse[0].axis_name == "v" and lse[0].output.name == "lse"
    assert {a.name for a in lse[0].state_arrays()[0].axes} == {"t"}   # running max, one per token
    k = derive(online.group("t", "Bt").stream("v", "Bv")).kernels[0]
    T, V, Bv = sym("T"), sym("V"), sym("Bv")
    # per logit: max, subtract, exp, add; per row per chunk: a rescale; per row once: log + max, then the loss
    assert sp.simplify(k.flops["exp"] - (T * V + T * V / Bv + T)) == 0
    assert sp.simplify(k.flops["fp32"] - (3 * T * V + 2 * T * V / Bv + T + T)) == 0
    with pytest.raises(DiagramError, match="no log-sum-exp composite"):
        library.matmul().online_logsumexp()
