"""Band masks, their intersection and sliding-window attention (issue 14: masks)."""
import random

import numpy as np
import pytest

from diagrams import library
from diagrams.core import DiagramError
from iomodel.derive import derive
from iomodel.symbolic import BandTiles, band_tiles_numeric, evaluate, sym


def _brute_pairs(rows, row_tile, col_chunk, cols, lower, upper):
    """(row tile, column chunk) pairs with a live point, by looking at every point."""
    count = 0
    for i in range(0, rows, row_tile):
        for j in range(0, cols, col_chunk):
            if any(r + lower <= c <= r + upper for r in range(i, min(i + row_tile, rows))
                   for c in range(j, min(j + col_chunk, cols))):
                count += 1
    return count


def test_band_tiles_match_brute_force():
    rng = random.Random()
    for _ in range(60):
        n, m = rng.randint(1, 200), rng.randint(1, 200)
        br, bc = rng.choice([1, 3, 16, 32, 64]), rng.choice([1, 5, 16, 48, 64])
        lower = rng.randint(-250, 150)
        upper = lower + rng.randint(0, 300) if rng.random() < 0.9 else lower - rng.randint(1, 5)  # some empty bands
        brute = _brute_pairs(n, br, bc, m, lower, upper)
        assert int(band_tiles_numeric(n, br, bc, m, lower, upper)) == brute, (n, br, bc, m, lower, upper)
        assert BandTiles(n, br, bc, m, lower, upper) == brute


def test_band_tiles_vectorized_over_configurations():
    """The lambdified count takes numpy arrays of tiles, as the tile search does."""
    Br, Bc = sym("Br"), sym("Bc")
    expr = {"pairs": BandTiles(sym("N"), Br, Bc, sym("N"), -sym("W") + 1, 0)}
    brs, bcs = np.array([16, 32, 64, 48]), np.array([32, 16, 64, 80])
    got = evaluate(expr, {"N": 500, "W": 70, "Br": brs, "Bc": bcs})["pairs"]
    assert list(got) == [_brute_pairs(500, int(r), int(c), 500, -69, 0) for r, c in zip(brs, bcs)]


def _tensor_flops(d, vals):
    k = derive(d, exact=False).kernels[0]
    return float(k.flops["tensor"].subs({sym(a): v for a, v in vals.items()}))


def test_masks_on_one_pair_intersect_in_any_order():
    vals = {"B": 1, "H": 2, "N": 640, "M": 640, "d": 64, "Br": 64, "Bc": 32, "w": 4}
    base = library.flash_attention()
    causal_then_window = base.mask("n", "m", 0).mask("n", "m", None, lower=-99)
    window_then_causal = base.band("n", "m", lower=-99).band("n", "m", upper=0)
    one_band = base.band("n", "m", -99, 0)
    looser = one_band.band("n", "m", -300, 50)  # a wider band changes nothing
    flops = {_tensor_flops(d, vals) for d in (causal_then_window, window_then_causal, one_band, looser)}
    assert len(flops) == 1
    pairs = _brute_pairs(640, 64, 32, 640, -99, 0)
    assert flops.pop() == 4 * 2 * pairs * 64 * 32 * 64      # 4 B H d x pairs x tile points
    tighter = one_band.band("n", "m", -30, -5)
    assert _tensor_flops(tighter, vals) == 4 * 2 * _brute_pairs(640, 64, 32, 640, -30, -5) * 64 * 32 * 64


def test_bad_masks_raise():
    att = library.flash_attention()
    with pytest.raises(DiagramError, match="keeps no point"):
        att.band("n", "m", lower=5, upper=2)
    with pytest.raises(DiagramError, match="different row axes"):
        att.mask("n", "m", 0).mask("d", "m", 0)
    with pytest.raises(DiagramError, match="upper bound"):
        att.mask("n", "m", None)
    with pytest.raises(DiagramError, match="no axis 'q'"):
        att.band("q", "m", -4, 0)


