"""The online softmax with a stale row max (``Diagram.online_softmax(stale_max=...)``): the mma.sync forward's
policy (kernels/csrc/warp_tiles.cuh RESCALE_STALE), its work in the model against the eager softmax
FlashAttention-2 runs (the peer's model, ``flash_sm80_eager``), the header's constants and the pseudocode."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from diagrams import library
from diagrams.core import DiagramError, NormalizedContraction
from iomodel import api, peers
from iomodel.families import flash_sm80
from iomodel.families.flash_sm80 import FlashConfig
from iomodel.pseudocode import pseudocode

CSRC = Path(__file__).resolve().parents[2] / "kernels" / "csrc"


def _contraction(d) -> NormalizedContraction:
    return next(op for op in d.ops if isinstance(op, NormalizedContraction))


def test_a_stale_max_drops_the_per_chunk_rescale_and_keeps_a_compare():
    eager, stale = (_contraction(library.flash_attention(stale_max=m)) for m in (0.0, 8.0))
    assert stale.stale_max == 8.0 and eager.stale_max == 0.0
    per_chunk = lambda op: [w for w in op.extra_work() if w.per == "chunk"]
    assert [w.costs for w in per_chunk(eager)] == [eager.rescale_costs, eager.out_rescale_costs]
    (only,) = per_chunk(stale)
    assert only.costs == stale.stale_costs and only.axes == stale.state_arrays()[0].axis_names
    with pytest.raises(DiagramError, match="stale_max"):
        library.flash_attention(stale_max=-1.0)


@pytest.mark.parametrize("causal", [False, True])
def test_the_kernel_and_the_peer_differ_by_the_rescale_work_alone(causal):
    # B H N_q rows over ceil(N_k / 64) chunks: the eager softmax's exp of each row's correction and an FMUL per
    # accumulator element (d of them a row) every chunk; the same tensor work, the kernel predicted faster
    B, H, N, d = 2, 4, 1024, 128
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
    cfg = FlashConfig(128, 64, 4, 2, d)
    ours = api.predict("flash_sm80", "h100-sxm", shape, cfg)
    fa2 = peers.peer_prediction("sdpa_flash", "h100-sxm", shape)
    assert fa2.kernel == flash_sm80.EAGER_PEER.name
    if not causal:
        row_chunks = B * H * N * (N // 64)
        assert fa2.executed_flops["exp"] - ours.executed_flops["exp"] == row_chunks
        assert fa2.executed_flops["fp32"] - ours.executed_flops["fp32"] == row_chunks * d
    assert fa2.executed_flops["tensor"] == ours.executed_flops["tensor"]
    assert api.predict(flash_sm80.EAGER_PEER.name, "h100-sxm", shape, cfg).time_s > ours.time_s


def test_the_header_and_the_model_agree_on_the_policy():
    tiles = (CSRC / "warp_tiles.cuh").read_text()
    margin = re.search(r"constexpr float STALE_LOG2 = ([0-9.]+)f;", tiles)
    assert margin and float(margin.group(1)) == flash_sm80.STALE_LOG2
    fwd = (CSRC / "flash_fwd_sm80.cuh").read_text()
    assert re.search(r"#define IOM_FWD_RESCALE RESCALE_STALE\b", fwd)
    assert "online_softmax<T, MT, NT, DT, IOM_FWD_RESCALE>" in fwd
    assert _contraction(flash_sm80.FAMILY.build(False, False)).stale_max == flash_sm80.STALE_LOG2


def test_the_pseudocode_says_when_it_rescales():
    stale = pseudocode(flash_sm80.FAMILY.build(True, False))
    assert "2^8" in stale and "stale" in stale and "_acc *= alpha" in stale
    eager = pseudocode(flash_sm80.EAGER_PEER.build(True, False))
    assert "stale" not in eager and "rescale: alpha = exp(m - m_new)" in eager


def test_with_stale_max_sets_the_margin_of_a_relabeled_diagram():
    d = library.flash_attention(stale_max=8.0)
    banded = library.window_band(d, True, False)
    assert _contraction(banded.with_stale_max(0.0)).stale_max == 0.0
    assert _contraction(banded.with_stale_max(0.0).with_stale_max(4.0)).stale_max == 4.0
    assert _contraction(banded).stale_max == 8.0   # a copy: the diagram it came from keeps its margin
    with pytest.raises(DiagramError, match="with_stale_max"):
        d.with_stale_max(-1.0)
    plain = library.attention()
    with pytest.raises(DiagramError, match="no online softmax"):
        plain.with_stale_max(0.0)


@pytest.mark.parametrize("causal, window, mods, stale", [
    (False, None, (), True), (True, None, (), False), (False, (True, True), (), True), (False, (True, False), (), True),
    (False, None, ("softcap",), False), (True, None, ("alibi",), False), (False, (True, True), ("softcap",), False)])
def test_the_wgmma_model_keeps_a_stale_max_where_its_kernel_does(causal, window, mods, stale):
    # FwdTraits::kStaleLog2: the plain and window kernels keep one, the plain causal and score-modifier ones do not
    from iomodel.families import flash_sm90

    d = api.family_diagram("flash_sm90", causal, False, "bf16", window, mods)
    assert _contraction(d).stale_max == (flash_sm90.STALE_LOG2 if stale else 0.0)


def test_the_wgmma_stale_max_takes_the_rescale_work_off_the_plain_kernel_alone():
    from iomodel.families.flash_sm90 import Sm90Config

    cfg, base = Sm90Config(128, 128, 2, 128, 2), {"B": 1, "H": 4, "H_kv": 4, "N_q": 2048, "N_k": 2048, "d": 128,
                                                  "dtype": "bf16"}
    plain = api.predict("flash_sm90", "h100-sxm", {**base, "causal": False}, cfg).executed_flops
    capped = api.predict("flash_sm90", "h100-sxm", {**base, "causal": False, "softcap": 30.0}, cfg).executed_flops
    # rows x chunks: the eager softmax's EX2 of each row's correction, beside the softcap's tanh a score
    rows_chunks, scores = 4 * 2048 * (2048 // 128), 4 * 2048 * 2048
    assert capped["exp"] - plain["exp"] == scores + rows_chunks


def test_the_wgmma_header_and_the_model_agree_on_the_policy():
    from iomodel.families import flash_sm90

    fwd = (CSRC / "flash_fwd_sm90.cuh").read_text()
    margin = re.search(r"#define SM90_STALE_LOG2 ([0-9]+)\n", fwd)
    assert margin and float(margin.group(1)) == flash_sm90.STALE_LOG2
    assert re.search(r"#define SM90_STALE_LOCAL 1\n", fwd)
    assert "((!kCausal_ && !kLocal_) || (kLocal_ && SM90_STALE_LOCAL)) && kMods_ == 0" in fwd
    assert flash_sm90.FAMILY.mods_eager


@pytest.mark.parametrize("args, stale, shown", [
    ((), True, None), (("--causal",), False, None),
    (("--causal", "--window-size", "4096,0", "--seqlen", "32768"), True, "flash-attention-window"),
    (("--softcap", "30"), False, "tanh")])
def test_the_pseudocode_shows_the_variant_the_model_derives(cli, args, stale, shown):
    # pseudocode draws the shape's own variant (its window and score modifiers), each with its kernel's policy
    code, out, _ = cli("pseudocode", "--kernel", "flash_sm90", *args)
    assert code == 0
    assert ("# else m stays (stale)" in out) == stale and ("rescale: alpha = exp(m - m_new)" in out) != stale
    assert shown is None or shown in out
