"""The sync style's overlap: a warp of the same block on a scheduler hides a warp's phases less than a warp of
another block (it meets it at every barrier), ``ExecutionPlan.block_warp_overlap``; measured, d = 256's 64x64 tiles
of four warps (two blocks an SM) ran 2 to 3% faster than 128x96 tiles of eight (one block), and d = 192's 64x96 tiles
of four warps at parity with FlashAttention-2 where the eight-warp pick was 7% behind
(validation/results/profile-sm80-tiles-h200-2026-11-28)."""
import dataclasses

import numpy as np
import pytest

from iomodel import api, families
from iomodel.hardware import load_spec
from iomodel.perf import _compute_time
from iomodel.styles import MMA_SYNC


def _terms(rng):
    t = {u: rng.uniform(1e-4, 1e-3, 3) for u in ("tensor", "fp32", "exp", "smem")}
    return t, {"blocks": np.full(3, 1e4), "steps_total": np.full(3, 1e6), "units": np.ones(3)}


@pytest.mark.parametrize("seed", range(3))
def test_two_blocks_of_four_warps_hide_more_than_one_block_of_eight(seed):
    rng = np.random.default_rng(seed)
    t, v = _terms(rng)
    spec, plan = load_spec("h100-sxm"), MMA_SYNC.plan
    eight = _compute_time(t, v, spec, plan, np.full(3, 256), np.full(3, 1))
    two_fours = _compute_time(t, v, spec, plan, np.full(3, 128), np.full(3, 2))
    assert np.all(eight > two_fours)
    # with a block's own warps counted as another block's, the two are one amount of overlap
    same = dataclasses.replace(plan, block_warp_overlap=1.0)
    assert np.allclose(_compute_time(t, v, spec, same, np.full(3, 256), np.full(3, 1)),
                       _compute_time(t, v, spec, same, np.full(3, 128), np.full(3, 2)))


@pytest.mark.parametrize("warps", [1, 2, 4])
def test_blocks_of_at_most_a_warp_a_scheduler_are_not_touched(warps):
    t, v = _terms(np.random.default_rng(warps))
    spec = load_spec("h100-sxm")
    threads, resident = np.full(3, 32 * warps), np.full(3, 3)
    times = [_compute_time(t, v, spec, dataclasses.replace(MMA_SYNC.plan, block_warp_overlap=x), threads, resident)
             for x in (0.0, 0.35, 1.0)]
    assert np.allclose(times[0], times[1]) and np.allclose(times[1], times[2])


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200-sxm"])
@pytest.mark.parametrize("causal", [False, True])
def test_the_pick_at_d_192_and_256_is_two_blocks_of_four_warps(gpu, causal):
    fam = families.get("flash_sm80")
    for d, want in ((256, "64x64 w4 s1"), (192, "64x96 w4 s1 qregs")):
        shape = dict(B=2, H=2048 // d, N_q=8192, N_k=8192, d=d, causal=causal, dtype="bf16")
        ranked = api.rank_configs("flash_sm80", gpu, shape, fam.shipped_for(shape))
        assert fam.label(ranked[0].config) == want
