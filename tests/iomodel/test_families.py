"""The kernel-family registry: one module per family, read by the model, the search, the chooser and the harness."""
import dataclasses
import random

import pytest

from iomodel import families
from iomodel.chooser import choose
from iomodel.errors import ModelError
from iomodel.families.base import Family, TileConfig
from iomodel.tiles import search

ATTENTION = dict(B=2, H=16, N_q=4096, d=128, causal=False, dtype="bf16")


def test_registry_lists_each_family_once_with_its_architecture_in_the_name():
    assert set(families.FAMILIES) == {"flash_sm80", "flash_sm90", "unfused", "matmul_sm80", "softmax",
                                      "flash_bwd_sm80", "flash_bwd_sm80_deterministic", "flash_bwd_sm90",
                                      "flash_bwd_sm90_deterministic", "flash_decode_sm80"}
    for name, fam in families.FAMILIES.items():
        assert isinstance(fam, Family) and fam.name == name
        assert issubclass(fam.config_type, TileConfig)
        assert set(fam.space) | set(fam.bound) == set(fam.config_type.field_names())


@pytest.mark.parametrize("name", sorted(families.FAMILIES))
def test_shipped_configs_build_and_label_uniquely(name):
    fam = families.get(name)
    assert fam.shipped
    labels = set()
    for cfg in fam.shipped:
        assert cfg.problems() == [], (name, cfg)
        shape = {**ATTENTION, "d": getattr(cfg, "head_dim", 128)}
        labels.add((getattr(cfg, "head_dim", None), fam.label(cfg)))
        assert fam.config(cfg.as_dict(), shape) == cfg   # typed -> dict -> typed is the identity
    assert len(labels) == len(fam.shipped)


def test_unknown_family_suggests_the_closest():
    with pytest.raises(ModelError, match="did you mean flash_sm90"):
        families.get("flash_sm09")


def test_config_conversion_fills_and_checks_the_shape_bound_fields():
    fam = families.get("flash_sm90")
    cfg = fam.config(dict(block_m=128, block_n=96, stages=2, consumers=2), ATTENTION)
    assert cfg.head_dim == 128 and cfg.threads == 384
    with pytest.raises(ModelError, match="does not match"):
        fam.config(dataclasses.replace(cfg, head_dim=64), ATTENTION)
    with pytest.raises(ModelError, match="64 \\* consumers"):
        fam.config(dict(block_m=192, block_n=96, stages=2, consumers=2), ATTENTION)
    with pytest.raises(ModelError, match="unknown warps"):
        fam.config(dict(block_m=128, block_n=96, stages=2, consumers=2, warps=4), ATTENTION)


@pytest.mark.parametrize("name", ["flash_sm80", "flash_sm90", "unfused"])
def test_search_space_is_what_the_kernel_builds(name):
    """Every configuration the search ranks passes the kernel's own build check, and every grid point
    the kernel builds is evaluated by the model (none is dropped by a separate, stricter rule)."""
    fam = families.get(name)
    res = search(name, "h100-sxm", ATTENTION, top=10 ** 6)
    buildable = [c for c in fam.candidates(res.shape) if not c.problems()]
    assert res.ranked and all(not p.config.problems() for p in res.ranked)
    model_rejected = {c for c, r in res.rejected() if not c.problems()}
    assert len(res.ranked) + len(model_rejected) == len(buildable)


def test_kernel_constraints_reject_with_reasons():
    rng = random.Random()
    bad_m = rng.choice([24, 40, 72])
    problems = families.get("flash_sm80").config_type(bad_m, 64, 4, 2, 128).problems()
    assert problems and "block_m" in problems[0]
    assert families.get("softmax").config_type(8).problems()
    assert families.get("matmul_sm80").config_type(64, 64, 48, 4, 2).problems()


def test_chooser_picks_a_shipped_config_once_and_caches_it(monkeypatch):
    shape = {**ATTENTION, "H_kv": 16, "N_k": 4096}
    best = choose(["flash_sm80", "flash_sm90"], "h100-sxm", shape)
    assert best.kernel in ("flash_sm80", "flash_sm90")
    assert best.config in families.get(best.kernel).shipped
    assert choose(["flash_sm80", "flash_sm90"], "h100-sxm", shape) is best
    a100 = choose(["flash_sm80"], "a100-sxm-80gb", shape)
    assert a100.kernel == "flash_sm80" and a100.config.head_dim == 128
    # a shape no shipped config fits (every family ships each head dim it takes: none offered here)
    monkeypatch.setattr(type(families.get("flash_sm80")), "shipped_for", lambda self, shape: [])
    with pytest.raises(ModelError, match="ships no config"):
        choose(["flash_sm80"], "h100-sxm", {**shape, "d": 256})
