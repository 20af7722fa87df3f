"""The FlashAttention-2 backward families (flash_bwd_sm80 and its deterministic twin): the registry, the
problem "attention-backward", predictions, the chooser, the search and the command line."""
import json

import pytest
import sympy as sp

from iomodel import api, families
from iomodel.chooser import choose
from iomodel.errors import ModelError
from iomodel.families.flash_bwd_sm80 import SHIPPED, FlashBwdConfig
from iomodel.hardware import resolve_gpu
from iomodel.limits import fit_problem, io_bytes
from iomodel.problems import check_shape, conventional_flops, problem_flops
from iomodel.symbolic import sym
from iomodel.tiles import search

ATOMIC, DETERMINISTIC = "flash_bwd_sm80", "flash_bwd_sm80_deterministic"
SHAPE = {"B": 4, "H": 16, "N_q": 4096, "d": 128, "causal": True}
CONFIG = {"block_q": 64, "block_k": 128, "warps": 8, "stages": 2}
GPUS = ("h100-sxm", "a100-sxm-80gb", "a100-sxm-40gb")


def test_both_families_are_registered_for_the_backward_problem_only():
    assert [f.name for f in families.for_problem("attention-backward")] == [
        ATOMIC, DETERMINISTIC, "flash_bwd_sm90", "flash_bwd_sm90_deterministic"]   # the Hopper pair: its own tests
    assert not {ATOMIC, DETERMINISTIC} & {f.name for f in families.for_problem("attention")}
    for name in (ATOMIC, DETERMINISTIC):
        fam = families.get(name)
        assert fam.config_type is FlashBwdConfig and fam.shipped == SHIPPED and fam.label(SHIPPED[0]) == "32x128 w4 s2"


@pytest.mark.parametrize("name", [ATOMIC, DETERMINISTIC])
def test_predicts_the_example_shape(name):
    p = api.predict(name, "h100-sxm", SHAPE, CONFIG)
    assert p.feasible and p.time_s > 0 and p.config == FlashBwdConfig(64, 128, 8, 2, 128)
    assert p.flops == 10 * 4 * 16 * 4096 * 4096 * 128 / 2
    # atomic: the rows kernel (D, the accumulator zeroed), the main kernel, the dQ conversion;
    # deterministic: the rows kernel, dK/dV, dQ
    assert [k["name"] for k in p.kernels][0] == "attention-backward-dot" and len(p.kernels) == 3


def test_backward_flops_are_two_and_a_half_forwards_halved_when_causal():
    fam = families.get(ATOMIC)
    full = check_shape(fam, {**SHAPE, "causal": False})
    causal = check_shape(fam, SHAPE)
    assert problem_flops(fam, full) == 2.5 * conventional_flops(full) == 10.0 * 4 * 16 * 4096 * 4096 * 128
    assert problem_flops(fam, causal) == problem_flops(fam, full) / 2
    longer_keys = check_shape(fam, {**SHAPE, "N_q": 1000, "N_k": 1536})   # the exact live fraction, like the forward
    assert problem_flops(fam, longer_keys) == 2.5 * conventional_flops(longer_keys)
    full_p, causal_p = (api.predict(ATOMIC, "h100-sxm", s, CONFIG) for s in (full, causal))
    assert causal_p.time_s < 0.6 * full_p.time_s


def test_grouped_kv_heads_read_and_write_less():
    fam = families.get(ATOMIC)
    mha, gqa = check_shape(fam, SHAPE), check_shape(fam, {**SHAPE, "H_kv": 4})
    assert io_bytes("attention-backward", gqa) < io_bytes("attention-backward", mha)
    # q, o, dO, dq and k, v, dk, dv in bf16, the forward's fp32 LSE
    q = 4 * 16 * 4096 * 128
    assert io_bytes("attention-backward", mha) == 2 * 8 * q + 4 * 4 * 16 * 4096
    for name in (ATOMIC, DETERMINISTIC):
        p = api.predict(name, "h100-sxm", gqa, CONFIG)
        assert p.feasible and p.hbm_bytes < api.predict(name, "h100-sxm", mha, CONFIG).hbm_bytes
    with pytest.raises(ModelError, match="multiple of kv heads"):
        api.predict(ATOMIC, "h100-sxm", {**SHAPE, "H_kv": 3}, CONFIG)


