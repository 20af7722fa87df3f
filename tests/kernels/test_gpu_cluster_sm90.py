"""GPU correctness of the wgmma forward's cluster build (SM90_CLUSTER, kernels/sm90_schedule.py CLUSTER; the launcher's
default for the plain kernel's long tiles, pairs_tiles): pairs of CTAs on adjacent tiles of one head, K and V chunks
multicast.  Against float32 with the tail split, a short last tile, N_q != N_k, GQA, fp16, a grid of one cluster a
pair; bit for bit against the build without clusters (both unsplit: the same tiles' arithmetic); the launcher's
refusals and its default."""
from __future__ import annotations

import math
import random

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("kernels_debug")]

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):  # pragma: no cover
    pytest.skip("needs an sm_90 GPU", allow_module_level=True)

from kernels import flash_sm90  # noqa: E402
from iomodel.families.flash_sm90 import Sm90Config  # noqa: E402
from validation.reference import attention_reference  # noqa: E402

CLUSTER, NO_SPLIT = (flash_sm90.CLUSTER,), (flash_sm90.CLUSTER, flash_sm90.NO_SPLIT)
CASES = [  # (cfg, B, H, group, N_q, N_k, dtype)
    (Sm90Config(128, 176, 2, 128, 2), 1, 16, 1, 4096, 4096, torch.bfloat16),   # 512 tiles: a split last round
    (Sm90Config(128, 128, 2, 128, 2), 2, 8, 2, 1000, 1100, torch.float16),     # a short last tile, N_k > N_q, GQA
    (Sm90Config(192, 128, 2, 64, 3), 4, 8, 1, 2200, 1900, torch.bfloat16),     # 12 tiles a head, N_k < N_q
    (Sm90Config(128, 80, 2, 256, 2), 2, 4, 1, 2048, 3000, torch.bfloat16),
    (Sm90Config(128, 96, 2, 96, 2), 3, 6, 3, 512, 700, torch.bfloat16),         # d = 96: a part-filled box
    (Sm90Config(192, 128, 3, 32, 3), 2, 8, 2, 2200, 1900, torch.bfloat16),      # d = 32: 64-byte rows, GQA
]
IDS = dict(ids=lambda x: x.name if isinstance(x, Sm90Config) else str(x))


def _inputs(make, cfg, B, H, group, N_q, N_k, dtype):
    """Fresh inputs (the random_qkv fixture's, a new seed each call)."""
    return make(B, H, H // group, N_q, N_k, cfg.head_dim, dtype, seed=random.randrange(1 << 31))


def _against_float32(o, lse, q, k, v, cfg, dtype):
    ref, ref_lse = attention_reference(q, k, v, False, 1 / math.sqrt(cfg.head_dim))
    assert ((o.float() - ref).norm() / ref.norm()).item() < (1e-2 if dtype == torch.bfloat16 else 5e-3)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("cfg,B,H,group,N_q,N_k,dtype", CASES, **IDS)
def test_the_cluster_build_matches_float32_and_the_plain_build(random_qkv, cfg, B, H, group, N_q, N_k, dtype):
    q, k, v = _inputs(random_qkv, cfg, B, H, group, N_q, N_k, dtype)
    run = flash_sm90.plan(q, k, v, False, cfg, _defines=CLUSTER)
    tiles = B * H * -(-N_q // cfg.block_m)
    assert run.prepared.grid[0] % 2 == 0 and run.prepared.grid[0] <= min(tiles, torch.cuda.get_device_properties(
        0).multi_processor_count)
    o, lse = run(q, k, v, True)
    _against_float32(o, lse, q, k, v, cfg, dtype)
    # unsplit, bit for bit against the kernel without clusters (each tile the same chunks in the same order)
    o_c, lse_c = flash_sm90.attention(q, k, v, config=cfg, return_lse=True, _defines=NO_SPLIT)
    o_p, lse_p = flash_sm90.attention(q, k, v, config=cfg, return_lse=True, _defines=(flash_sm90.NO_SPLIT,))
    torch.testing.assert_close(o_c, o_p, rtol=0, atol=0)
    torch.testing.assert_close(lse_c, lse_p, rtol=0, atol=0)
    # a grid of one cluster a pair of tiles (not persistent)
    o_g, lse_g = flash_sm90.attention(q, k, v, config=cfg, return_lse=True, _defines=CLUSTER, _persistent=False)
    torch.testing.assert_close(o_g, o_p, rtol=0, atol=0)


def test_a_split_last_round_pairs_its_pieces(random_qkv):
    """A persistent launch whose last round is split (forced into 3 pieces): each pair's tiles take the same
    chunks, each tile merged on its own."""
    cfg = Sm90Config(128, 128, 2, 128, 2)
    # 320 tiles: 160 pairs on at most 66 clusters
    q, k, v = _inputs(random_qkv, cfg, 1, 20, 1, 2048, 2048, torch.bfloat16)
    run = flash_sm90.plan(q, k, v, False, cfg, _defines=CLUSTER, _pieces=3)
    assert run.pieces == 3
    o, lse = run(q, k, v, True)
    _against_float32(o, lse, q, k, v, cfg, torch.bfloat16)


def test_the_launcher_refuses_what_cannot_pair(random_qkv):
    cfg = Sm90Config(128, 128, 2, 128, 2)
    q, k, v = _inputs(random_qkv, cfg, 1, 4, 1, 1100, 1100, torch.bfloat16)   # 9 tiles a head
    with pytest.raises(ValueError, match="even number"):
        flash_sm90.attention(q, k, v, config=cfg, _defines=CLUSTER)
    with pytest.raises(ValueError, match="fixed walk"):
        flash_sm90.attention(q, k, v, causal=True, config=cfg, _defines=CLUSTER)


def test_the_default_launch_pairs_long_plain_tiles(random_qkv):
    """Without knobs the launcher pairs a plain launch whose tiles stream at least CLUSTER_MIN_KEYS keys (here
    5000: a part-filled last chunk), through the SDPA layout and FlashAttention's (a strided view), and keeps the
    plain kernel where a head's tiles do not pair."""
    from kernels import flash_attn_func

    cfg = Sm90Config(128, 128, 2, 128, 2)
    q, k, v = _inputs(random_qkv, cfg, 2, 6, 2, 1024, 5000, torch.bfloat16)   # 8 tiles a head, GQA
    run = flash_sm90.plan(q, k, v, False, cfg)
    assert flash_sm90.CLUSTER in run.schedule.defines and run.prepared.grid[0] % 2 == 0
    o, lse = run(q, k, v, True)
    _against_float32(o, lse, q, k, v, cfg, torch.bfloat16)
    o_fa, lse_fa = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), return_lse=True)
    _against_float32(o_fa.transpose(1, 2), lse_fa, q, k, v, cfg, torch.bfloat16)
    q, k, v = _inputs(random_qkv, cfg, 1, 4, 1, 1100, 4096, torch.bfloat16)   # 9 tiles a head: the plain kernel
    assert flash_sm90.CLUSTER not in flash_sm90.plan(q, k, v, False, cfg).schedule.defines
    o, lse = flash_sm90.attention(q, k, v, config=cfg, return_lse=True)
    _against_float32(o, lse, q, k, v, cfg, torch.bfloat16)
