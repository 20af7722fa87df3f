"""Acceptance (issue 14): eight algorithms through the public API (`diagrams.library` + `iomodel.derive.derive`),
FLOPs and global bytes against their textbook formulas; ratio 1.000 where the formula is exact (exact=True,
tiles dividing the sizes), and the GEMM traffic against 2abc/sqrt(M) + ac."""
import numpy as np
import pytest
import sympy as sp

from diagrams import library
from iomodel.derive import derive
from iomodel.symbolic import sym

# concrete sizes and tiles (tiles divide sizes) at which every ratio is also checked as a number
AT = {"M": 1024, "K": 512, "N": 2048, "P": 256, "T": 4096, "D": 1024, "F": 4096, "V": 32768, "B": 2, "H": 8,
      "d": 128, "Bm": 128, "Bn": 64, "Bk": 64, "Bt": 64, "Bf": 128, "Bd": 64, "Bv": 128, "Br": 64, "Bc": 128,
      "w": 4, "a": 4096, "b": 2048, "c": 1024, "ta": 128, "tc": 128, "kb": 32, "Hk": 8, "g": 4, "sp": 16}


def S(*names):
    return [sym(n) for n in names]


def ratio(derived, formula) -> float:
    """derived / formula: symbolically 1 and, as a number, 1.000 at the sizes of AT."""
    assert sp.simplify(derived - formula) == 0, f"{sp.simplify(derived)} != {formula}"
    sub = {sym(k): v for k, v in AT.items()}
    return float(sp.sympify(derived).subs(sub)) / float(sp.sympify(formula).subs(sub))


def test_gemm_flops_bytes_and_hong_kung():
    a, b, c, ta, tc, t = S("a", "b", "c", "ta", "tc", "t")
    k = derive(library.tiled_matmul()).kernels[0]   # single level: C staged in SMEM beside the A, B chunks
    assert ratio(k.flops["tensor"], 2 * a * b * c) == 1.0
    assert ratio(k.global_bytes, 2 * (a * b * c * (1 / ta + 1 / tc) + a * c)) == 1.0
    square = k.global_elements.subs({ta: t, tc: t})
    Mfast = sp.Symbol("Mfast", positive=True)
    # the accumulator holds M = t^2 elements of fast memory: traffic is exactly the bound
    assert sp.simplify(square.subs(t, sp.sqrt(Mfast)) - (2 * a * b * c / sp.sqrt(Mfast) + a * c)) == 0
    # with the whole footprint (t^2 + 2 t kb, kb = 1) as M the bound is met within 1% at t = 128
    fast = float(k.smem_elements.subs({ta: 128, tc: 128, sym("kb"): 1}))
    sub = {a: 4096, b: 4096, c: 4096, t: 128}
    bound = 2 * 4096 ** 3 / np.sqrt(fast) + 4096 ** 2
    assert float(square.subs(sub)) / bound == pytest.approx(1.0, abs=0.01)


def test_chained_matmul():
    M, K, N, P, Bm, Bn = S("M", "K", "N", "P", "Bm", "Bn")
    k = derive(library.chained_matmul()).kernels[0]
    assert ratio(k.flops["tensor"], 2 * M * K * N + 2 * M * N * P) == 1.0
    # A once per n chunk, B and C once per row block, E once; the intermediate never leaves the chip
    assert ratio(k.global_bytes, 2 * (M * K * N / Bn + K * N * M / Bm + N * P * M / Bm + M * P)) == 1.0
    assert "D" not in {t.array for t in k.transfers}


def test_fused_mlp_and_unfused():
    T, D, F, Bt, Bf, Bd = S("T", "D", "F", "Bt", "Bf", "Bd")
    fused = derive(library.mlp())
    assert ratio(fused.kernels[0].flops["tensor"], 4 * T * D * F) == 1.0
    assert ratio(fused.kernels[0].flops["exp"], T * F) == 1.0   # one exp per GeLU
    assert ratio(fused.global_bytes, 2 * (T * D * F / Bf + 2 * D * F * T / Bt + T * D)) == 1.0
    unfused = derive(library.mlp(fused=False))
    assert ratio(sum(k.flops["tensor"] for k in unfused.kernels), 4 * T * D * F) == 1.0
    # X per f tile, W1 and W2 per token tile, G written once and read per output column tile, Y once
    expected = 2 * (T * D * F / Bf + D * F * T / Bt + T * F) + 2 * (T * F * D / Bd + F * D * T / Bt + T * D)
    assert ratio(unfused.global_bytes, expected) == 1.0


