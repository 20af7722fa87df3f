"""split(axis, parts) with derived combine kernels, LSE as an output of online softmax, and atomics (issue 14)."""
import random

import numpy as np
import pytest
import sympy as sp

from diagrams import library
from diagrams.core import Array, DiagramError, Map, Reduce, axis
from diagrams.diagram import Diagram
from diagrams.evaluate import evaluate
from iomodel.derive import derive
from iomodel.pseudocode import pseudocode
from iomodel.symbolic import sym


def _num(expr, vals):
    return float(sp.sympify(expr).subs({sym(k): v for k, v in vals.items()}))


def _bytes(kernel, vals):
    return {(t.array, t.boundary): _num(t.nbytes, vals) for t in kernel.transfers if "global" in t.boundary}


def test_split_kv_decode_bytes_and_flops_are_exact():
    """Decode, N_q = 1, N_k = 32768, 32 query heads on 8 KV heads, d = 128: K and V are read once, each part
    reads Q (one row per head: the only thing read per part), writes its fp32 partial output and LSE,
    which the combine kernel reads back once and merges into O."""
    rng = random.Random()
    b_, sp_, bc = rng.randint(1, 4), rng.choice([4, 8, 16, 32]), rng.choice([64, 128])
    vals = {"B": b_, "N": 1, "M": 32768, "d": 128, "Hk": 8, "g": 4, "sp": sp_, "Bc": bc}
    partial, combine = derive(library.attention_split_kv(), exact=False).kernels
    h, kv = b_ * 32, b_ * 8   # (batch, query head) and (batch, KV head) pairs
    expect_partial = {("Q", "global->smem"): 2 * h * 128 * sp_,
                      ("K", "global->smem"): 2 * kv * 32768 * 128, ("V", "global->smem"): 2 * kv * 32768 * 128,
                      ("O_part", "reg->global"): 4 * h * sp_ * 128, ("O_lse_part", "reg->global"): 4 * h * sp_}
    expect_combine = {("O_part", "global->reg"): 4 * h * sp_ * 128, ("O_lse_part", "global->reg"): 4 * h * sp_,
                      ("O", "reg->global"): 2 * h * 128}
    assert _bytes(partial, vals) == expect_partial
    assert _bytes(combine, vals) == expect_combine
    total = _num(derive(library.attention_split_kv(), exact=False).global_bytes, vals)
    assert total == sum(expect_partial.values()) + sum(expect_combine.values())
    assert _num(partial.flops["tensor"], vals) == 4 * h * 1 * 32768 * 128
    assert _num(partial.blocks, vals) == kv * sp_ and _num(partial.units_per_block, vals) == 4


