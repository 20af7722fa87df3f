"""The sweep's plan (validation.plan) and its guarded model (validation.predictor). No torch."""

from __future__ import annotations

from types import SimpleNamespace

from iomodel import families
from validation.plan import KernelFamily, PlannedRow, build_plan, default_shapes, make_shape
from validation.predictor import Predictor


def test_default_shapes():
    shapes = default_shapes()
    assert len(shapes) == 12
    assert {s["N_q"] for s in shapes} == {1024, 4096, 16384}
    assert all(s["B"] * s["N_q"] == 16384 and s["H"] * s["d"] == 2048 for s in shapes)
    assert [s["N_q"] for s in shapes[:4]] == [4096] * 4  # the config sweeps first
    assert len(default_shapes(quick=True)) == 2


def test_kernel_family_reads_the_registry():
    shape = make_shape(4096, 128, False)
    fam = KernelFamily.shipped("flash_sm80", run=None)
    assert fam.configs_for(shape) == families.get("flash_sm80").shipped_for(shape)
    assert all(c.head_dim == 128 for c in fam.configs_for(shape))
    # unfused's configs do not depend on the head dim
    assert KernelFamily.shipped("unfused", run=None).configs_for(shape) == list(families.get("unfused").shipped)
    assert PlannedRow("flash_sm80", shape, fam.configs_for(shape)[0]).label == \
        families.get("flash_sm80").label(fam.configs_for(shape)[0])


def test_the_plan_leaves_out_variants_that_spill():
    """A config whose causal variant spills (not offered by the kernels) is not timed for causal shapes, and is
    for the others: the plan times what the kernels' chooser can pick."""
    fam = KernelFamily.shipped("flash_sm80", run=None)
    listed = [c for c, f in families.get("flash_sm80").spilling_variants if f == frozenset({"causal"})]
    assert listed
    for cfg in listed:
        causal, full = make_shape(4096, cfg.head_dim, True), make_shape(4096, cfg.head_dim, False)
        assert cfg not in fam.configs_for(causal) and fam.configs_for(causal)
        assert cfg in fam.configs_for(full)
        assert fam.configs_for(causal) == families.get("flash_sm80").shipped_for(causal)


