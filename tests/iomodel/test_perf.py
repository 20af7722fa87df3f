"""Performance model and tile search (issue: hardware, performance model, tile search, CLI)."""
import dataclasses

import numpy as np
import pytest

from iomodel import families
from iomodel.api import predict, rank_configs
from iomodel.errors import ModelError
from iomodel.hardware import load_spec
from iomodel.peers import peer_prediction
from iomodel.perf import COMPUTE_TERMS, occupancy
from iomodel.problems import conventional_flops
from iomodel.tiles import search

FA2_D128 = dict(block_m=128, block_n=64, warps=4, stages=1, head_dim=128)


def shape(**kw):
    base = dict(B=4, H=16, N_q=4096, d=128, causal=False, dtype="bf16")
    base.update(kw)
    return base


def test_fa2_occupancy_on_a100_is_eight_warps():
    """FlashAttention on a Napkin: FA2 fits 8 warps per SM on Ampere (2 blocks of 4 warps, register-bound)."""
    p = predict("flash_sm80", "a100-sxm-80gb", shape(), FA2_D128, calibration=None)
    assert p.blocks_per_sm == 2
    assert p.blocks_per_sm * FA2_D128["warps"] == 8
    assert p.occupancy_limit == "registers"
    assert p.smem_bytes == (128 + 2 * 64) * 128 * 2


def test_occupancy_limits_from_each_resource():
    spec = load_spec("h100-sxm")
    occ, limit = occupancy(spec, np.array([128, 128, 1024, 32]), np.array([200_000, 1000, 0, 0]),
                           np.array([64, 255, 16, 16]))
    assert list(occ) == [1, 2, 2, 32]
    assert list(limit) == ["smem", "registers", "threads", "blocks"]


def test_prediction_terms_add_up_and_bottleneck_is_largest():
    p = predict("flash_sm80", "h100-sxm", shape(), FA2_D128)
    assert p.feasible and p.time_s > 0
    assert p.bottleneck == max(("tensor", "fp32", "exp", "smem", "hbm", "l2", "sync"), key=lambda k: p.terms[k])
    # the time is at least the busiest single term and at most the sum of all
    assert p.time_s >= max(p.terms.values()) - 1e-12
    assert p.time_s <= sum(p.terms.values()) + 1e-12
    assert p.tflops == pytest.approx(p.flops / p.time_s / 1e12)
    assert p.flops == 4 * 4 * 16 * 4096 * 4096 * 128


def test_causal_flops_convention_and_faster_prediction():
    full = predict("flash_sm80", "h100-sxm", shape(), FA2_D128)
    causal = predict("flash_sm80", "h100-sxm", shape(causal=True), FA2_D128)
    assert conventional_flops(shape(causal=True)) == pytest.approx(conventional_flops(shape()) / 2, rel=1e-3)
    assert 0.45 < causal.time_s / full.time_s < 0.6


def test_compute_bound_at_long_sequences_memory_bound_when_unfused():
    p = predict("flash_sm80", "h100-sxm", shape(N_q=16384, B=1), FA2_D128)
    assert p.bottleneck in ("tensor", "smem")
    u = predict("unfused", "h100-sxm", shape(), dict(block_m=128, block_n=128, block_k=32, warps=4, stages=2))
    assert u.bottleneck == "hbm"
    same = predict("flash_sm80", "h100-sxm", shape(), FA2_D128)
    assert u.time_s > 2 * same.time_s   # the N^2 round trips through HBM cost more than the fused kernel


def test_hopper_wgmma_beats_mma_sync_and_ampere_has_no_wgmma():
    h = predict("flash_sm90", "h100-sxm", shape(), dict(block_m=128, block_n=128, stages=2, consumers=2))
    a = predict("flash_sm80", "h100-sxm", shape(), FA2_D128)
    assert h.tflops > a.tflops
    with pytest.raises(ModelError, match="no wgmma"):
        predict("flash_sm90", "a100-sxm-80gb", shape(), dict(block_m=128, block_n=128, stages=2, consumers=2))


def test_infeasible_configs_carry_a_reason():
    big = predict("flash_sm80", "h100-sxm", shape(), dict(block_m=256, block_n=256, warps=4, stages=4))
    assert not big.feasible and "SMEM" in big.reason
    regs = predict("flash_sm80", "h100-sxm", shape(), dict(block_m=256, block_n=128, warps=2, stages=1))
    assert not regs.feasible and "registers" in regs.reason


