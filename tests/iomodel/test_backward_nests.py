"""Issue 15, the backward loop nests: FlashAttention-2's backward (dQ by atomics) and the deterministic one
(dQ in its own kernel), with GQA and the bottom-right causal mask. Their values against the derived
backward of attention, their FLOPs and global bytes against hand formulas, causal tile pairs against a
brute-force count, and the model's predictions of both."""
import numpy as np
import pytest
import sympy as sp

from diagrams import library
from diagrams.autodiff import backward
from diagrams.core import DiagramError
from diagrams.evaluate import evaluate
from iomodel.algorithms import LIBRARY, best_prediction
from iomodel.derive import derive
from iomodel.symbolic import sym

VARIANTS = (library.attention_backward, library.attention_backward_deterministic)
AT = {"B": 2, "H": 32, "Hk": 8, "g": 4, "N": 4096, "M": 2048, "d": 128, "Br": 64, "Bc": 128}


def S(*names):
    return [sym(n) for n in names]


def same(derived, formula) -> bool:
    """Symbolically equal, and equal as numbers at the sizes of AT."""
    sub = {sym(k): v for k, v in AT.items()}
    return sp.simplify(derived - formula) == 0 and float(sp.sympify(derived).subs(sub)) == float(formula.subs(sub))


def _inputs(causal, kv_heads, sizes, seed=5):
    """Random Q, K, V, dO and the forward's O and LSE (scale 1), and the gradients of the derived backward
    of attention (`diagrams.autodiff`, checked against torch.autograd in tests/diagrams)."""
    att = library.attention(kv_heads=kv_heads)
    if causal:
        axes = att.axes()
        att = att.mask("n", "m", axes["m"] - axes["n"])
    rng = np.random.default_rng(seed)
    shape = {"b": sizes["B"], "h": sizes["H"], "hk": sizes["Hk"], "g": sizes["H"] // sizes["Hk"], "n": sizes["N"],
             "m": sizes["M"], "d": sizes["d"]}
    inputs = {x.name: rng.normal(size=[shape[a] for a in x.axis_names]) for x in att.inputs()}
    inputs["dO"] = rng.normal(size=[shape[a] for a in att.arrays()["O"].axis_names])
    fwd = evaluate(att.online_softmax(lse="LSE"), inputs)
    grads = evaluate(backward(att), inputs)
    return {**inputs, "O": fwd["O"], "LSE": fwd["LSE"]}, grads


