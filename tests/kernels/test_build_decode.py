"""CPU checks of the decode kernel (``flash_decode_sm80``): template names, the SMEM formula the model and
the launcher share, and an nvcc build of every shipped template variant for sm_80 (rows 16 and 32, causal
and not, contiguous and paged): no spills, no local memory, registers within the 255 a thread.  The build
tests skip when nvcc is not on PATH."""
from __future__ import annotations

import shutil

import pytest

from iomodel.families import flash_decode_sm80 as family
from kernels import compile, flash_decode_sm80, reports

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
TEMPLATES = sorted({(c.block_n, c.warps, c.stages, c.head_dim) for c in family.SHIPPED})


def _cfg(block_n, warps, stages, head_dim):
    return family.DecodeConfig(block_n, warps, stages, 1, head_dim)


VARIANTS = [(_cfg(*t), rows, dt, causal, paged) for t in TEMPLATES for rows in (16, 32)
            for dt in ("bf16", "fp16") for causal in (False, True) for paged in (False, True)
            if dt == "bf16" or t == TEMPLATES[0]]


def test_names_rows_and_smem():
    cfg = _cfg(64, 4, 3, 128)
    main, append = flash_decode_sm80.kernel_names(cfg, 16, "bf16", True, False)
    assert main == "iom::flash_decode_kernel<iom::bf16, 16, 64, 4, 3, 128, true, false>"
    assert append == "iom::kv_append_kernel<iom::bf16, 128, false>"
    assert [flash_decode_sm80.rows_tile(n) for n in (1, 16, 17, 32, 64)] == [16, 16, 32, 32, 32]
    assert [flash_decode_sm80.row_blocks(n) for n in (1, 16, 17, 64, 65)] == [1, 1, 1, 2, 3]
    # Q rows plus the ring of K and V chunks, as the kernel lays them out
    assert cfg.smem_bytes(16) == (16 + 2 * 3 * 64) * 128 * 2
    assert family.DecodeConfig(64, 4, 3, 8, 128).smem_bytes(32) == (32 + 2 * 3 * 64) * 128 * 2
    assert cfg.merge_bytes(32) <= 2 * 3 * 64 * 128 * 2   # the warps' merge fits in the ring


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("decode")
    cubin, log = compile.run_nvcc(flash_decode_sm80.offline_unit(VARIANTS), "sm_80", out, "decode",
                                  ("-Xptxas", "-v"))
    return str(cubin), log


@needs_nvcc
@pytest.mark.slow
def test_every_shipped_variant_builds_without_spills(build):
    _cubin, log = build
    ptxas = reports.parse_ptxas(log)
    mains = {n: r for n, r in ptxas.items() if "flash_decode_kernel" in n}
    assert len(mains) == len(VARIANTS)
    assert any("kv_append" in n for n in ptxas)
    for name, r in ptxas.items():
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["stack"] == 0, (name, r)
        assert r["registers"] <= 255, (name, r)


def test_the_chooser_sees_a_paged_cache(monkeypatch):
    """The kernel's choice takes the page size to the model: pages of 16 get more parts than the
    contiguous cache of the same shape (``kernels.kvcache.decode_shape``, ``decode_config``; the device
    an H100)."""
    from iomodel import chooser
    from kernels import dispatch
    from kernels.kvcache import decode_config, decode_shape
    from kernels.kvcache_checks import KVCall

    monkeypatch.setattr(dispatch, "choose", lambda names, shape, index: chooser.choose(list(names), "h100-sxm", shape))
    flat = KVCall(8, 1, 32, 8, 128, "bf16", False, 32768, 0, 32768, 0, 128 ** -0.5, None, None)
    paged = KVCall(8, 1, 32, 8, 128, "bf16", True, 16, 8 * 2048, 32768, 0, 128 ** -0.5, None, None)
    assert "page_size" not in decode_shape(flat, True) and decode_shape(paged, True)["page_size"] == 16
    assert decode_config(paged, True, None, 0, 0).parts > decode_config(flat, True, None, 0, 0).parts
