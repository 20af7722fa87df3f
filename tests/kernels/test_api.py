"""CPU tests of the package's plumbing: import weight, dispatch by family and config, the one compile
cache (with a stand-in NVRTC), and a real NVRTC build where libnvrtc is installed."""
from __future__ import annotations

import subprocess
import sys

import pytest

import kernels
from iomodel.families.flash_sm80 import FlashConfig
from iomodel.families.flash_sm90 import Sm90Config
from kernels import codegen, compile, dispatch


def test_import_needs_no_torch_or_cupy():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['cupy'] = None\n"
            "import kernels, kernels.dispatch, kernels.checks, kernels.flash_sm80, kernels.flash_sm90, "
            "kernels.unfused, kernels.compile, kernels.driver, kernels.codegen, kernels.reports, kernels.runtime\n"
            "bad = [m for m, mod in sys.modules.items()\n"
            "       if mod is not None and m.split('.')[0] in ('torch', 'cupy', 'sympy')]\n"
            "assert not bad, bad")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_dispatch_by_name_and_config():
    for name in dispatch.RUNNABLE:
        assert dispatch.runner(name).FAMILY == name
    with pytest.raises(ValueError, match="did you mean flash_sm80"):
        kernels.run("flash_sm8", None, None, None)
    with pytest.raises(ValueError, match="backend"):
        kernels.flash_attention(None, None, None, backend="sm70")
    assert dispatch.config_family(FlashConfig(128, 64, 4, 2, 128)) == "flash_sm80"
    assert dispatch.config_family(Sm90Config(128, 128, 2, 128, 2)) == "flash_sm90"
    assert dispatch.config_family({"block_m": 128, "block_n": 128, "stages": 2, "consumers": 2}) == "flash_sm90"
    assert dispatch.config_family({"block_m": 128, "block_n": 64, "warps": 4, "stages": 2}) == "flash_sm80"
    assert dispatch.flash_family(None, None, None, False, None, "sm90") == ("flash_sm90", None)
    cfg = Sm90Config(128, 128, 2, 128, 2)
    assert dispatch.flash_family(None, None, None, False, cfg, "auto") == ("flash_sm90", cfg)


class FakeNvrtc:
    """Stands in for libnvrtc: a 'cubin' naming the options, lowered names derived from the expressions."""

    def __init__(self, fail=False):
        self.calls, self.fail = [], fail

    def compile(self, src, label, opts, names):
        self.calls.append((label, tuple(opts), tuple(names)))
        if self.fail:
            raise compile.CompileError(f"NVRTC failed for {label}:\nerror: boom")
        return " ".join(opts).encode(), {n: f"_Z{len(n)}{label}" for n in names}


@pytest.fixture
def fake_nvrtc(monkeypatch, tmp_path):
    fake = FakeNvrtc()
    monkeypatch.setattr(compile, "_get_nvrtc", lambda: fake)
    monkeypatch.setattr(compile, "_modules", {})
    monkeypatch.setenv("IOMODEL_KERNEL_CACHE", str(tmp_path / "cache"))
    return fake


def test_build_caches_in_memory_and_on_disk(fake_nvrtc, monkeypatch, tmp_path):
    src = '#include "flash_fwd_sm80.cuh"\n'
    name = codegen.flash_sm80_kernel(FlashConfig(128, 64, 4, 2, 128), "bf16", False)
    mod = compile.build(src, "sm_80", names=[name], label="t")
    assert mod.cubin == b"-std=c++17 --gpu-architecture=sm_80"
    assert mod.symbol(name) == f"_Z{len(name)}t" and mod.symbol("plain_c_name") == "plain_c_name"
    assert compile.build(src, "sm_80", names=[name], label="t") is mod        # memory
    assert len(list((tmp_path / "cache").glob("t-*.cubin"))) == 1
    monkeypatch.setattr(compile, "_modules", {})
    again = compile.build(src, "sm_80", names=[name], label="t")               # disk
    assert again == mod and len(fake_nvrtc.calls) == 1
    compile.build(src, "sm_90", names=[name], label="t")                       # another arch, another key
    compile.build(src, "sm_80", names=[name], defines=["SM90_WATCHDOG"], label="t")
    assert [c[1][1:] for c in fake_nvrtc.calls[1:]] == [("--gpu-architecture=sm_90",),
                                                        ("--gpu-architecture=sm_80", "-DSM90_WATCHDOG")]


