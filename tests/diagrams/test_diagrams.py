"""Diagrams, relabelings and the general derivation (issue: diagrams and derivation)."""
import random

import numpy as np
import pytest
import sympy as sp

from diagrams import library
from diagrams.core import DiagramError
from iomodel.derive import derive
from iomodel.symbolic import TriangleTiles, sym, triangle_tiles_numeric

a, b, c, ta, tc = (sym(n) for n in ("a", "b", "c", "ta", "tc"))


def test_tiled_matmul_transfers_are_exact():
    k = derive(library.tiled_matmul()).kernels[0]
    expected = a * b * c * (1 / ta + 1 / tc) + a * c
    assert sp.simplify(k.global_elements - expected) == 0
    # reads and writes separately: A once per column tile, B once per row tile, C once
    reads = k.elements_at("global->smem")
    assert sp.simplify(reads - a * b * c * (1 / ta + 1 / tc)) == 0


def test_tiled_matmul_minimum_under_fast_memory():
    """Square output tiles t x t under a capacity of M elements: t = sqrt(M) gives 2abc/sqrt(M) + ac."""
    k = derive(library.tiled_matmul()).kernels[0]
    M, t = sp.Symbol("Mcap", positive=True), sp.Symbol("t", positive=True)
    footprint = k.smem_elements.subs({ta: t, tc: t, sym("kb"): 1})  # t^2 + 2t: the accumulator dominates
    t_star = sp.solve(sp.Eq(sp.Poly(footprint, t).LC() * t ** 2, M), t)[0]
    transfers = k.global_elements.subs({ta: t, tc: t})
    assert sp.simplify(transfers.subs(t, t_star) - (2 * a * b * c / sp.sqrt(M) + a * c)) == 0
    # and the unconstrained derivative is negative: larger tiles always move less, so the capacity binds
    assert sp.simplify(sp.diff(transfers, t)).could_extract_minus_sign()


def test_stream_through_softmax_fails_and_names_the_operation():
    att = library.attention()
    with pytest.raises(DiagramError, match="operation 'exp'"):
        att.stream("m", "Bc")
    streamed = att.online_softmax().stream("m", "Bc")
    assert any(p.kind == "stream" and p.axis_name == "m" for p in streamed.partitions)
    assert att.partitions == ()  # relabelings never touch the original
    assert len(att.ops) == 6


def test_relabel_errors_are_clear():
    att = library.attention(seqlen=64)
    with pytest.raises(DiagramError, match="no axis 'q'"):
        att.group("q", 4)
    with pytest.raises(DiagramError, match="exceeds"):
        att.group("n", 128)
    with pytest.raises(DiagramError, match="no softmax"):
        library.matmul().online_softmax()


def test_unfused_attention_transfers():
    B, H, N, d = (sym(n) for n in "BHNd")
    prog = library.unfused_attention(kv_seqlen="N")
    cost = derive(prog)
    per_head = sp.simplify(cost.global_bytes / (B * H))
    bm, bn = sym("bm"), sym("bn")
    # scores: Q, K re-read per tile, S (fp32) written; softmax: S read twice (two passes), P (bf16) written;
    # output: P, V read per tile, O written
    expected = (2 * (N * d * N / bn + N * N * d / bm) + 4 * N * N) + (2 * 4 * N * N + 2 * N * N) + \
               (2 * (N * N * d / bn + N * N * d / bm) + 2 * N * d)
    assert sp.simplify(per_head - expected) == 0
    # Theta(N d + N^2): the N^2 terms survive any tile choice
    lead = sp.limit(per_head.subs({bm: 64, bn: 64, d: 64}) / N ** 2, N, sp.oo)
    assert lead > 0 and lead.is_finite


def test_flash_attention_transfers_and_flops():
    B, H, N, M, d, Br, Bc = (sym(n) for n in ("B", "H", "N", "M", "d", "Br", "Bc"))
    k = derive(library.flash_attention()).kernels[0]
    by = {(t.array, t.boundary): t for t in k.transfers}
    assert sp.simplify(by["Q", "global->smem"].elements - B * H * N * d) == 0          # Q once
    assert sp.simplify(by["O", "reg->global"].elements - B * H * N * d) == 0           # O once
    for x in ("K", "V"):                                                               # K, V once per query tile
        assert sp.simplify(by[x, "global->smem"].elements - B * H * M * d * N / Br) == 0
    assert sp.simplify(k.flops["tensor"] - 4 * B * H * N * M * d) == 0
    # one exp per score plus one per row per key chunk for the rescale
    assert sp.simplify(k.flops["exp"] - (B * H * N * M + B * H * N * M / Bc)) == 0


