"""flash_decode_sm80: the split-KV decode kernel's family (config, SMEM, parts, combine kernel, time, CLI)."""
import dataclasses
import json
import random
import time

import pytest

from iomodel import families
from iomodel.api import predict, rank_configs
from iomodel.chooser import choose
from iomodel.errors import ModelError
from iomodel.families.flash_decode_sm80 import PARTS, SHIPPED, DecodeConfig, row_blocks, rows_tile
from iomodel.hardware import load_calibration, resolve_gpu
from iomodel.tiles import search

NAME = "flash_decode_sm80"
GPU = "h100-sxm"
SMALL = dict(B=1, H=32, H_kv=8, N_q=1, N_k=8192, d=128)        # one sequence: the parts must fill the chip
BATCHED = dict(B=64, H=32, H_kv=8, N_q=1, N_k=32768, d=128)    # 512 CTAs with one part already
CACHE_256MIB = dict(B=4, H=32, H_kv=8, N_q=1, N_k=16384, d=128)  # K and V: 2 x 4 x 8 x 16384 x 128 x 2 B


def kv_bytes(s):
    return 2 * s["B"] * s["H_kv"] * s["N_k"] * s["d"] * 2


def test_registered_with_its_config_and_shipped_parts():
    fam = families.get(NAME)
    assert fam.config_type is DecodeConfig and fam.problem == "attention" and fam.head_dims == (64, 128)
    assert fam.space["parts"] == PARTS and fam.bound == {"head_dim": "d"}
    tiles = {(c.block_n, c.warps, c.stages, c.head_dim) for c in SHIPPED}
    assert tiles == {(64, 4, 3, 64), (64, 4, 3, 128), (64, 4, 4, 64), (64, 4, 4, 128), (128, 4, 2, 64),
                     (128, 4, 2, 128)}
    for t in tiles:   # every parts value ships for every compiled kernel (parts is a launch parameter)
        assert sorted(c.parts for c in SHIPPED if (c.block_n, c.warps, c.stages, c.head_dim) == t) == list(PARTS)
    assert {1, 2, 4, 8, 16, 32, 64, 128} <= set(PARTS)


@pytest.mark.parametrize("cfg, needle", [
    (DecodeConfig(96, 4, 3, 1, 128), "block_n"), (DecodeConfig(64, 8, 3, 1, 128), "multiple of 16"),
    (DecodeConfig(64, 3, 3, 1, 128), "warps"), (DecodeConfig(64, 4, 1, 1, 128), "stages"),
    (DecodeConfig(64, 4, 5, 1, 128), "stages"), (DecodeConfig(64, 4, 3, 0, 128), "parts"),
    (DecodeConfig(64, 4, 3, 1, 256), "head_dim"),
])
def test_config_problems_name_the_field(cfg, needle):
    problems = cfg.problems()
    assert problems and any(needle in p for p in problems), problems


def test_config_binds_head_dim_and_checks_it():
    fam = families.get(NAME)
    parts = random.choice(PARTS)
    cfg = fam.config(dict(block_n=128, warps=8, stages=2, parts=parts), SMALL)
    assert cfg == DecodeConfig(128, 8, 2, parts, 128) and cfg.threads == 256 and cfg.problems() == []
    with pytest.raises(ModelError, match="does not match"):
        fam.config(dataclasses.replace(cfg, head_dim=64), SMALL)
    with pytest.raises(ModelError, match="multiple of 16"):
        fam.config(dict(block_n=64, warps=8, stages=2, parts=1), SMALL)


def test_rows_pack_a_kv_heads_queries():
    assert [rows_tile(n) for n in (1, 4, 16, 17, 32, 64)] == [16, 16, 16, 32, 32, 32]
    assert [row_blocks(n) for n in (1, 16, 17, 32, 33, 256)] == [1, 1, 1, 1, 2, 8]


@pytest.mark.parametrize("g, n_q", [(4, 1), (16, 1), (4, 8), (16, 16)])
def test_smem_is_the_documented_formula(g, n_q):
    """The config's SMEM, rows*head_dim*2 + stages*2*block_n*head_dim*2, is what the model derives from the
    diagram for every configuration it ranks (the warps' merge reuses the ring)."""
    shape = dict(B=2, H=8 * g, H_kv=8, N_q=n_q, N_k=4096, d=random.choice((64, 128)))
    rows = rows_tile(g * n_q)
    res = search(NAME, GPU, shape, top=10 ** 6)
    assert res.ranked
    for p in res.ranked:
        c = p.config
        assert c.smem_bytes(rows) == rows * c.head_dim * 2 + c.stages * 2 * c.block_n * c.head_dim * 2
        assert p.kernels[0]["smem_bytes"] == c.smem_bytes(rows), c