def test_build_key_covers_the_included_headers(fake_nvrtc, monkeypatch, tmp_path):
    """The key hashes the inlined text: editing a header rebuilds."""
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "a.cuh").write_text("int a = 1;\n")
    monkeypatch.setattr(compile, "CSRC", tmp_path / "csrc")
    k1 = compile.build('#include "a.cuh"\n', "sm_80").key
    (tmp_path / "csrc" / "a.cuh").write_text("int a = 2;\n")
    assert compile.build('#include "a.cuh"\n', "sm_80").key != k1
    assert len(fake_nvrtc.calls) == 2


def test_compile_error_carries_the_log(monkeypatch, tmp_path):
    monkeypatch.setattr(compile, "_get_nvrtc", lambda: FakeNvrtc(fail=True))
    monkeypatch.setattr(compile, "_modules", {})
    monkeypatch.setenv("IOMODEL_KERNEL_CACHE", str(tmp_path))
    with pytest.raises(compile.CompileError, match="boom"):
        compile.build("int x;\n", "sm_80", label="bad")
    assert not list(tmp_path.glob("*"))


def _nvrtc_or_skip():
    try:
        return compile._get_nvrtc()
    except (RuntimeError, OSError) as exc:
        pytest.skip(f"no usable libnvrtc: {exc}")


def test_nvrtc_builds_templates_by_name_expression(monkeypatch, tmp_path):
    """The real NVRTC: a flash_sm80 module and the unfused one, their kernels found by template-id."""
    _nvrtc_or_skip()
    from iomodel.families import flash_sm80, matmul_sm80
    from kernels import flash_sm80 as run80, unfused

    monkeypatch.setenv("IOMODEL_KERNEL_CACHE", str(tmp_path))
    cfg = flash_sm80.SHIPPED[0]
    mod = run80.module(cfg, "bf16", True, compile.nvrtc_arch((8, 0)))
    name = codegen.flash_sm80_kernel(cfg, "bf16", True)
    assert mod.cubin[:4] == b"\x7fELF"
    # (the defaulted window flag, IS_LOCAL, score modifiers, MODS, and the tail split, SPLIT, are in the mangled name)
    assert mod.symbol(name).startswith("_ZN3iom16flash_fwd_kernelINS_4bf16ELi128ELi128ELi4ELi1ELi64ELb1ELb0ELb0ELi0ELb0EEE")
    assert mod.symbol(name).encode() in mod.cubin
    mods = unfused.module(matmul_sm80.SHIPPED[0], "fp16", "sm_80")
    assert all(mods.symbol(n).encode() in mods.cubin for n in codegen.unfused_kernels(matmul_sm80.SHIPPED[0], "fp16"))
    with pytest.raises(compile.CompileError, match="error"):
        compile.build("this is not C++\n", "sm_80", label="bad")


def test_precompile_builds_every_job(fake_nvrtc):
    names = [codegen.softmax_kernel(dt) for dt in codegen.DTYPES]
    jobs = [lambda n=n: compile.build('#include "unfused.cuh"\n', "sm_80", names=[n], label="p") for n in names]
    assert compile.precompile(jobs, workers=2) == 2
    assert sorted(c[2] for c in fake_nvrtc.calls) == [(n,) for n in sorted(names)]


def test_debugging_turns_debug_mode_on_for_a_block_and_restores_it():
    from kernels import runtime

    before = runtime.debug_enabled()
    try:
        runtime.set_debug(False)
        with runtime.debugging():
            assert runtime.debug_enabled()
        assert not runtime.debug_enabled()
        with runtime.debugging(False):
            assert not runtime.debug_enabled()
        runtime.set_debug(True)
        with runtime.debugging(False):   # leaves an enabled mode on
            assert runtime.debug_enabled()
        assert runtime.debug_enabled()
    finally:
        runtime.set_debug(before)
