"""Register liveness, the 2-D warp grid and register-level groups over a streamed axis."""
import sympy as sp

from diagrams import library
from diagrams.core import Array, Map, axis
from diagrams.diagram import Diagram
from iomodel import families
from iomodel.derive import LoopNest, derive
from iomodel.registers import PEAK, live_words
from iomodel.symbolic import sym

MMA_K = 16  # k of mma.sync m16n8k16 for 16-bit inputs


def _regs_with_plan(k, plan):
    """What the mma.sync plan adds: the resident data, its k-steps of operand fragments and its overhead."""
    frag = k.fragment_bytes_per_k / (4 * k.unit_threads)
    return k.regs_per_thread + plan.fragment_buffers * MMA_K * frag + plan.reg_overhead


def test_gemm_128x256_with_a_2x4_warp_grid_fits_in_232_registers():
    plan = families.get("matmul_sm80").plan
    sizes = dict(a=4096, b=4096, c=4096)
    grid = derive(library.tiled_matmul(128, 256, 32, stages=3, warps=8, warps_c=4, **sizes)).kernels[0]
    rows = derive(library.tiled_matmul(128, 256, 32, stages=3, warps=8, **sizes)).kernels[0]
    # each warp holds a 64 x 64 fp32 accumulator: 128 registers a thread; fragments (64 + 64) x 2 B per k
    assert grid.units_per_block == 8 and grid.regs_per_thread == 128
    assert grid.fragment_bytes_per_k / (4 * 32) == 2
    assert _regs_with_plan(grid, plan) == 232
    # warps along the rows only: 16 x 256 accumulators, fragments (16 + 256) x 2 B per k
    assert rows.regs_per_thread == 128 and _regs_with_plan(rows, plan) == 304


def test_an_intermediate_is_live_from_its_producer_to_its_last_consumer():
    n, m = axis("n"), axis("m")
    x = Array("x", (n, m), "fp32")
    a, b, c = (Array(name, (n, m), "fp32") for name in "abc")
    chain = Diagram("chain", (Map("f", (x,), a), Map("g", (a,), b), Map("h", (b,), c)), ("c",))
    d = chain.group("n", "tn").group("n", 1, "reg")
    k = derive(d).kernels[0]
    M = sym("m")
    # a dies when g has run: at most two tiles are live at once, not three
    assert [w for _, w in live_words(d, LoopNest(d, True))] == [M, 2 * M, 2 * M]
    assert sp.simplify(k.regs_per_thread - 2 * M / 32) == 0
    assert [r.array for r in k.residents if r.level == "reg"] == [PEAK]


def test_attention_backward_holds_the_peak_not_every_intermediate():
    main = library.attention_backward().kernels[1]
    k = derive(main).kernels[0]
    Br, Bc, d, w = sym("Br"), sym("Bc"), sym("d"), sym("w")
    tile = Br * Bc / w                      # one score-shaped tile of a warp
    everything = (4 * tile + 2 * tile + 4 * tile + 2 * tile) / 4 + 2 * Bc * d / w + Br * d
    # S, P, dP, dS are never all live: beside the dV and dK accumulators the peak is either dS = P (dP - D)
    # (P, dP and dS: 2 tiles of words) or dQ's partial (Br x d fp32) with dS
    peak = sp.Max(2 * tile, tile / 2 + Br * d) + 2 * Bc * d / w
    assert sp.simplify(k.regs_per_thread - peak / 32) == 0
    values = {Br: 64, Bc: 128, d: 128, w: 4}
    assert float(k.regs_per_thread.subs(values)) == 544 < float((everything / 32).subs(values))


def test_flash_attention_registers_unchanged():
    k = derive(library.flash_attention(stages=2)).kernels[0]
    Br, Bc, d, w = (sym(n) for n in ("Br", "Bc", "d", "w"))
    assert sp.simplify(k.regs_per_thread - (Br / w) * (d + Bc + 2) / 32) == 0


def test_register_group_over_a_streamed_axis_splits_the_chunk():
    """Keys streamed in chunks of Bc, each chunk split over 2 warps: 2 units, not M / (Bc/2)."""
    Bc = sym("Bc")
    att = (library.attention().group("b", 1).group("h", 1).group("n", "Br").online_softmax()
           .stream("m", Bc, "smem").group("m", Bc / 2, "reg").stage("K", "smem").stage("V", "smem"))
    k = derive(att).kernels[0]
    B, H, N, M, d, Br = (sym(n) for n in ("B", "H", "N", "M", "d", "Br"))
    assert k.units_per_block == 2 and k.threads_per_block == 64
    # each warp reads its half of every K chunk: K moves into registers once per block, not 256x that
    k_reads = sum(t.elements for t in k.transfers if t.array == "K" and t.boundary == "smem->reg")
    assert sp.simplify(k_reads - B * H * (N / Br) * M * d) == 0
    assert sp.simplify(k.regs_per_thread - (Br * Bc / 2 + Br * d + 2 * Br) / 32) == 0