def test_one_sequence_picks_parts_that_keep_the_hbm_busy():
    """One sequence (8 KV heads): one part a head keeps 8 CTAs' loads in flight, far from what the HBM
    needs busy (Little's law with the calibration's latency); the pick splits until it is busy."""
    best = choose([NAME], GPU, SMALL)
    assert best.config.parts >= 8, best.config
    assert best.bottleneck == "hbm"
    one = predict(NAME, GPU, SMALL, dataclasses.replace(best.config, parts=1))
    assert one.time_s > 4 * best.time_s


def test_a_large_batch_picks_one_or_two_parts():
    best = choose([NAME], GPU, BATCHED)
    assert best.config.parts in (1, 2), best.config
    assert search(NAME, GPU, BATCHED, top=1).ranked[0].config.parts in (1, 2)


def test_a_large_cache_runs_at_the_hbm_bandwidth():
    """256 MiB of K and V: the predicted time is within 15% of the bytes over the spec's HBM bandwidth
    (datasheet rates), and of the bytes over the measured copy bandwidth with the shipped calibration."""
    spec = resolve_gpu(GPU)
    assert kv_bytes(CACHE_256MIB) == 256 * 2 ** 20
    datasheet = choose([NAME], GPU, CACHE_256MIB, calibration="none")
    assert datasheet.time_s == pytest.approx(kv_bytes(CACHE_256MIB) / spec.hbm_bandwidth, rel=0.15)
    measured = choose([NAME], GPU, CACHE_256MIB)
    bw = load_calibration(GPU).copy_bandwidth
    assert measured.time_s == pytest.approx(kv_bytes(CACHE_256MIB) / bw, rel=0.15)
    assert measured.hbm_bytes == pytest.approx(kv_bytes(CACHE_256MIB), rel=0.02)


def test_combine_kernel_runs_only_for_several_parts():
    cfg = DecodeConfig(64, 4, 3, 1, 128)
    one = predict(NAME, GPU, SMALL, cfg)
    partial, combine = one.kernels
    assert combine["time_s"] == 0 and combine["blocks"] == 0
    assert one.time_s == pytest.approx(partial["time_s"])
    spec = resolve_gpu(GPU)
    four = predict(NAME, GPU, SMALL, dataclasses.replace(cfg, parts=4))
    assert four.kernels[1]["time_s"] > spec.launch_overhead_s and four.kernels[1]["blocks"] == 8  # 32 rows, 4 a block
    # three more parts read Q and write an fp32 partial O and LSE (d + 1 floats a row), whole 16-row tiles
    # as the derivation counts them (the kernel skips the 12 padding rows of a KV head's 4); the combine
    # kernel reads back the 4 parts of each of the 32 real rows and writes O (bf16) and the LSE
    b, hk, h, d, rows = SMALL["B"], SMALL["H_kv"], SMALL["H"], SMALL["d"], 16
    partial = 3 * b * hk * rows * ((d + 1) * 4 + d * 2)
    combine = 4 * b * h * (d + 1) * 4 + b * h * (d * 2 + 4)
    assert four.global_bytes - one.global_bytes == partial + combine


@pytest.mark.parametrize("causal", [False, True])
def test_flops_are_the_forwards(causal):
    shape = dict(B=2, H=32, H_kv=8, N_q=1, N_k=4096, d=128, causal=causal)
    p = predict(NAME, GPU, shape, DecodeConfig(64, 4, 3, 8, 128))
    assert p.flops == 4 * 2 * 32 * 1 * 4096 * 128
    # executed: the 4 query heads of a KV head padded to one m16 tile
    assert p.executed_flops["tensor"] == 4 * 2 * 8 * 16 * 4096 * 128


def test_causal_and_packed_shapes_are_legal():
    """N_q 1..16 and GQA ratios 1..16; a bottom-right mask skips no chunk, so causal costs the same."""
    cfg = DecodeConfig(128, 4, 2, 4, 64)
    for n_q, g in ((1, 1), (3, 5), (16, 16), (7, 2)):
        shape = dict(B=3, H=2 * g, H_kv=2, N_q=n_q, N_k=3000, d=64)
        plain = predict(NAME, GPU, shape, cfg)
        causal = predict(NAME, GPU, {**shape, "causal": True}, cfg)
        assert plain.feasible and causal.time_s == pytest.approx(plain.time_s)
        assert plain.kernels[0]["blocks"] == 3 * 2 * row_blocks(g * n_q) * 4
    with pytest.raises(ModelError, match="grid"):
        predict(NAME, GPU, dict(B=70000, H=8, H_kv=8, N_q=1, N_k=64, d=64), cfg)