def test_tile_search_ranks_and_explains_rejections():
    res = search("flash_sm80", "h100-sxm", shape(d=64))
    times = [p.time_s for p in res.ranked]
    assert times == sorted(times)
    reasons = {r.split(" ")[0] for _, r in res.rejected()}
    assert {"block_m", "SMEM", "registers"} <= reasons
    assert res.evaluated == len(families.get("flash_sm80").candidates(res.shape))
    # every ranked config obeys the mma.sync shape, and the kernel builds it
    for p in res.ranked:
        c = p.config
        assert (c.block_m // c.warps) % 16 == 0 and c.block_n % 16 == 0 and not c.problems()


def test_tile_search_is_vectorized(monkeypatch):
    """The whole candidate grid costs one model evaluation, whatever its size."""
    from iomodel import perf
    calls = []
    original = perf.CompiledKernel.evaluate

    def counting(self, values, shape=()):
        calls.append(np.broadcast_shapes(*(np.shape(v) for v in values.values())))
        return original(self, values, shape)

    monkeypatch.setattr(perf.CompiledKernel, "evaluate", counting)
    space = {"block_m": (64, 128, 256), "block_n": tuple(range(16, 2561, 16)), "warps": (1, 2, 4, 8),
             "stages": (1, 2, 3, 4)}
    fam = families.get("flash_sm80")
    monkeypatch.setitem(families.FAMILIES, "flash_sm80", dataclasses.replace(fam, space=space))
    r = search("flash_sm80", "h100-sxm", shape())
    assert r.evaluated == 3 * 160 * 4 * 4
    buildable = sum(1 for c in r.configs if not c.problems())
    assert buildable > 1000
    assert calls == [(buildable,)]


def test_rank_configs_for_kernels_and_peers():
    cands = [dict(block_m=bm, block_n=bn, warps=4, stages=2, head_dim=64) for bm in (64, 128) for bn in (32, 64, 128)]
    ranked = rank_configs("flash_sm80", "NVIDIA H100 80GB HBM3", shape(d=64), cands)
    assert len(ranked) >= 4 and ranked[0].time_s <= ranked[-1].time_s
    assert all(type(p.config).__name__ == "FlashConfig" for p in ranked)
    peer = peer_prediction("sdpa_flash", "h100-sxm", shape())
    assert peer.config.block_m == 128 and peer.config.block_n == 64
    assert peer_prediction("sdpa_cudnn", "h100-sxm", shape()) is None
    with pytest.raises(ModelError):
        rank_configs("flash_sm80", "h100-sxm", shape(d=64), [dict(block_m=64, block_n=32, warps=4, stages=2, head_dim=128)])


def test_bad_shapes_raise_one_line_errors():
    for bad, msg in ((dict(N_q=0), "N_q"), (dict(d=80), "head dim 80"), (dict(H=6, H_kv=4), "multiple"),
                     (dict(dtype="fp32"), "dtype")):
        with pytest.raises(ModelError, match=msg) as e:
            predict("flash_sm80", "h100-sxm", shape(**bad), FA2_D128)
        assert "\n" not in str(e.value)


def test_smem_read_by_the_tensor_instruction_overlaps_the_matrix_product(monkeypatch):
    """wgmma reads its SMEM operands itself: with `tensor_reads_smem` that traffic leaves the serialized
    sum of units (it still bounds the time as a unit of its own), so the prediction gets faster by
    exactly the SMEM term's share of that sum, and nothing else changes."""
    from iomodel import api

    cfg = dict(block_m=128, block_n=128, stages=2, consumers=2)
    rng = np.random.default_rng()
    s = shape(N_q=int(rng.choice([2048, 4096, 8192])), d=int(rng.choice([64, 128])))
    with_flag = predict("flash_sm90", "h100-sxm", s, cfg)
    fam = families.FAMILIES["flash_sm90"]
    monkeypatch.setitem(families.FAMILIES, "flash_sm90",
                        dataclasses.replace(fam, plan=dataclasses.replace(fam.plan, tensor_reads_smem=False)))
    api.family_model.cache_clear()
    try:
        without = predict("flash_sm90", "h100-sxm", s, cfg)
    finally:
        api.family_model.cache_clear()
    assert with_flag.terms == pytest.approx(without.terms)
    assert without.terms["smem"] > 0
    assert with_flag.time_s < without.time_s
    assert with_flag.time_s >= max(with_flag.terms[k] for k in ("tensor", "smem")) - 1e-12


def test_pipeline_fill_steps_add_the_unhidden_share_of_the_first_steps(monkeypatch):
    """`fill_steps` per block run without overlap: the compute time is the larger of the busiest unit's term
    and sum x (fill + (1 - fill) / hide) of the compute terms, with fill = fill_steps x blocks / stream
    steps, and the unit terms do not change."""
    from iomodel import api

    rng = np.random.default_rng()
    cfg = dict(block_m=128, block_n=int(rng.choice([64, 128])), stages=2, consumers=2)
    s = shape(N_q=int(rng.choice([1024, 4096])), d=128)
    fam = families.FAMILIES["flash_sm90"]
    preds = {}
    for fill in (0.0, 1.0, 3.0):
        monkeypatch.setitem(families.FAMILIES, "flash_sm90",
                            dataclasses.replace(fam, plan=dataclasses.replace(fam.plan, fill_steps=fill)))
        api.family_model.cache_clear()
        preds[fill] = predict("flash_sm90", "h100-sxm", s, cfg)
    api.family_model.cache_clear()
    t = preds[0.0].terms
    assert preds[1.0].terms == pytest.approx(t) and preds[3.0].terms == pytest.approx(t)
    n_blocks = s["B"] * s["H"] * -(-s["N_q"] // 128)
    steps = n_blocks * -(-s.get("N_k", s["N_q"]) // cfg["block_n"])
    total = t["tensor"] + t["fp32"] + t["exp"]  # wgmma reads SMEM under the product
    hide = min(1 + fam.plan.interleave_slope, fam.plan.interleave_max)
    busiest = max(t[u] for u in COMPUTE_TERMS)
    for fill in (1.0, 3.0):
        f = min(fill * n_blocks / steps, 1.0)
        want = max(busiest, total * (f + (1 - f) / hide)) - max(busiest, total / hide)
        assert preds[fill].time_s - preds[0.0].time_s == pytest.approx(want, rel=1e-6, abs=1e-12)
    # the shapes drawn leave the sum above the busiest unit once the first steps are unhidden
    assert preds[3.0].time_s > preds[0.0].time_s