def test_flash_attention_io_is_theta_n2d2_over_m():
    """With the query tile sized from fast memory (Br = Mcap / (4d)), traffic -> 2 N^2 d^2 * 4 / Mcap + O(Nd)."""
    N, d, Br = sym("N"), sym("d"), sym("Br")
    Mcap = sp.Symbol("Mcap", positive=True)
    k = derive(library.flash_attention(batch=1, heads=1, kv_seqlen="N")).kernels[0]
    traffic = k.global_elements.subs(Br, Mcap / (4 * d))
    ratio = sp.limit(traffic / (N ** 2 * d ** 2 / Mcap), N, sp.oo)
    assert ratio == 8   # K and V: 2 * N * d * N / Br with Br = Mcap/(4d)
    unfused = derive(library.unfused_attention(batch=1, heads=1, kv_seqlen="N")).kernels
    assert all(sp.limit(kk.global_elements / N ** 2, N, sp.oo) > 0 for kk in unfused[1:2])


def test_triangle_tiles_matches_brute_force():
    rng = random.Random()
    for _ in range(40):
        n, m = rng.randint(1, 300), rng.randint(1, 300)
        br, bc = rng.choice([1, 3, 16, 32, 64]), rng.choice([1, 5, 16, 48, 64])
        off = m - n
        brute = 0
        for i in range(0, n, br):
            for j in range(0, m, bc):
                rows = range(i, min(i + br, n))
                if any(col <= r + off for r in rows for col in range(j, min(j + bc, m))):
                    brute += 1
        assert int(triangle_tiles_numeric(n, br, bc, m, off)) == brute
        assert TriangleTiles(n, br, bc, m, off) == brute