@pytest.mark.parametrize("fn", VARIANTS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kv_heads", [None, "Hk"])
def test_loop_nests_compute_the_gradients(fn, causal, kv_heads):
    """Run on numbers, each program gives the gradients of attention, GQA summing dK and dV over the g query
    heads of a group and the swapped causal band (n >= m + N - M) keeping the same points as the mask."""
    sizes = {"B": 2, "H": 6, "Hk": 2 if kv_heads else 6, "N": 5, "M": 7, "d": 3}
    inputs, want = _inputs(causal, kv_heads, sizes)
    got = evaluate(fn(kv_heads=kv_heads, causal=causal), inputs)
    for g in ("dQ", "dK", "dV"):
        np.testing.assert_allclose(got[g], want[g], rtol=1e-10, atol=1e-12, err_msg=g)


def test_atomic_flops_and_bytes_with_gqa():
    """FA2 backward, GQA: 10 B H N M d tensor FLOPs; K, V, dK, dV move B Hk M d elements each; Q, dO, LSE, D
    and the fp32 dQ read-modify-write once per key tile; D = rowsum(dO * O) reads O and dO once and zeroes
    the fp32 accumulator; the conversion reads it once and writes dQ."""
    B, Hk, g, N, M, d, Bc = S("B", "Hk", "g", "N", "M", "d", "Bc")
    H = Hk * g
    dot, main, convert = derive(library.attention_backward(kv_heads="Hk")).kernels
    assert {t.array for t in dot.transfers if t.boundary.startswith("global->")} == {"dO", "O"}
    assert same(main.flops["tensor"], 10 * B * H * N * M * d) and same(main.flops["exp"], B * H * N * M)
    tiles = M / Bc
    assert same(dot.global_bytes, 2 * 2 * B * H * N * d + 4 * B * H * N + 4 * B * H * N * d)
    assert same(convert.global_bytes, (4 + 2) * B * H * N * d)
    expected = (4 * 2 * B * Hk * M * d                                   # K, V read once; dK, dV written once
                + (2 * 2 * B * H * N * d + 2 * 4 * B * H * N) * tiles       # Q, dO, LSE, Dvec per key tile
                + 2 * 4 * B * H * N * d * tiles)                           # dQ: fp32 read + write per key tile
    assert same(main.global_bytes, expected)


def test_deterministic_flops_and_bytes():
    """The deterministic program: 8 + 6 = 14 B H N M d tensor FLOPs (S and dP computed twice), 1.4x the atomic
    one's 10; two exponentials a pair. dQ is written once, in bf16; K and V are read per query tile."""
    B, Hk, g, N, M, d, Br, Bc = S("B", "Hk", "g", "N", "M", "d", "Br", "Bc")
    H = Hk * g
    dot, dkdv, dq = derive(library.attention_backward_deterministic(kv_heads="Hk")).kernels
    assert (dkdv.name, dq.name) == ("attention-backward-dkdv", "attention-backward-dq")
    assert same(dkdv.flops["tensor"], 8 * B * H * N * M * d) and same(dq.flops["tensor"], 6 * B * H * N * M * d)
    total = sum(k.flops.get("tensor", 0) for k in (dot, dkdv, dq))
    atomic = sum(k.flops.get("tensor", 0) for k in derive(library.attention_backward(kv_heads="Hk")).kernels)
    assert sp.simplify(total / atomic) == sp.Rational(7, 5)
    assert same(dkdv.flops["exp"] + dq.flops["exp"], 2 * B * H * N * M)
    assert same(dkdv.global_bytes, 4 * 2 * B * Hk * M * d + (2 * 2 * B * H * N * d + 2 * 4 * B * H * N) * M / Bc)
    assert same(dq.global_bytes, 2 * 2 * B * H * N * d + 2 * 4 * B * H * N   # Q, dO, LSE, Dvec once
                + 2 * 2 * B * H * M * d * N / Br                            # K, V per query tile (per query head)
                + 2 * B * H * N * d)                                        # dQ written once, bf16
    assert all(k.accumulated == () for k in library.attention_backward_deterministic().kernels)   # no atomics


def test_kv_bytes_scale_with_kv_heads_not_query_heads():
    """At fixed Hk, more query heads per group (g) leave the bytes of K, V, dK and dV in the K/V-tile kernels
    unchanged: a block owns one KV head's tile and streams every query head of the group."""
    def kv_bytes(kernel, g):
        sub = {sym("B"): 2, sym("Hk"): 8, sym("g"): g, sym("N"): 4096, sym("M"): 4096, sym("d"): 128,
               sym("Br"): 64, sym("Bc"): 128}
        return {t.array: int(t.nbytes.subs(sub)) for t in kernel.transfers
                if t.array in ("K", "V", "dK", "dV") and "global" in t.boundary}

    for fn in VARIANTS:
        k = derive(fn(kv_heads="Hk")).kernels[1]
        one, eight = kv_bytes(k, 1), kv_bytes(k, 8)
        assert one == eight == {x: 2 * 8 * 4096 * 128 * 2 for x in ("K", "V", "dK", "dV")}


def _pairs(n, m, br, bc):
    """(query tile, key tile) pairs holding a live point of the bottom-right causal mask k <= q + M - N."""
    q, k = np.nonzero(np.arange(m)[None, :] <= np.arange(n)[:, None] + m - n)
    return len(set(zip((q // br).tolist(), (k // bc).tolist())))


@pytest.mark.parametrize("n,m", [(4096, 4096), (1000, 1536), (1536, 1000), (777, 2049)])
def test_causal_pairs_match_brute_force(n, m):
    """The dK/dV kernel streams query tiles under the band n >= m + N - M (rows m, columns n) and the dQ
    kernel key tiles under m <= n + M - N; both visit exactly the tile pairs holding a live point."""
    br, bc, dh = 64, 128, 64
    sub = {sym("B"): 1, sym("H"): 1, sym("N"): n, sym("M"): m, sym("d"): dh, sym("Br"): br, sym("Bc"): bc,
           sym("w"): 4}
    pairs = _pairs(n, m, br, bc)
    for fn in VARIANTS:
        kernels = derive(fn(causal=True), exact=False).kernels
        q_loads = [t for t in kernels[1].transfers if t.array == "Q" and t.boundary == "global->smem"][0]
        assert int(q_loads.count.subs(sub)) == pairs
        tensor = 10 if fn is library.attention_backward else 8
        assert int(kernels[1].flops["tensor"].subs(sub)) == tensor * br * bc * dh * pairs
    dq = derive(library.attention_backward_deterministic(causal=True), exact=False).kernels[2]
    k_loads = [t for t in dq.transfers if t.array == "K" and t.boundary == "global->smem"][0]
    assert int(k_loads.count.subs(sub)) == pairs
    assert pairs < -(-n // br) * -(-m // bc)   # the mask prunes something


def test_bad_input_is_one_line():
    with pytest.raises(DiagramError, match="multiple of kv_heads"):
        library.attention_backward(heads=12, kv_heads=5)
    with pytest.raises(DiagramError, match="causal must be True or False"):
        library.attention_backward_deterministic(causal="yes")


def test_registered_as_variants_of_each_other():
    atomic, det = LIBRARY["attention-backward"], LIBRARY["attention-backward-deterministic"]
    assert atomic.variants == (det.name,) and det.variants == (atomic.name,) and atomic.sizes == det.sizes


@pytest.mark.parametrize("gpu", ["a100-sxm-80gb", "h100-sxm"])
def test_model_predicts_both_and_the_deterministic_one_is_slower(gpu):
    """At N = M = 16384 both are bound by their matrix work; the deterministic one does 1.4x of it and saves
    only the fp32 dQ traffic, so it is predicted slower (yet not 1.4x: its kernels find better tiles)."""
    shape = {"N": 16384, "M": 16384, "B": 1}
    atomic = best_prediction("attention-backward", gpu, shape, variants=False)
    det = best_prediction("attention-backward-deterministic", gpu, shape, variants=False)
    assert atomic.time_s > 0 and det.time_s > atomic.time_s
    assert det.flops == pytest.approx(1.4 * atomic.flops)
    both = best_prediction("attention-backward", gpu, shape)
    assert both.kernel.startswith("attention-backward/")


def test_pseudocode_shows_the_swapped_band_and_one_init():
    """GQA + causal: dK and dV are initialized once, outside the g and n streams they both fold; the query
    stream starts at the first tile the key tile sees; dQ is an atomic add."""
    from iomodel.pseudocode import pseudocode

    text = pseudocode(library.attention_backward(kv_heads="Hk", causal=True).kernels[1])
    assert text.count("init dK_acc") == 1 and text.count("init dV_acc") == 1
    assert "for n0 in floor(max(0, m0 + -M + N) / Br)*Br..N step Br" in text and "atomic add" in text