def test_rmsnorm_then_matmul():
    T, D, N, Bt, Bn = S("T", "D", "N", "Bt", "Bn")
    k = derive(library.rmsnorm_matmul()).kernels[0]
    assert ratio(k.flops["tensor"], 2 * T * D * N) == 1.0
    # per column block: square, sum and x*g per element of X, 2 per row for 1/rms; then 1/rms on every output
    assert ratio(k.flops["fp32"], (3 * T * D + 2 * T) * N / Bn + T * N) == 1.0
    assert ratio(k.global_bytes, 2 * (T * D * N / Bn + D * N * T / Bt + D * (T / Bt) * (N / Bn) + T * N)) == 1.0


def _band_pairs(n, br, bc, window):
    """(row tile, key chunk) pairs with a live point of the causal window i - W < j <= i (brute force)."""
    pairs = 0
    for r0 in range(0, n, br):
        lo, hi = max(0, r0 - window + 1), r0 + br - 1
        pairs += len({j // bc for j in range(lo, hi + 1)})
    return pairs


def test_sliding_window_attention():
    assert hasattr(library, "sliding_window_attention")
    n, br, bc, window, dh = 16384, 128, 64, 1024, 64
    sub = {sym("B"): 1, sym("H"): 1, sym("N"): n, sym("M"): n, sym("d"): dh, sym("Br"): br, sym("Bc"): bc,
           sym("w"): 4, sym("W"): window}
    k = derive(library.sliding_window_attention(), exact=False).kernels[0]
    pairs = _band_pairs(n, br, bc, window)
    assert float(k.flops["tensor"].subs(sub)) / (4 * br * bc * dh * pairs) == 1.0   # exact in whole tiles
    textbook = 4 * dh * sum(min(i + 1, window) for i in range(n))
    assert 1.0 <= float(k.flops["tensor"].subs(sub)) / textbook <= 1 + (br + bc) / window
    bytes_ = 2 * (2 * n * dh + 2 * pairs * bc * dh)   # Q and O once, K and V once per visited pair
    assert float(k.global_bytes.subs(sub)) / bytes_ == 1.0


def test_split_kv_decode():
    assert hasattr(library, "attention_split_kv")
    B, Hk, g, N, M, d, sp_ = S("B", "Hk", "g", "N", "M", "d", "sp")
    H = Hk * g
    prog = derive(library.attention_split_kv())
    assert ratio(sum(k.flops.get("tensor", 0) for k in prog.kernels), 4 * B * H * N * M * d) == 1.0
    # Q per part, K and V once; fp32 partial outputs and LSEs written and read back once; O written
    parts = 4 * B * H * N * (d + 1) * sp_
    expected = 2 * B * H * N * d * sp_ + 2 * 2 * B * Hk * M * d + 2 * parts + 2 * B * H * N * d
    assert ratio(prog.global_bytes, expected) == 1.0


def test_streamed_cross_entropy():
    T, D, V, Bt, Bv = S("T", "D", "V", "Bt", "Bv")
    prog = derive(library.cross_entropy())
    assert [k.name for k in prog.kernels] == ["target-logit", "cross-entropy"]
    loss = prog.kernels[1]
    assert ratio(sum(k.flops["tensor"] for k in prog.kernels), 2 * T * D * V + 2 * T * D) == 1.0
    # one exp per logit, one per row per chunk (rescale) and one log per row
    assert ratio(loss.flops["exp"], T * V + T * V / Bv + T) == 1.0
    # no probabilities and no logits in global memory: H per vocabulary chunk, W per token block
    assert {t.array for t in loss.transfers if "global" in t.boundary} == {"H", "W", "target", "loss"}
    expected = 2 * T * D + 2 * T * D + 4 * T + 2 * T * D * V / Bv + 2 * D * V * T / Bt + 4 * T + 4 * T
    assert ratio(prog.global_bytes, expected) == 1.0


def test_attention_backward():
    B, H, N, M, d, Bc = S("B", "H", "N", "M", "d", "Bc")
    prog = derive(library.attention_backward())
    dot, main, convert = prog.kernels
    assert ratio(main.flops["tensor"], 10 * B * H * N * M * d) == 1.0   # S, dP, dV, dK, dQ
    assert ratio(main.flops["exp"], B * H * N * M) == 1.0               # P recomputed from LSE
    assert ratio(dot.flops["fp32"], 2 * B * H * N * d) == 1.0
    tiles = M / Bc
    expected = (2 * 2 * B * H * N * d + 4 * B * H * N                    # D = rowsum(dO * O)
                + 4 * B * H * N * d + (4 + 2) * B * H * N * d            # the fp32 accumulator zeroed, converted
                + 2 * 2 * B * H * M * d                                  # K, V once
                + 2 * 2 * B * H * N * d * tiles + 2 * 4 * B * H * N * tiles  # Q, dO, LSE, D per key tile
                + 2 * 2 * B * H * M * d                                  # dK, dV once
                + 2 * 4 * B * H * N * d * tiles)                         # dQ: fp32 atomic read-modify-write
    assert ratio(prog.global_bytes, expected) == 1.0
