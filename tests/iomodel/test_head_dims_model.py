"""Head dims 32 to 256 in the model: SMEM rows padded to whole swizzle groups (``Diagram.stage(...,
row_align=)``: d = 32 and 96 take rows of 64 and 128 values, no extra bytes from global memory), the
forward families' configs at every head dim, and the chooser's pick among the shipped ones."""
from __future__ import annotations

import pytest
import sympy as sp

from diagrams import library
from diagrams.core import DiagramError
from diagrams.diagram import as_program
from iomodel import families
from iomodel.api import predict
from iomodel.chooser import choose
from iomodel.derive import derive

DIMS = (32, 64, 96, 128, 192, 256)


def _shape(d, **kw):
    return {"B": 4, "H": 16, "N_q": 4096, "N_k": 4096, "d": d, "causal": True, "dtype": "bf16", **kw}


def test_row_align_pads_the_smem_tile_and_moves_no_more_bytes():
    plain = derive(as_program(library.flash_attention(stages=2)), exact=False).kernels[0]
    padded = derive(as_program(library.flash_attention(stages=2, smem_row_align=64)), exact=False).kernels[0]
    syms = {s.name: s for s in plain.smem_bytes.free_symbols}
    for d, row in ((32, 64), (64, 64), (96, 128), (192, 192)):
        at = {syms["d"]: d, syms["Br"]: 128, syms["Bc"]: 64}
        assert padded.smem_bytes.subs(at) == plain.smem_bytes.subs({**at, syms["d"]: row})
        assert sp.simplify(padded.global_bytes - plain.global_bytes) == 0
    with pytest.raises(DiagramError, match="only an array staged in SMEM takes row_align"):
        library.flash_attention().stage("Q", "reg", row_align=64)


@pytest.mark.parametrize("name", ["flash_sm80", "flash_sm90"])
@pytest.mark.parametrize("d", DIMS)
def test_every_head_dim_has_shipped_configs_the_model_ranks(name, d):
    fam = families.get(name)
    shipped = fam.shipped_for(_shape(d))
    assert shipped, f"{name} ships no config for d = {d}"
    pick = choose([name], "h100-sxm", _shape(d))
    assert pick.config in shipped and pick.config.head_dim == d
    p = predict(name, "h100-sxm", _shape(d), pick.config)
    assert p.smem_bytes == pick.config.smem_bytes(2)   # the padded rows, exactly as the kernel asks
    assert p.feasible and p.spilled_regs == 0


def test_the_a100_takes_every_shipped_mma_sync_config():
    for cfg in families.get("flash_sm80").shipped:
        assert cfg.smem_bytes(2) <= 163 * 1024, cfg
    a100 = choose(["flash_sm80"], "a100-sxm-80gb", _shape(96))
    assert a100.config.head_dim == 96