def test_split_counts_padding_when_parts_do_not_divide():
    vals = {"B": 1, "N": 1, "M": 1000, "d": 64, "Hk": 2, "g": 2, "Bc": 64}
    kern = derive(library.attention_split_kv(parts=3), exact=False).kernels[0]
    part = -(-1000 // 3)                                  # 334 keys a part, 6 chunks of 64 each
    assert _num(kern.flops["tensor"], vals) == 4 * 4 * 64 * 3 * (-(-part // 64)) * 64


def test_split_k_sum_combine_and_atomic_bytes():
    rng = random.Random()
    a_, c_, ta_, tc_, kb = 512, 256, 128, 64, 32
    b_, sp_ = rng.choice([1024, 4096]), rng.choice([2, 4, 8])
    vals = {"a": a_, "b": b_, "c": c_, "ta": ta_, "tc": tc_, "kb": kb, "sp": sp_}
    mm = library.matmul().group("a", "ta").group("c", "tc").stage("A", "smem").stage("B", "smem")
    partial, combine = derive(mm.split("b", "sp", "kb", 2)).kernels
    reads = 2 * a_ * b_ * (c_ // tc_) + 2 * b_ * c_ * (a_ // ta_)
    assert _bytes(partial, vals) == {("A", "global->smem"): 2 * a_ * b_ * (c_ // tc_),
                                     ("B", "global->smem"): 2 * b_ * c_ * (a_ // ta_),
                                     ("C_part", "reg->global"): 4 * a_ * c_ * sp_}
    assert _bytes(combine, vals) == {("C_part", "global->reg"): 4 * a_ * c_ * sp_, ("C", "reg->global"): 2 * a_ * c_}
    assert [op.kind for op in combine_ops(mm.split("b", "sp", "kb"))] == ["reduce"]
    assert _num(partial.flops["tensor"], vals) == 2 * a_ * b_ * c_
    (atomic,) = derive(mm.split("b", "sp", "kb", combine="atomic")).kernels
    # every part's block adds its fp32 tile: read + write, sp times over
    assert _bytes(atomic, vals) == {("A", "global->smem"): reads - 2 * b_ * c_ * (a_ // ta_),
                                    ("B", "global->smem"): 2 * b_ * c_ * (a_ // ta_),
                                    ("C", "global->reg"): 4 * a_ * c_ * sp_, ("C", "reg->global"): 4 * a_ * c_ * sp_}


def combine_ops(prog):
    return prog.kernels[-1].ordered_ops()


def test_accumulate_global_counts_read_modify_write():
    """A contraction grouped over blocks (not streamed): every block adds its tile into the output."""
    rng = random.Random()
    vals = {"a": 256, "b": rng.choice([512, 2048]), "c": 128, "ta": 64, "tc": 64, "kb": rng.choice([64, 128])}
    d = library.matmul().group("a", "ta").group("c", "tc").group("b", "kb")
    plain, acc = derive(d).kernels[0], derive(d.accumulate_global("C")).kernels[0]
    adds = vals["b"] // vals["kb"]
    assert _bytes(plain, vals)["C", "reg->global"] == 2 * 256 * 128 * adds     # the race, as plain writes
    got = _bytes(acc, vals)
    assert got["C", "global->reg"] == got["C", "reg->global"] == 4 * 256 * 128 * adds   # fp32 read + write
    assert d.accumulate_global("C").arrays()["C"].dtype == "fp32" and d.arrays()["C"].dtype == "bf16"
    assert "atomic add C" in pseudocode(d.accumulate_global("C"))
    with pytest.raises(DiagramError, match="not an output"):
        d.accumulate_global("A")


def test_split_max_and_errors():
    n, m = axis("n"), axis("m")
    x = Array("X", (n, m), "fp32")
    rowmax = Diagram("rowmax", (Reduce("max_m", (x,), Array("Y", (n,), "fp32"), axis_name="m", combine="max"),), ("Y",))
    prog = rowmax.group("n", "tn").split("m", 4, "km")
    assert [(op.kind, op.combine) for op in combine_ops(prog)] == [("reduce", "max")]
    with pytest.raises(DiagramError, match="atomic combine needs a sum"):
        rowmax.split("m", 4, combine="atomic")
    with pytest.raises(DiagramError, match="masked axis"):
        library.attention().online_softmax().mask("n", "m", 0).split("m", 4)
    with pytest.raises(DiagramError, match="already grouped or streamed"):
        library.flash_attention().split("m", 4)
    with pytest.raises(DiagramError, match="no operation"):
        rowmax.split("n", 2)
    with pytest.raises(DiagramError, match="consumed inside the kernel by 'exp'.*online_softmax"):
        library.attention().split("m", 4, "Bc")   # softmax needs its online rewrite first
    # an operation off the split axis that uses the fold's result moves to the combine kernel, after the merge
    scaled = Diagram("s", rowmax.ops + (Map("neg", (rowmax.ops[0].output,), Array("Z", (n,), "fp32")),), ("Z",))
    part, comb = scaled.split("m", 2).kernels
    assert [op.name for op in comb.ordered_ops()] == ["max_parts:Y", "neg"] and comb.outputs == ("Z",)
    assert "neg" not in {op.name for op in part.ops} and part.outputs == ("Y_part",)
    over_m = Diagram("t", rowmax.ops + (Map("sub", (x, rowmax.ops[0].output), Array("Z", (n, m), "fp32")),), ("Z",))
    with pytest.raises(DiagramError, match="consumed inside the kernel by 'sub'"):
        over_m.split("m", 2)
    with pytest.raises(DiagramError, match="nothing after it"):
        Diagram("u", (Reduce("sum_m", (x,), Array("Y", (n,), "fp32"), axis_name="m"),
                      Map("neg", (Array("Y", (n,), "fp32"),), Array("Z", (n,), "fp32"))), ("Z",)).split("m", 2, combine="atomic")


def test_derived_lse_merge_computes_attention():
    """The combine kernel read off the normalized contraction merges per-part outputs by their LSEs into
    exactly softmax(q K^T) V: run it on numbers."""
    rng = np.random.default_rng()
    parts, m_, d_ = int(rng.integers(2, 6)), 40, 8
    prog = library.attention_split_kv(parts=parts, batch=1, heads=2, kv_heads=1, seqlen=1, kv_seqlen=m_ * parts,
                                      head_dim=d_, block_n=8)
    q, k, v = rng.normal(size=(2, d_)), rng.normal(size=(m_ * parts, d_)), rng.normal(size=(m_ * parts, d_))
    s = q @ k.T
    o_parts, lse_parts = [], []
    for p in range(parts):
        sp_ = s[:, p * m_:(p + 1) * m_]
        o_parts.append(np.exp(sp_ - sp_.max(1, keepdims=True)) / np.exp(sp_ - sp_.max(1, keepdims=True)).sum(1, keepdims=True) @ v[p * m_:(p + 1) * m_])
        lse_parts.append(np.log(np.exp(sp_).sum(1)))
    combine = prog.kernels[1]
    arrays = combine.arrays()
    assert arrays["O_part"].axis_names == ("parts", "b", "hk", "g", "n", "d")
    assert arrays["O_lse_part"].axis_names == ("b", "hk", "g", "n", "parts")
    out = evaluate(combine, {"O_part": np.stack(o_parts).reshape(parts, 1, 1, 2, 1, d_),
                             "O_lse_part": np.stack(lse_parts, -1).reshape(1, 1, 2, 1, parts)})["O"]
    ref = np.exp(s - s.max(1, keepdims=True)) / np.exp(s - s.max(1, keepdims=True)).sum(1, keepdims=True) @ v
    assert arrays["O"].axis_names == ("b", "hk", "g", "n", "d")
    np.testing.assert_allclose(out.reshape(2, d_), ref, rtol=1e-10)


def test_lse_output_is_written_once_per_row_and_shown():
    B, H, N, Br = sym("B"), sym("H"), sym("N"), sym("Br")
    plain = derive(library.flash_attention()).kernels[0]
    d = library.attention().group("b", 1).group("h", 1).group("n", "Br").online_softmax(lse=True) \
        .stream("m", "Bc", "smem", 2).group("n", Br / sym("w"), "reg")
    assert d.outputs == ("O", "O_lse")
    k = derive(d).kernels[0]
    by = {(t.array, t.boundary): t for t in k.transfers}
    assert sp.simplify(by["O_lse", "reg->global"].nbytes - 4 * B * H * N) == 0     # fp32, once per row
    assert sp.simplify(k.flops["exp"] - plain.flops["exp"] - B * H * N) == 0       # one log per row
    text = pseudocode(d)
    assert "O_lse = O_max + log(O_sum)" in text and "store O_lse[b, h, n0:n0+Br]" in text
    named = library.attention().online_softmax(lse="L")
    assert named.outputs == ("O", "L") and named.arrays()["L"].axis_names == ("b", "h", "n")
    with pytest.raises(DiagramError, match="no softmax followed by a contraction"):
        library.softmax().online_softmax(lse=True)


def test_split_keeps_a_requested_lse_and_merges_it():
    prog = library.attention().group("b", 1).group("h", 1).online_softmax(lse=True).split("m", "sp", "Bc")
    partial, combine = prog.kernels
    assert partial.outputs == ("O_part", "O_lse_part") and combine.outputs == ("O", "O_lse")
    text = pseudocode(prog)
    assert "O_lse = max + log(sum)" in text and "store O_lse" in text
