"""The model of FlashAttention's score modifiers (the shape's ``softcap`` and ``alibi``): the maps drawn on a
family's scores (``diagrams.library.score_mods``), the work they add (softcap: a MUFU op and an FMUL per
score; ALiBi: two FP32 ops), registers unchanged (in place), which families have them, the shape's checks
and the variants not offered."""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from diagrams import library
from diagrams.core import DiagramError
from diagrams.diagram import as_program
from iomodel import families
from iomodel.api import predict
from iomodel.chooser import choose
from iomodel.derive import derive
from iomodel.errors import ModelError
from iomodel.problems import score_mods_of, variant_features


def _shape(**kw):
    return {"B": 2, "H": 16, "N_q": 4096, "N_k": 4096, "d": 128, "causal": False, "dtype": "bf16", **kw}


def _kernel(name, mods, causal=True, gqa=True):
    d = families.get(name).build(causal, gqa)
    return derive(as_program(library.score_mods(d, mods) if mods else d), exact=False).kernels[0]


@pytest.mark.parametrize("name", ["flash_sm80", "flash_sm90"])
def test_the_maps_add_their_work_per_live_score_and_no_registers(name):
    base, cap, ali, both = (_kernel(name, m) for m in ((), ("softcap",), ("alibi",), ("softcap", "alibi")))
    syms = {x.name: x for x in base.flops["exp"].free_symbols}
    Br, Bc = syms["Br"], syms["Bc"]
    # the live scores of the causal diagram: the exp work per score (one ex2 per score, plus one per row and
    # chunk for the rescale where the family rescales every chunk: not with a stale max)
    stale = any(getattr(op, "stale_max", 0) > 0 for op in families.get(name).build(True, True).ops)
    scores = sp.expand(base.flops["exp"])
    extra_exp = sp.simplify(cap.flops["exp"] - base.flops["exp"])
    assert extra_exp != 0 and sp.simplify(extra_exp * (Bc + (0 if stale else 1)) - scores * Bc) == 0
    # softcap: one FMUL per score beside its tanh; ALiBi: two FP32 ops; both: the sum
    assert sp.simplify(cap.flops["fp32"] - base.flops["fp32"] - extra_exp) == 0
    assert sp.simplify(ali.flops["fp32"] - base.flops["fp32"] - 2 * extra_exp) == 0
    assert sp.simplify(both.flops["fp32"] - base.flops["fp32"] - 3 * extra_exp) == 0
    assert sp.simplify(ali.flops["tensor"] - base.flops["tensor"]) == 0
    for k in (cap, ali, both):   # applied in place: the scores' registers are reused
        assert sp.simplify(k.regs_per_thread - base.regs_per_thread) == 0
        assert sp.simplify(k.smem_bytes - base.smem_bytes) == 0
    assert Br in base.regs_per_thread.free_symbols


def test_the_maps_sit_between_the_scores_and_the_softmax():
    d = library.score_mods(library.flash_attention(causal=True), ("alibi", "softcap"))
    assert [op.name for op in d.ops] == ["S=Q.K", "softcap", "alibi", "O=P.V"]
    assert d.name.endswith("-softcap-alibi")
    cap = d.ops[1]
    x = np.linspace(-3, 3, 7)
    assert np.allclose(cap.value(x), np.tanh(x)) and np.allclose(cap.partial(0, x), 1 - np.tanh(x) ** 2)
    assert d.ops[2].inputs[1].name == "alibi_slopes" and d.ops[2].inputs[1].axis_names == ("h",)
    with pytest.raises(DiagramError, match="each of"):
        library.score_mods(d, ("tanh",))
    with pytest.raises(DiagramError, match="no scores array"):
        library.score_mods(library.matmul(), ("softcap",))