def test_deterministic_is_predicted_slower_than_atomic_at_a_large_shape():
    shape = {"B": 1, "H": 16, "N_q": 16384, "d": 128, "causal": False}
    atomic, determ = (choose([n], "h100-sxm", shape) for n in (ATOMIC, DETERMINISTIC))
    assert determ.time_s > 1.2 * atomic.time_s
    assert choose([ATOMIC, DETERMINISTIC], "h100-sxm", shape).kernel == ATOMIC


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("name", [ATOMIC, DETERMINISTIC])
def test_shipped_configs_are_feasible(gpu, name):
    for cfg in SHIPPED:
        for causal in (False, True):
            p = api.predict(name, gpu, {**SHAPE, "d": cfg.head_dim, "causal": causal}, cfg)
            assert p.feasible, (gpu, name, cfg, p.reason)


def test_atomic_kernel_smem_and_dq_registers_are_the_kernels():
    """dS^T goes through SMEM, so the model's SMEM is the kernel's exact figure and each warp holds its
    part of dQ (Br*d/w words), not a partial of all of it."""
    from iomodel.api import shape_model

    for cfg in SHIPPED:
        p = api.predict(ATOMIC, "h100-sxm", {**SHAPE, "d": cfg.head_dim}, cfg)
        assert p.kernels[1]["smem_bytes"] == cfg.smem_bytes()
    main = shape_model(ATOMIC, check_shape(families.get(ATOMIC), SHAPE)).kernels[1].costs
    Br, Bc, w, d = sym("Br"), sym("Bc"), sym("w"), sym("d")
    # dK and dV accumulators, then the larger of S and dP (P and dS are in SMEM) and this warp's part of dQ
    expected = 2 * Bc * d / w / 32 + sp.Max(Bc * Br / w, Br * d / w) / 32
    assert sp.simplify(main.regs_per_thread - expected) == 0
    assert main.regs_per_thread.subs({Br: 64, Bc: 128, w: 8, d: 128}) == 160   # 128 + 32


def test_chooser_returns_the_best_shipped_config():
    best = choose([ATOMIC], "h100-sxm", SHAPE)
    assert best.kernel == ATOMIC and best.config in SHIPPED and best.config.head_dim == 128
    ranked = api.rank_configs(ATOMIC, "h100-sxm", SHAPE, families.get(ATOMIC).shipped_for({"d": 128}))
    assert best.config == ranked[0].config
    a100 = choose([ATOMIC, DETERMINISTIC], "a100-sxm-80gb", {**SHAPE, "d": 64})
    assert a100.config in SHIPPED and a100.config.head_dim == 64
    with pytest.raises(ModelError, match="head dim 256 not supported"):
        choose([ATOMIC], "h100-sxm", {**SHAPE, "d": 256})


@pytest.mark.parametrize("name", [ATOMIC, DETERMINISTIC])
def test_search_ranks_only_what_the_kernel_builds(name):
    res = search(name, "h100-sxm", {**SHAPE, "H_kv": 4}, top=5)
    assert res.evaluated == 3 * 6 * 4 * 2 and res.ranked
    assert all(not p.config.problems() and p.feasible for p in res.ranked)
    assert any("must be" in r or "does not split" in r for _c, r in res.rejected())


