"""The wgmma forward's tail split in the model (the flash_sm90 plan's tail_pieces_max, iomodel.perf.tail_pieces)
and in its launcher (kernels.flash_sm90.tail_split): the same pieces from the same counts, a split only of the
plain kernel (no mask, window or score modifier), whose instantiation alone takes the split's arguments."""
import math

from iomodel import api
from iomodel.families import flash_sm90 as fam
from iomodel.families.flash_sm90 import Sm90Config
from iomodel.perf import tail_pieces
from kernels import codegen
from kernels.flash_sm90 import tail_split

CFG = Sm90Config(128, 176, 2, 128, 2)


def shape(N, B, H, d=128, causal=False, **kw):
    return {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16", **kw}


def test_the_launcher_and_the_model_take_the_same_pieces():
    plan = fam.FAMILY.plan
    assert plan.tail_pieces_max == fam.TAIL_PIECES_MAX > 1
    for tiles, sms, chunks in ((2048, 132, 94), (5472, 132, 256), (2752, 132, 128), (2048, 132, 8), (18, 132, 3),
                               (1024, 132, 103), (2816, 114, 32)):
        whole, pieces = tail_split(tiles, sms, chunks)
        model = tail_pieces(tiles, sms, chunks, plan.tail_overhead_steps, plan.tail_pieces_max)[0]
        assert pieces == min(model, chunks) and whole == (tiles - tiles % sms if pieces > 1 else tiles)
    # d = 128 N = 16384 B1 H16 (128x176): 2048 tiles leave 68 for a 16th round of 132; they run in 5 pieces
    assert tail_split(2048, 132, 94) == (1980, 5)
    # a short stream (8 chunks) is not split: a piece's overhead would cost more than the round it saves
    assert tail_split(2048, 132, 8) == (2048, 1)
    # asked (A/B runs): the same last round in that many pieces, never more than its chunks; none without a tail
    assert tail_split(18, 132, 3, pieces=8) == (0, 3)
    assert tail_split(264, 132, 94, pieces=4) == (264, 1)


def test_the_split_shortens_the_predicted_tail_only_without_a_mask():
    long = shape(16384, 1, 16)
    split = api.predict("flash_sm90", "h100-sxm", long, CFG)
    assert math.isclose(split.waves, 15.0 + 3 / 5, rel_tol=1e-9)   # 15 whole rounds, then 3 rounds of fifths
    for masked in (shape(16384, 1, 16, causal=True), {**long, "softcap": 30.0},
                   {**long, "window_left": 4096, "window_right": 0, "causal": True}):
        assert api.predict("flash_sm90", "h100-sxm", masked, CFG).waves >= 15.5


def test_only_the_plain_instantiation_takes_the_split_arguments():
    assert codegen.sm90_splits(False) and not codegen.sm90_splits(True)
    assert not any(codegen.sm90_splits(False, *flags) for flags in ((True,), (False, True), (False, False, 1)))
    plain = codegen.sm90_instance(CFG, "bf16", False)
    assert "int whole, int pieces, float* part, int* count" in plain and "whole, pieces, part, count);" in plain
    for variant in ((True,), (False, True), (False, False, True), (False, False, False, 2)):
        assert "pieces" not in codegen.sm90_instance(CFG, "bf16", *variant)