def test_parts_grid_loses_little():
    """Against a dense grid of parts (1..160: the SM multiples 33, 66, 132 among them) the shipped parts
    lose under 3% on decode shapes with 1, 3 and 6 CTAs a part."""
    for b, hkv, nk in ((1, 1, 8192), (3, 1, 8192), (3, 2, 5000), (1, 8, 32768), (2, 3, 4096)):
        shape = dict(B=b, H=4 * hkv, H_kv=hkv, N_q=1, N_k=nk, d=128)
        ours = rank_configs(NAME, GPU, shape, [DecodeConfig(64, 4, 3, p, 128) for p in PARTS])[0]
        dense = rank_configs(NAME, GPU, shape, [DecodeConfig(64, 4, 3, p, 128) for p in range(1, 161)])[0]
        assert ours.time_s <= 1.03 * dense.time_s, (shape, ours.config.parts, dense.config.parts)


def test_chooser_caches_the_pick():
    shape = dict(B=8, H=16, H_kv=2, N_q=2, N_k=12345, d=64, causal=True)
    first = choose([NAME], GPU, shape)
    assert first.config in SHIPPED and first.kernel == NAME
    t0 = time.perf_counter()
    assert choose([NAME], GPU, shape) is first
    assert time.perf_counter() - t0 < 0.01


def test_cli_predicts_and_searches_parts(cli):
    code, out, _ = cli("predict", "--kernel", NAME, "--batch", "1", "--heads", "32", "--kv-heads", "8",
                       "--kv-seqlen", "8192", "--json")
    assert code == 0
    (row,) = json.loads(out)
    assert row["kernel"] == NAME and row["shape"]["N_q"] == 1 and row["config"]["parts"] >= 4
    code, out, _ = cli("tiles", "--algo", "flash-decode", "--top", "3", "--json")
    (res,) = json.loads(out)
    assert code == 0 and res["shape"]["N_q"] == 1 and res["shape"]["N_k"] == 8192 and res["shape"]["H_kv"] == 4
    assert {p["config"]["parts"] for p in res["ranked"]} <= set(PARTS)
    code, out, _ = cli("pseudocode", "--kernel", NAME, "--causal", "--seqlen", "4")
    assert code == 0 and "flash-decode-combine" in out and "R=16" in out


def test_a_paged_cache_walks_its_pages_and_takes_more_parts():
    """Pages of 16 rows: a 64-row chunk enters 4 pages, and each holds the CTA's loads for the plan's
    page_wait HBM latencies, one after another.  With one part a sequence (64 CTAs at B = 8) the 2048
    pages of a CTA's stream take longer than its bytes: the prediction is the page walks (plus the
    launch), the same config is predicted slower than on the contiguous cache, and the pick splits more.
    Pages of 256 (a page every four chunks) stay under the bytes: predicted as the contiguous cache."""
    from iomodel.hardware.calibration import load_calibration
    from iomodel.perf import pages_per_step

    contiguous = dict(B=8, H=32, H_kv=8, N_q=1, N_k=32768, d=128)
    flat = choose([NAME], GPU, contiguous)
    paged = choose([NAME], GPU, {**contiguous, "page_size": 16})
    assert flat.config.parts == 1 and paged.config.parts > flat.config.parts
    same = predict(NAME, GPU, {**contiguous, "page_size": 16}, flat.config)
    plan = families.get(NAME).plan
    walks = 32768 / 16 * plan.page_wait * load_calibration(GPU).hbm_latency_s
    assert walks > 1.1 * flat.time_s
    assert abs(same.time_s - walks) < 0.02 * walks
    big = predict(NAME, GPU, {**contiguous, "page_size": 256}, flat.config)
    assert abs(big.time_s - flat.time_s) < 1e-3 * flat.time_s
    assert plan.paged_rows == ("Bc", "pg") and plan.page_wait > 0
    assert pages_per_step({"Bc": 64.0, "pg": 16.0}, plan) == 4.0
    assert pages_per_step({"Bc": 64.0, "pg": 256.0}, plan) == 0.25
    assert pages_per_step({"Bc": 64.0, "pg": 0.0}, plan) == 0.0