def test_sliding_window_counts_the_window_not_the_triangle():
    """Acceptance: N = 16384, W = 1024. Executed tensor FLOPs = 4 B H d x (live points + tile padding),
    where the padding is what the visited tile pairs hold beyond the live points (whole tiles, straddling
    ones included); the live-pair count is checked independently. The single causal mask counted ~8x."""
    rng = random.Random()
    n_, w_, d_ = 16384, 1024, 128
    br, bc = rng.choice([64, 128, 192]), rng.choice([64, 128])
    b_, h_ = rng.randint(1, 3), rng.randint(1, 16)
    vals = {"B": b_, "H": h_, "N": n_, "M": n_, "d": d_, "W": w_, "Br": br, "Bc": bc, "w": 4}
    got = _tensor_flops(library.sliding_window_attention(), vals)
    live = sum(min(i + 1, w_) for i in range(n_))
    pairs = 0  # query tile i sees keys from its first row's window start to its last row
    for i0 in range(0, n_, br):
        lo, hi = max(0, i0 - w_ + 1), min(n_, i0 + br) - 1
        pairs += hi // bc - lo // bc + 1
    padding = pairs * br * bc - live
    assert got == 4 * b_ * h_ * d_ * (live + padding)
    assert got == pytest.approx(4 * b_ * h_ * d_ * (live + padding), rel=0.03)
    assert 1.0 < got / (4 * b_ * h_ * d_ * live) < 1.4       # the window plus whole-tile padding
    causal = _tensor_flops(library.flash_attention(causal=True), vals)
    assert causal / got > 5                                   # not the triangle's 8x
    assert causal / (4 * b_ * h_ * d_ * live) == pytest.approx(8.4, abs=0.2)


def test_sliding_window_per_unit_counts_each_units_own_chunks():
    """Per-unit band: each 64-row unit visits the chunks its own rows' windows touch (brute force)."""
    rng = random.Random()
    n_, w_, units, bc = rng.choice([700, 1024, 1500]), rng.choice([100, 256, 333]), rng.choice([2, 3]), 64
    br = 64 * units
    vals = {"B": 1, "H": 1, "N": n_, "M": n_, "d": 64, "W": w_, "Br": br, "Bc": bc, "w": units}
    d = library.sliding_window_attention(unit_threads=128, skip_per_unit=True)
    expect = _brute_pairs(n_, 64, bc, n_, -(w_ - 1), 0) * 64 * bc * 64 * 4
    assert _tensor_flops(d, vals) == expect
    whole = _tensor_flops(library.sliding_window_attention(unit_threads=128), vals)
    assert whole == _brute_pairs(n_, br, bc, n_, -(w_ - 1), 0) * br * bc * 64 * 4 >= expect


def test_sliding_window_pseudocode_and_picture_show_both_bounds():
    from diagrams.render import render_svg
    from iomodel.pseudocode import pseudocode
    d = library.sliding_window_attention()
    text = pseudocode(d, {"B": 1, "H": 2, "N": 4096, "M": 4096, "d": 64, "W": 512, "Br": 128, "Bc": 64, "w": 4})
    loop = next(ln for ln in text.splitlines() if ln.strip().startswith("for m0"))
    assert "max(0, n0 + M - N - W + 1)" in loop and "min(M = 4096, n0 + Br + M - N)" in loop
    svg = render_svg(d)
    assert "mask m &lt;= n + M - N" in svg and "mask n + M - N - W + 1 &lt;= m" in svg


def test_sliding_window_is_symbolic_and_shrinks_with_the_window():
    k = derive(library.sliding_window_attention(), exact=False).kernels[0]
    assert {"W", "N", "M", "Br", "Bc"} <= {s.name for s in k.flops["tensor"].free_symbols}
    out = evaluate({"f": k.flops["tensor"]}, {"B": 1, "H": 1, "N": 8192, "M": 8192, "d": 64, "Br": 128, "Bc": 64,
                                              "W": np.array([128, 512, 2048, 8192])})["f"]
    assert np.all(np.diff(out) > 0)
    full = derive(library.flash_attention(causal=True), exact=False).kernels[0].flops["tensor"]
    assert out[-1] == float(full.subs({sym("B"): 1, sym("H"): 1, sym("N"): 8192, sym("M"): 8192, sym("d"): 64,
                                       sym("Br"): 128, sym("Bc"): 64}))  # a window as wide as N is causal
