"""The install's CUDA versions without a GPU: the extra for a driver's CUDA, the one-line message when NVRTC
is newer than the driver, the NVRTC wheel of the driver's CUDA preferred, and the extras in pyproject.toml."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from kernels import compile
from kernels.cuda_versions import EXTRAS, extra_for, mismatch


def test_the_extra_of_each_driver():
    assert extra_for(12) == "gpu-cu12" and extra_for(13) == "gpu-cu13"
    assert extra_for(14) == "gpu-cu13" and extra_for(11) == "gpu-cu12"


@pytest.mark.parametrize("nvrtc, driver, ok", [((13, 0), 13000, True), ((13, 0), 13020, True), ((12, 4), 13000, True),
                                               ((12, 8), 12040, True), ((13, 0), 12080, False), ((13, 1), 12040, False)])
def test_nvrtc_newer_than_the_driver_names_the_extra(nvrtc, driver, ok):
    msg = mismatch(nvrtc, driver)
    assert (msg == "") is ok
    if not ok:
        assert "\n" not in msg and f"pip install 'iomodel[{extra_for(driver // 1000)}]'" in msg
        assert f"NVRTC is CUDA {nvrtc[0]}.{nvrtc[1]} but the driver supports CUDA {driver // 1000}." in msg


def test_the_extras_install_cupy_and_nvrtc_of_their_cuda():
    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for major, name in EXTRAS.items():
        deps = " ".join(extras[name])
        assert f"cupy-cuda{major}x" in deps and "torch" in deps and "nvidia-cuda-nvrtc" in deps
    assert extras["gpu"] == [d for d in extras["gpu-cu13"] if not d.startswith("nvidia-cuda-nvrtc")]


def test_the_wheel_of_the_drivers_cuda_comes_first(monkeypatch, tmp_path):
    """Both NVRTC wheels installed: the one of the driver's major is found first."""
    import sys
    import types

    for package, lib, _major in compile.NVRTC_WHEELS:
        d = tmp_path / package.replace(".", "_") / "lib"
        d.mkdir(parents=True)
        (d / lib).write_bytes(b"")
        mod = types.ModuleType(package)
        mod.__path__ = [str(d.parent)]
        monkeypatch.setitem(sys.modules, package, mod)
    monkeypatch.delenv("IOMODEL_LIBNVRTC", raising=False)
    assert compile.find_libnvrtc(12).endswith("libnvrtc.so.12")
    assert compile.find_libnvrtc(13).endswith("libnvrtc.so.13")
    monkeypatch.setenv("IOMODEL_LIBNVRTC", "/x/libnvrtc.so")
    assert compile.find_libnvrtc(12) == "/x/libnvrtc.so"