def test_causal_halves_work_with_exact_straddling_count():
    n_, br, bc, d_ = 4096, 128, 64, 128
    vals = {"B": 2, "H": 3, "N": n_, "M": n_, "d": d_, "Br": br, "Bc": bc, "w": 4}
    full = derive(library.flash_attention(), exact=False).kernels[0]
    causal = derive(library.flash_attention(causal=True), exact=False).kernels[0]
    sub = {sym(k): v for k, v in vals.items()}
    f_full = float(full.flops["tensor"].subs(sub))
    f_causal = float(causal.flops["tensor"].subs(sub))
    tiles = n_ // br
    # tile i visits (i+1)*br/bc chunks: sum = (br/bc) * T(T+1)/2
    pairs = (br // bc) * tiles * (tiles + 1) // 2
    assert f_causal == 2 * 3 * pairs * br * bc * d_ * 4
    assert 0.5 < f_causal / f_full < 0.52
    kv_full = float(full.bytes_at("global->smem").subs(sub))
    kv_causal = float(causal.bytes_at("global->smem").subs(sub))
    assert 0.5 < kv_causal / kv_full < 0.53


def test_per_unit_mask_counts_each_units_own_chunks():
    """With a per-unit mask a register-level unit (here 64-row warpgroups of a larger block) runs only
    the key chunks holding one of its own live scores, rows past N none; the block still loads every
    chunk one of its rows needs. Brute force over blocks, units and chunks, random sizes."""
    rng = random.Random()
    cases = [(4096, 3, 128)] + [(rng.choice([700, 1000, 4096]), rng.choice([2, 3]), rng.choice([64, 96, 128]))
                                for _ in range(3)]
    for n_, units, bc in cases:
        d_ = 64
        br = 64 * units
        vals = {"B": 1, "H": 2, "N": n_, "M": n_, "d": d_, "Br": br, "Bc": bc, "w": units}
        sub = {sym(k): v for k, v in vals.items()}
        kern = lambda per_unit: derive(library.flash_attention(causal=True, unit_threads=128, skip_per_unit=per_unit),
                                       exact=False).kernels[0]
        pruned, whole = kern(True), kern(False)
        unit_chunks = block_chunks = 0
        for i in range(0, n_, br):
            block_chunks += -(-min(i + br, n_) // bc)  # chunks up to the block's last row (causal, M = N)
            for u in range(i, i + br, 64):
                if u < n_:
                    unit_chunks += -(-min(u + 64, n_) // bc)
        assert float(pruned.flops["tensor"].subs(sub)) == 2 * 2 * unit_chunks * 64 * bc * d_ * 2
        assert float(whole.flops["tensor"].subs(sub)) == 2 * 2 * block_chunks * br * bc * d_ * 2
        # loads into SMEM are the block's either way
        assert float(pruned.bytes_at("global->smem").subs(sub)) == float(whole.bytes_at("global->smem").subs(sub))
        assert unit_chunks * 64 <= block_chunks * br
        if (n_, units, bc) == (4096, 3, 128):  # 192x128 tiles: 1.031x instead of 1.125x of the triangle
            assert unit_chunks * 64 * bc / (n_ * (n_ + 1) / 2) == pytest.approx(1.031, abs=1e-3)
            assert block_chunks * br * bc / (n_ * (n_ + 1) / 2) == pytest.approx(1.125, abs=1e-3)


def test_gqa_kv_transfers_shrink_by_group_when_shared():
    vals = {sym("B"): 1, sym("Hk"): 2, sym("g"): 4, sym("N"): 2048, sym("M"): 2048, sym("d"): 128,
            sym("Br"): 128, sym("Bc"): 64, sym("w"): 4}

    def kv_bytes(share):
        k = derive(library.flash_attention(kv_heads="Hk", share_kv_heads=share)).kernels[0]
        return sum(float(t.nbytes.subs(vals)) for t in k.transfers if t.array in ("K", "V") and t.boundary == "global->smem")

    separate, shared = kv_bytes(False), kv_bytes(True)
    assert separate / shared == pytest.approx(4.0)
    mha = derive(library.flash_attention()).kernels[0]
    mha_kv = sum(float(t.nbytes.subs({**vals, sym("H"): 8})) for t in mha.transfers
                 if t.array in ("K", "V") and t.boundary == "global->smem")
    assert separate == pytest.approx(mha_kv)  # sharing K/V heads without sharing blocks saves nothing


def test_smem_and_register_footprint():
    k = derive(library.flash_attention(stages=2)).kernels[0]
    Br, Bc, d, w = (sym(n) for n in ("Br", "Bc", "d", "w"))
    assert sp.simplify(k.smem_bytes - (Br + 2 * 2 * Bc) * d * 2) == 0
    # O accumulator + S tile + running max and sum, fp32, per warp of 32 threads
    assert sp.simplify(k.regs_per_thread - (Br / w) * (d + Bc + 2) / 32) == 0


def test_composition_fuses_matmul_and_softmax():
    from diagrams.core import Array, Contraction, axis
    from diagrams.diagram import Diagram, Program
    n, m, d = axis("n"), axis("m"), axis("d")
    Q, K, S = Array("Q", (n, d)), Array("K", (m, d)), Array("S", (n, m), "fp32")
    scores = Diagram("scores", (Contraction("S=Q.K", (Q, K), S),), ("S",))
    fused = scores.compose(library.softmax())
    assert [x.name for x in fused.inputs()] == ["Q", "K"] and fused.outputs == ("P",)
    N, M, D = sym("n"), sym("m"), sym("d")
    two_kernels = derive(Program("seq", (scores, library.softmax())))
    one_kernel = derive(fused)
    # fusing removes the fp32 scores' round trip through global memory: 4 bytes written + 4 read per score
    saved = sp.simplify(two_kernels.global_bytes - one_kernel.global_bytes)
    assert saved == 8 * N * M


def test_pseudocode_of_flash_attention():
    from iomodel.pseudocode import pseudocode
    text = pseudocode(library.flash_attention(), {"B": 2, "H": 4, "N": 1024, "M": 1024, "d": 64, "Br": 128, "Bc": 64, "w": 4})
    lines = text.splitlines()
    assert any("parallel for n0 in 0..N = 1024 step Br = 128" in ln and "thread blocks" in ln for ln in lines)
    loop = next(i for i, ln in enumerate(lines) if ln.strip().startswith("for m0"))
    q_load = next(i for i, ln in enumerate(lines) if "load Q" in ln)
    k_load = next(i for i, ln in enumerate(lines) if "load K" in ln)
    assert q_load < loop < k_load   # Q hoisted out of the key stream, K loaded inside it
    assert "16.0 KiB" in lines[q_load]      # 128 x 64 bf16
    assert any("warps" in ln and "step Br/w = 32" in ln for ln in lines)
    assert any("rescale" in ln for ln in lines)
    assert any("store O" in ln for ln in lines)


def test_render_svg_shows_wires_boxes_partitions_and_levels():
    from diagrams.render import render_html, render_svg
    svg = render_svg(library.flash_attention(causal=True))
    for needle in ("S=Q.K", "O=P.V", "stream m by Bc @smem", "group n by Br @smem", "@ smem", "@ global", "mask m"):
        assert needle in svg
    page = render_html(library.unfused_attention())
    assert page.startswith("<!DOCTYPE html>") and "kernel softmax" in page and "<script" not in page


def test_random_sizes_consistent_between_exact_and_rounded():
    """With tiles dividing the sizes, the rounded (hardware) derivation equals the exact one."""
    rng = np.random.default_rng()
    exact = derive(library.flash_attention(), exact=True).kernels[0]
    rounded = derive(library.flash_attention(), exact=False).kernels[0]
    for _ in range(5):
        br, bc = int(rng.choice([64, 128])), int(rng.choice([32, 64]))
        n = int(rng.integers(1, 8)) * 128
        sub = {sym("B"): int(rng.integers(1, 4)), sym("H"): int(rng.integers(1, 9)), sym("N"): n, sym("M"): n,
               sym("d"): 64, sym("Br"): br, sym("Bc"): bc, sym("w"): 4}
        assert float(exact.global_bytes.subs(sub)) == float(rounded.global_bytes.subs(sub))
        assert float(exact.flops["exp"].subs(sub)) == float(rounded.flops["exp"].subs(sub))