def test_a_softcap_costs_the_mufu_time_it_adds():
    cfg = families.get("flash_sm90").shipped_for(_shape())[0]
    # B3 H16: 1056 tiles of 192 rows, whole rounds of 132 SMs, so the plain kernel has no tail split to shorten
    # its busiest SM's share against the capped one's
    plain = predict("flash_sm90", "h100-sxm", _shape(d=64, B=3), {"block_m": 192, "block_n": 128, "stages": 2,
                                                                 "consumers": 3})
    capped = predict("flash_sm90", "h100-sxm", _shape(d=64, B=3, softcap=30.0),
                     {"block_m": 192, "block_n": 128, "stages": 2, "consumers": 3})
    assert capped.terms["exp"] == pytest.approx(2 * plain.terms["exp"], rel=0.02)
    assert capped.time_s > plain.time_s and capped.flops == plain.flops   # conventional FLOPs unchanged
    assert cfg is not None


def test_shape_fields_and_their_checks():
    assert score_mods_of(_shape()) == () and score_mods_of(_shape(softcap=50.0, alibi=True)) == ("softcap", "alibi")
    assert variant_features(_shape(causal=True, alibi=True)) == {"causal", "alibi"}
    assert variant_features(_shape(window_left=128, window_right=0, softcap=1.0)) == {"causal", "window", "softcap"}
    cfg = {"block_m": 128, "block_n": 64, "warps": 4, "stages": 2}
    for bad, msg in (({"softcap": -1.0}, "softcap must be a finite number"), ({"softcap": "x"}, "softcap must be"),
                     ({"alibi": 1}, "alibi must be a bool")):
        with pytest.raises(ModelError, match=msg):
            predict("flash_sm80", "h100-sxm", _shape(**bad), cfg)
    with pytest.raises(ModelError, match="flash_bwd_sm80 has no softcap"):
        predict("flash_bwd_sm80", "h100-sxm", _shape(softcap=30.0), families.get("flash_bwd_sm80").shipped[0])


@pytest.mark.parametrize("name", ["flash_sm80", "flash_sm90"])
def test_variants_that_spill_are_not_offered(name):
    fam = families.get(name)
    assert fam.spilling_variants
    for cfg, feats in fam.spilling_variants:
        shape = _shape(d=cfg.head_dim, causal="causal" in feats, softcap=30.0 if "softcap" in feats else 0.0,
                       alibi="alibi" in feats)
        if "window" in feats:
            shape.update(window_left=256, window_right=0 if "causal" in feats else -1)
        assert variant_features(shape) == feats
        offered = fam.shipped_for(shape)
        assert cfg not in offered and offered
        assert choose([name], "h100-sxm", shape).config != cfg
        # without the modifiers it is offered again, unless that variant spills too (or has a window)
        unmodified = frozenset(feats - {"softcap", "alibi"})
        assert (cfg in fam.shipped_for({**shape, "softcap": 0.0, "alibi": False}) or "window" in feats
                or (cfg, unmodified) in fam.spilling_variants)


def test_cli_softcap_and_alibi(cli):
    import json

    code, out, _ = cli("predict", "--kernel", "flash_sm90", "--head-dim", "64", "--causal", "--softcap", "30",
                       "--alibi", "--json")
    (row,) = json.loads(out)
    assert code == 0 and row["shape"]["softcap"] == 30.0 and row["shape"]["alibi"] is True
    code, out, _ = cli("predict", "--kernel", "flash_sm90", "--head-dim", "64", "--causal", "--json")
    plain = json.loads(out)[0]
    assert row["terms"]["exp"] > 1.8 * plain["terms"]["exp"] and row["time_s"] > plain["time_s"]
    for argv, msg in ((("--softcap", "-3"), "expected a finite number >= 0"), (("--softcap", "x"), "expected a number"),
                      (("--algo", "flash-decode", "--alibi"), "--alibi applies to attention forwards"),
                      (("--kernel", "flash_bwd_sm80", "--softcap", "5"), "flash_bwd_sm80 has no softcap")):
        code, out, err = cli("predict", *argv)
        assert code != 0 and msg in err and len(err.strip().splitlines()) == 1, (argv, err)