def test_config_problems_name_what_is_wrong():
    assert FlashBwdConfig(64, 128, 8, 2, 128).problems() == []
    assert "block_q (48) must be one of 32, 64, 128" in FlashBwdConfig(48, 128, 8, 2, 128).problems()
    assert "multiple of 32" in FlashBwdConfig(64, 48, 4, 2, 128).problems()[0]
    assert "does not split over 4 warps (3 along the keys)" in FlashBwdConfig(64, 96, 4, 2, 128).problems()[0]
    assert "stages (3) must be 1 or 2" in FlashBwdConfig(64, 128, 8, 3, 128).problems()
    assert "head_dim (96) must be one of 64, 128" in FlashBwdConfig(64, 128, 8, 2, 96).problems()
    assert "does not split over 3 warps" in FlashBwdConfig(32, 64, 3, 2, 64).problems()[0]
    with pytest.raises(ModelError, match="cannot build 48x128 w8 s2: block_q"):
        api.predict(ATOMIC, "h100-sxm", SHAPE, {**CONFIG, "block_q": 48})


def test_launch_and_memory_limits():
    spec = resolve_gpu("h100-sxm")
    atomic, determ = families.get(ATOMIC), families.get(DETERMINISTIC)
    big = check_shape(atomic, {"B": 64, "H": 32, "N_q": 65536, "d": 128})
    assert "the flash_bwd_sm80 kernel allocates" in fit_problem(atomic, spec, big)
    # the fp32 dQ accumulator is the atomic mode's alone
    assert atomic.workspace_bytes(big) > 30 * determ.workspace_bytes(big)
    assert "at most 65535" in fit_problem(atomic, spec, check_shape(atomic, {**SHAPE, "B": 70000, "N_q": 128}))


def test_cli_predict_with_the_kernel_alone_picks_the_backward(cli):
    code, out, _ = cli("predict", "--kernel", ATOMIC, "--causal", "--kv-heads", "4", "--json")
    assert code == 0
    [pred] = json.loads(out)
    assert pred["kernel"] == ATOMIC and pred["shape"]["causal"] and pred["shape"]["H_kv"] == 4 and pred["feasible"]
    code, out, _ = cli("predict", "--algo", "flash-attention-backward", "--seqlen", "2048")
    assert code == 0 and ATOMIC in out and DETERMINISTIC in out and "peer FlashAttention-2" not in out


def test_cli_tiles_and_pseudocode(cli):
    code, out, _ = cli("tiles", "--kernel", DETERMINISTIC, "--top", "2", "--head-dim", "64")
    assert code == 0 and f"{DETERMINISTIC} on h100-sxm: 144 configurations" in out
    code, out, _ = cli("pseudocode", "--kernel", ATOMIC, "--causal", "--kv-heads", "4")
    assert code == 0 and "kernel attention-backward:" in out and "atomic add dQ" in out and "Hk=4" in out
    assert "units share" in out
    code, out, _ = cli("pseudocode", "--kernel", DETERMINISTIC, "--symbolic")
    assert code == 0 and "kernel attention-backward-dq:" in out and "step 16:   # warps" in out


@pytest.mark.parametrize("argv, needle", [
    (["predict", "--algo", "attention-unfused", "--causal"], "--causal not used by --algo attention-unfused"),
    (["predict", "--algo", "attention-backward", "--causal"], "--causal not used by --algo attention-backward"),
    (["predict", "--algo", "flash-attention", "--kernel", ATOMIC], "serves --algo flash-attention-backward"),
    (["predict", "--kernel", ATOMIC, "--head-dim", "256"], "head dim 256 not supported by flash_bwd_sm80"),
    (["predict", "--algo", "flash-attention-backward", "--tiles", "block_q=64"], "--tiles needs --kernel"),
    (["predict", "--kernel", ATOMIC, "--tiles", "block_q=48,block_k=128,warps=8,stages=2"], "block_q (48)"),
    (["predict", "--kernel", ATOMIC, "--tiles", "block_m=64"], "has no size 'block_m'"),
    (["predict", "--kernel", ATOMIC, "--heads", "16", "--kv-heads", "3"], "multiple of --kv-heads"),
    (["predict", "--kernel", ATOMIC, "--batch", "64", "--heads", "32", "--seqlen", "65536"], "of GPU memory"),
    (["roofline", "--causal"], "roofline takes no --causal"),
])
def test_cli_bad_input_is_one_line(argv, needle, cli):
    code, _out, err = cli(*argv)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("iomodel: error: ") and needle in lines[0], err
