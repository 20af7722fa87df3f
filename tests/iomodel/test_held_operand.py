"""An input held in registers through the streams (`Diagram.hold`): its SMEM reads leave the loops it does not
carry, its unit tile joins the registers, its fragments leave the per-k count; a 0/1 symbol chooses per config
(flash_sm80's q_regs), and the model's pick and registers follow."""
import dataclasses

import pytest
import sympy as sp

from diagrams import library
from diagrams.core import DiagramError
from iomodel import api, families
from iomodel.derive import derive_kernel
from iomodel.errors import ModelError
from iomodel.families.flash_sm80 import FlashConfig
from iomodel.symbolic import sym
from iomodel.tiles import parse_tiles

B, H, N, M, d, Br, Bc, w = (sym(n) for n in ("B", "H", "N", "M", "d", "Br", "Bc", "w"))


def _q_reads(k):
    (t,) = [t for t in k.transfers if t.array == "Q" and t.boundary == "smem->reg"]
    return t


def test_a_held_input_is_read_once_a_block_and_takes_its_tile_in_registers():
    flash = library.flash_attention(block_m="Br", block_n="Bc", warps="w", stages=2)
    plain, held = derive_kernel(flash), derive_kernel(flash.hold("Q"))
    # every warp reads its Br/w x d tile of Q once a block, not once per key chunk
    assert sp.simplify(_q_reads(plain).count - B * H * N * M * w / (Br * Bc)) == 0
    assert sp.simplify(_q_reads(held).count - B * H * N * w / Br) == 0
    assert _q_reads(held).tile_elements == _q_reads(plain).tile_elements
    # its tile (Br/w x d, 16-bit) stays in registers: Br d / (64 w) a thread more
    assert sp.simplify(held.regs_per_thread - plain.regs_per_thread - Br * d / (64 * w)) == 0
    # its fragments are no longer loaded per k step: S = Q K^T's share is K's alone
    assert sp.simplify(plain.fragment_bytes_per_k - sp.Max(2 * d, 2 * Bc + 2 * Br / w)) == 0
    assert sp.simplify(held.fragment_bytes_per_k - sp.Max(2 * d, 2 * Bc)) == 0


def test_a_symbolic_flag_is_either_diagram():
    flash = library.flash_attention(block_m="Br", block_n="Bc", warps="w", stages=2)
    plain, held, either = (derive_kernel(x) for x in (flash, flash.hold("Q"), flash.hold("Q", "qr")))
    qr = sym("qr")
    for value, ref in ((0, plain), (1, held)):
        assert sp.simplify(either.regs_per_thread.subs(qr, value) - ref.regs_per_thread) == 0
        assert sp.simplify(_q_reads(either).count.subs(qr, value) - _q_reads(ref).count) == 0
        assert sp.simplify(either.fragment_bytes_per_k.subs(qr, value) - ref.fragment_bytes_per_k) == 0
    assert flash.hold("Q", 0).held == () and flash.hold("Q").hold("Q", 0).held == ()


@pytest.mark.parametrize("name,flag,message", [
    ("S", 1, "not an input"), ("Q", 2, "0, 1 or a symbol"), ("Q", 0.5, "0, 1 or a symbol"),
    ("Q", sp.Integer(3), "must name a symbol")])
def test_hold_refuses_what_it_cannot_hold(name, flag, message):
    with pytest.raises(DiagramError, match=message):
        library.flash_attention().hold(name, flag)
    with pytest.raises(DiagramError, match="stage it in SMEM first"):
        library.attention().hold("Q")


def test_renaming_keeps_what_is_held():
    d = library.flash_attention().hold("Q")
    assert d.rename_array("Q", "X").held == (("X", 1),)


SHAPE = dict(B=2, H=8, H_kv=8, N_q=8192, N_k=8192, d=192, causal=False, dtype="bf16")


def test_flash_sm80s_q_regs_is_a_config_switch():
    fam = families.get("flash_sm80")
    held = FlashConfig(128, 64, 8, 2, 192, q_regs=1)
    assert fam.label(held) == "128x64 w8 s2 qregs" and fam.label(dataclasses.replace(held, q_regs=0)) == "128x64 w8 s2"
    assert "16*warps" in " ".join(FlashConfig(128, 64, 4, 2, 128, q_regs=1).problems())
    assert "0 or 1" in " ".join(FlashConfig(64, 64, 4, 2, 128, q_regs=2).problems())
    # left out it is 0 (configs written before it, --tiles without it); given, it may be 0
    assert fam.config({"block_m": 128, "block_n": 64, "warps": 8, "stages": 2}, SHAPE).q_regs == 0
    assert parse_tiles("flash_sm80", "block_m=128,block_n=64,warps=8,stages=2,q_regs=0")["q_regs"] == 0
    with pytest.raises(ModelError, match="missing stages"):
        parse_tiles("flash_sm80", "block_m=128,block_n=64,warps=8")
    assert {0, 1} <= {c.q_regs for c in fam.candidates(SHAPE) if not c.problems()}


@pytest.mark.parametrize("causal", [False, True])
def test_the_model_holds_q_at_d192_for_its_smem_reads_and_counts_the_registers(causal):
    shape = dict(SHAPE, causal=causal)
    held = FlashConfig(128, 64, 8, 2, 192, q_regs=1)
    p_held, p_plain = (api.predict("flash_sm80", "h100-sxm", shape, c) for c in (held, dataclasses.replace(held, q_regs=0)))
    assert p_held.time_s < p_plain.time_s and p_held.terms["smem"] < p_plain.terms["smem"]
    assert p_held.terms["tensor"] == pytest.approx(p_plain.terms["tensor"])
    assert p_held.regs_per_thread > p_plain.regs_per_thread
    shipped = families.get("flash_sm80").shipped_for(shape)
    best = api.rank_configs("flash_sm80", "h100-sxm", shape, shipped)[0]
    assert best.config.q_regs == 1
