"""fuse (packed axes), split_units (units split each streamed chunk, merged in SMEM), SMEM liveness after a
stream, and split's direct_when_one (no combine kernel for one part): flash_decode is built from them."""
import numpy as np
import pytest
import sympy as sp

from diagrams import library
from diagrams.core import DiagramError
from diagrams.evaluate import evaluate
from iomodel.derive import derive
from iomodel.symbolic import sym


def _num(expr, vals):
    return float(sp.sympify(expr).subs({sym(k): v for k, v in vals.items()}))


def test_fuse_packs_adjacent_axes_into_one():
    att = library.attention(kv_heads="Hk").fuse(("g", "n"), "r")
    arrays = att.arrays()
    assert arrays["Q"].axis_names == ("b", "hk", "r", "d") and arrays["K"].axis_names == ("b", "hk", "m", "d")
    assert arrays["S"].axis_names == ("b", "hk", "r", "m") and att.axes()["r"] == sym("g") * sym("N")
    with pytest.raises(DiagramError, match="adjacent and in this order"):
        library.attention(kv_heads="Hk").fuse(("n", "g"), "r")
    with pytest.raises(DiagramError, match="already grouped"):
        library.attention(kv_heads="Hk").group("g", 1).fuse(("g", "n"), "r")
    with pytest.raises(DiagramError, match="masked"):
        library.attention(kv_heads="Hk").mask("n", "m", 0).fuse(("g", "n"), "r")
    with pytest.raises(DiagramError, match="no axis"):
        library.attention().fuse(("g", "n"), "r")
    with pytest.raises(DiagramError, match="two or more"):
        library.attention().fuse(("n",), "r")


def _decode_kernel(units=4):
    d = library.attention().group("b", 1).group("h", 1).group("n", "Br").online_softmax(lse=True)
    d = d.stage("Q", "smem").stage("K", "smem").stage("V", "smem").stream("m", "Bc", "smem", "st")
    return d.split_units("m", units)


def test_split_units_gives_each_unit_its_share_of_every_chunk():
    """Each of w warps reads and folds Bc/w keys of a chunk; the block loads the whole chunk; the merge by
    LSE runs once a block, into an fp32 tile in SMEM that takes the ring's place after the stream."""
    k = derive(_decode_kernel("w"), exact=True).kernels[0]
    B, H, N, M, d, Br, Bc, w, st = (sym(s) for s in ("B", "H", "N", "M", "d", "Br", "Bc", "w", "st"))
    blocks = B * H * N / Br
    assert sp.simplify(k.units_per_block - w) == 0 and sp.simplify(k.blocks - blocks) == 0
    by = {(t.array, t.boundary): t for t in k.transfers}
    assert sp.simplify(by["K", "global->smem"].nbytes - 2 * blocks * M * d) == 0       # K once per block
    assert sp.simplify(by["K", "smem->reg"].tile_elements - Bc * d / w) == 0         # a unit's share
    assert sp.simplify(by["O", "reg->global"].nbytes - 2 * B * H * N * d) == 0       # O, bf16
    assert ("O_merged", "smem") in _decode_kernel("w").staged   # the fp32 tile the warps add into, converted once
    assert sp.expand(k.flops["fp32"]).coeff(B * H * N * d) > 0
    assert sp.simplify(k.flops["tensor"] - 4 * B * H * N * M * d) == 0
    ring, q, merged = 2 * st * Bc * d * 2, Br * d * 2, Br * d * 4   # bf16 K, V chunks and Q; fp32 merge
    assert sp.simplify(k.smem_bytes - (q + sp.Max(ring, merged))) == 0
    vals = {"B": 1, "H": 1, "N": 16, "M": 64, "d": 128, "Br": 16, "Bc": 64, "w": 4, "st": 2}
    assert _num(k.smem_bytes, vals) == 16 * 128 * 2 + 2 * 2 * 64 * 128 * 2
    # registers: each warp holds the whole Br x d accumulator (its own partial) and its Br x Bc/w scores
    assert _num(k.regs_per_thread, vals) >= (16 * 128 + 16 * 16) / 32


def test_split_units_refuses_what_it_cannot_split():
    base = library.attention().group("b", 1).group("h", 1).online_softmax()
    with pytest.raises(DiagramError, match="not streamed"):
        base.split_units("m", 4)
    with pytest.raises(DiagramError, match="register level"):
        base.stream("m", 64).group("m", 16, "reg").split_units("m", 4)
    with pytest.raises(DiagramError, match="masked"):
        base.mask("n", "m", 0).stream("m", 64).split_units("m", 4)
    with pytest.raises(DiagramError, match="do not divide"):
        base.stream("m", 64).split_units("m", 3)


def test_split_units_of_a_sum_merges_by_a_sum():
    mm = library.matmul().group("a", "ta").group("c", "tc").stage("A", "smem").stage("B", "smem")
    k = mm.stream("b", "kb", "smem", 2).split_units("b", 2)
    merge = [op for op in k.ordered_ops() if op.name.startswith("sum_units")]
    assert len(merge) == 1 and merge[0].output.name == "C_merged" and ("C_merged", "smem") in k.staged
    costs = derive(k).kernels[0]
    ta, tc, kb = sym("ta"), sym("tc"), sym("kb")
    assert sp.simplify(costs.smem_bytes - sp.Max(2 * (ta + tc) * kb * 2, ta * tc * 4)) == 0


def test_flash_decode_computes_attention_on_numbers():
    """The whole program (parts, warps, packed GQA rows, both merges) gives softmax(q K^T) V and its LSE."""
    rng = np.random.default_rng()
    parts, units, per, hk, g, n, d = 3, 2, 8, 2, 3, 2, 8
    m = parts * units * per
    sizes = {"B": 1, "Hk": hk, "g": g, "N": n, "M": m, "d": d, "sp": parts, "w": units}
    q, k, v = rng.normal(size=(1, hk, g, n, d)), rng.normal(size=(1, hk, m, d)), rng.normal(size=(1, hk, m, d))
    partial, combine = library.flash_decode(block_n=4).kernels
    split = lambda x: x.reshape(1, hk, parts, units, per, d)   # noqa: E731 - m -> (parts, units, m)
    mid = evaluate(partial, {"Q": q.reshape(1, hk, g * n, d), "K": split(k), "V": split(v)}, sizes)
    out = evaluate(combine, mid, sizes)
    s = np.einsum("bhgnd,bhmd->bhgnm", q, k)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = np.einsum("bhgnm,bhmd->bhgnd", p / p.sum(-1, keepdims=True), v)
    # (an absolute floor too: an O entry near zero made the relative test alone fail on rounding now and then)
    np.testing.assert_allclose(out["O"].reshape(ref.shape), ref, rtol=1e-10, atol=1e-12)
    lse = np.log(np.exp(s).sum(-1))
    np.testing.assert_allclose(out["O_lse"].reshape(lse.shape), lse, rtol=1e-10)


def test_combine_kernel_of_one_part_does_not_run():
    prog = library.flash_decode()
    assert prog.kernels[0].runs is None and prog.kernels[1].runs == sp.Min(1, sym("sp") - 1)
    costs = derive(prog, exact=False)
    assert [_num(k.runs, {"sp": p}) for k in costs.kernels for p in (1, 2, 64)] == [1, 1, 1, 0, 1, 1]
    plain = library.attention().group("b", 1).group("h", 1).online_softmax().split("m", "sp", "Bc")
    assert plain.kernels[1].runs is None   # by default the combine kernel always runs