def test_build_plan_sweeps_at_4096_and_top_elsewhere(spec, fake_api):
    cfgs = [dict(block_m=bm, block_n=64, warps=4, stages=s, head_dim=d)
            for d in (64, 128) for bm in (64, 128) for s in (1, 2)]
    fams = {"flash_sm80": KernelFamily("flash_sm80", cfgs, run=lambda *a: None),
            "flash_sm90": KernelFamily("flash_sm90", skip="not here")}
    pred = Predictor(spec, None, api=fake_api)
    shapes = [make_shape(4096, 128, False), make_shape(1024, 64, False)]
    plan = build_plan(shapes, fams, pred)
    at4096 = [r for r in plan if r.shape["N_q"] == 4096 and r.kernel == "flash_sm80"]
    assert len(at4096) == 4 and all(r.why == "sweep" for r in at4096)
    assert [r.predicted_rank for r in at4096] == [0, 1, 2, 3]
    assert at4096[0].config["block_m"] == 128 and at4096[0].config["stages"] == 1  # the model's order
    at1024 = [r for r in plan if r.shape["N_q"] == 1024 and r.kernel == "flash_sm80"]
    assert len(at1024) == 1 and at1024[0].why == "model-top" and at1024[0].config["head_dim"] == 64
    assert [r.kernel for r in plan if r.is_peer] == ["sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "fa4"] * 2
    assert not any(r.kernel == "flash_sm90" for r in plan)
    only = build_plan(shapes, fams, pred, only=("peers",))
    assert all(r.is_peer for r in only)
    # without a model: shipped order, and a note says so
    notes = []
    plan = build_plan(shapes, fams, Predictor(spec, None, api=SimpleNamespace()), notes=notes)
    assert [r.config["block_m"] for r in plan if r.kernel == "flash_sm80" and r.shape["N_q"] == 4096] == [64, 64, 128, 128]
    assert any("could not rank" in n for n in notes)


def test_build_plan_infeasible_configs_come_last_unranked(spec):
    # the model ranks two of three configs (the third is infeasible); all three still run
    cfgs = [dict(block_m=bm, block_n=64, warps=4, stages=1, head_dim=128) for bm in (64, 128, 256)]
    api = SimpleNamespace(rank_configs=lambda k, g, s, cands, calibration=None: [
        SimpleNamespace(config=cands[2]), SimpleNamespace(config=cands[0])])
    plan = build_plan([make_shape(4096, 128, False)], {"flash_sm80": KernelFamily("flash_sm80", cfgs)},
                      Predictor(spec, None, api=api), only=("flash_sm80",))
    assert [(r.config["block_m"], r.predicted_rank) for r in plan] == [(256, 0), (64, 1), (128, None)]


def test_predictor_rank_maps_predictions_back_to_candidates(spec):
    """The real model returns typed configs with head_dim filled in; candidates may leave it out."""
    shape = make_shape(4096, 128, False)
    shipped = families.get("flash_sm80").shipped_for(shape)
    order, why = Predictor(spec, None).rank("flash_sm80", shape, shipped)
    assert why is None and sorted(order) == list(range(len(shipped)))
    bare = [{k: v for k, v in c.as_dict().items() if k != "head_dim"} for c in shipped]
    assert Predictor(spec, None).rank("flash_sm80", shape, bare) == (order, None)
    assert Predictor(spec, None).rank("flash_sm80", shape, []) == ([], None)
    # a model error is a message, not a crash
    order, why = Predictor(spec, None).rank("flash_sm80", shape, [{"block_m": 3}])
    assert order is None and why


def test_predictor_predict_and_peer_summaries(spec):
    shape = make_shape(4096, 128, False)
    p = Predictor(spec, None)
    pred, err = p.predict("flash_sm80", shape, families.get("flash_sm80").shipped_for(shape)[0])
    assert err is None and pred["time_s"] > 0 and "terms" in pred and "config" not in pred
    peer, err = p.peer("sdpa_flash", shape)
    assert err is None and peer["time_s"] > 0
    assert p.peer("sdpa_cudnn", shape) == (None, None)
    pred, err = p.predict("nope", shape, {})
    assert pred is None and "nope" in err


def test_feature_shapes_parse_label_and_have_the_peers_that_take_them(spec, fake_api):
    import argparse

    import pytest

    from iomodel.results import shape_label
    from validation.__main__ import _parse_shape
    from validation.features import has_features

    win = _parse_shape("32768:128:causal:w4096")
    assert win["window_left"] == 4096 and win["window_right"] == 0 and has_features(win)
    assert shape_label(win) == "d128 N32768 B1H16 causal w4096,0"
    mods = _parse_shape("4096:96:softcap30:alibi")
    assert mods["softcap"] == 30.0 and mods["alibi"] is True and mods["d"] == 96
    assert shape_label(mods).endswith(" softcap30 alibi")
    assert _parse_shape("4096:64:w37,5")["window_right"] == 5 and not has_features(make_shape(4096, 64, True))
    for bad in ("4096:64:wx", "4096:64:softcap-1", "4096:64:sliding"):
        with pytest.raises(argparse.ArgumentTypeError):
            _parse_shape(bad)
    fams = {"flash_sm80": KernelFamily("flash_sm80", [dict(block_m=128, block_n=64, warps=4, stages=2, head_dim=128)],
                                       run=lambda *a: None)}
    alibi = _parse_shape("4096:128:causal:softcap30:alibi")
    plan = build_plan([win, alibi, make_shape(4096, 128, True)], fams, Predictor(spec, None, api=fake_api))
    # the window shape: our kernel and FlashAttention-4 (it takes windows); ALiBi: ours alone (no peer takes it)
    assert [r.kernel for r in plan if r.shape == win] == ["flash_sm80", "fa4"]
    assert [r.kernel for r in plan if r.shape == alibi] == ["flash_sm80"]
    assert sum(r.is_peer for r in plan) == 5   # the plain shape's four (SDPA's three and FlashAttention-4) and fa4
