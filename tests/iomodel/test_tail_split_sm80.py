"""The mma.sync forward's tail split in the model (the flash_sm80 plan's tail_pieces_max, iomodel.perf.tail_pieces)
and in its launcher (kernels.flash_sm80.tail_split): the same pieces from the same counts; a split only without a
mask or score modifiers; FlashAttention-2's model (flash_sm80_eager) never splits."""
import math

from iomodel import api, families, peers  # noqa: F401  (peers registers flash_sm80_eager)
from iomodel.families import flash_sm80 as fam
from iomodel.families.flash_sm80 import FlashConfig
from iomodel.perf import tail_pieces
from kernels.flash_sm80 import tail_split

CFG = FlashConfig(128, 128, 4, 1, 64)


def shape(N, B, H, causal=False, **kw):
    return {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": 64, "causal": causal, "dtype": "bf16", **kw}


def test_the_launcher_and_the_model_take_the_same_pieces():
    plan = fam.FAMILY.plan
    assert plan.tail_pieces_max == fam.TAIL_PIECES_MAX > 1
    for blocks, slots, steps in ((8192, 264, 256), (272, 264, 16), (4096, 264, 8), (1024, 132, 86), (16, 264, 2)):
        assert tail_split(blocks, slots, steps) == tail_pieces(blocks, slots, steps, plan.tail_overhead_steps,
                                                               plan.tail_pieces_max)[0]
    # d = 64 N = 32768 B1 H32: 8192 tiles over 264 slots leave 8 for a 32nd wave; they run in 32 pieces
    assert tail_split(8192, 264, 256) == 32
    # a short stream (8 chunks) is not split: a piece's overhead would cost more than the wave it saves
    assert tail_split(4096, 264, 8) == 1


def test_the_split_shortens_the_predicted_tail_only_where_the_kernel_splits():
    long = shape(32768, 1, 32)
    split = api.predict("flash_sm80", "h100-sxm", long, CFG)
    eager = api.predict("flash_sm80_eager", "h100-sxm", long, CFG)
    assert math.isclose(split.waves, 31.0 + 1 / 32, rel_tol=1e-9)   # 31 whole waves, then pieces of 1/32
    assert eager.waves == 32.0                                        # FlashAttention-2: a whole 32nd wave
    for masked in (shape(32768, 1, 32, causal=True), {**long, "softcap": 30.0}):
        assert api.predict("flash_sm80", "h100-sxm", masked, CFG).waves >= 31.5
    assert families.get("flash_sm80_eager").plan.tail_pieces_max == 1
