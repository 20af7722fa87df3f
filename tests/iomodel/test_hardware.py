"""Hardware facts: every shipped file loads, every number is sourced, bad files fail clearly."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from iomodel import hardware
from iomodel.hardware import (
    Calibration,
    GpuSpec,
    HardwareError,
    list_specs,
    load_calibration,
    load_spec,
    spec_for_device,
    write_calibration,
)

SHIPPED = ["a100-sxm-40gb", "a100-sxm-80gb", "h100-pcie", "h100-sxm", "h200-sxm"]
GOOD = hardware.DATA_DIR / "h100-sxm.toml"


def _walk_facts(table, prefix=""):
    """Yield (name, table) for every {value, unit, source} table in a parsed TOML."""
    for k, v in table.items():
        if isinstance(v, dict):
            if "value" in v:
                yield prefix + k, v
            else:
                yield from _walk_facts(v, prefix + k + ".")


def test_list_specs_has_every_shipped_gpu():
    assert list_specs() == sorted(SHIPPED)


@pytest.mark.parametrize("key", SHIPPED)
def test_shipped_spec_loads_and_every_number_is_sourced(key):
    spec = load_spec(key)
    assert isinstance(spec, GpuSpec)
    assert spec.key == key
    assert spec.arch in ("ampere", "hopper")
    # every number in the raw file is a table with a unit and a source
    raw = tomllib.loads((hardware.DATA_DIR / f"{key}.toml").read_text())
    numbers = [k for k, v in raw.items() if isinstance(v, (int, float)) and k != "schema_version"]
    assert numbers == [], f"bare numbers outside {{value, unit, source}} tables: {numbers}"
    facts = dict(_walk_facts(raw))
    assert len(facts) >= 25
    for name, table in facts.items():
        assert isinstance(table.get("unit"), str) and table["unit"].strip(), name
        assert isinstance(table.get("source"), str) and len(table["source"]) > 10, name
    # and the loaded spec keeps them all
    assert set(facts) <= set(spec.facts)
    for name, fact in spec.facts.items():
        assert fact.unit and fact.source, name


@pytest.mark.parametrize("key", SHIPPED)
def test_exact_attribute_set(key):
    spec = load_spec(key)
    names = {f.name for f in dataclasses.fields(spec)}
    expected = {
        "key", "name", "arch", "compute_capability", "aliases", "sm_count", "clock_hz",
        "hbm_bandwidth", "hbm_bytes", "l2_bytes", "smem_per_sm", "smem_per_block",
        "smem_reserved_per_block", "regs_per_sm", "regs_per_block", "regs_per_thread_max",
        "reg_alloc_unit", "max_threads_per_sm", "max_warps_per_sm", "max_blocks_per_sm",
        "max_threads_per_block", "schedulers_per_sm", "tensor_flops_per_clk_per_sm",
        "fp32_fma_per_clk_per_sm", "exp2_per_clk_per_sm", "smem_bytes_per_clk_per_sm",
        "mma_sync_shape", "wgmma", "launch_overhead_s", "facts", "path",
    }
    assert names == expected
    assert isinstance(spec.sm_count, int)
    assert isinstance(spec.smem_per_sm, int) and isinstance(spec.hbm_bytes, int)
    assert isinstance(spec.compute_capability, tuple) and len(spec.compute_capability) == 2
    assert spec.mma_sync_shape == (16, 8, 16)
    assert spec.regs_per_thread_max == 255
    assert spec.reg_alloc_unit == 256
    assert spec.schedulers_per_sm == 4
    assert spec.smem_reserved_per_block == 1024
    assert spec.exp2_per_clk_per_sm == 16
    assert spec.smem_bytes_per_clk_per_sm == 128
    assert 1e-6 <= spec.launch_overhead_s <= 1e-5
    assert "assumption" in spec.facts["launch_overhead_s"].source
    hash(spec)  # usable as a cache key


@pytest.mark.parametrize("key", SHIPPED)
def test_derived_rates_reproduce_datasheet_within_1pct(key):
    spec = load_spec(key)
    stated = {
        name.split(".", 1)[1]: fact.value
        for name, fact in spec.facts.items()
        if name.startswith("tensor_datasheet_flops.")
    }
    assert "bf16" in stated and "fp16" in stated
    assert set(stated) == set(spec.tensor_flops_per_clk_per_sm)
    for dtype, flops in stated.items():
        assert spec.peak_tensor_flops(dtype) == pytest.approx(flops, rel=0.01), dtype
        assert spec.facts[f"tensor_flops_per_clk_per_sm.{dtype}"].derived


def test_known_values():
    h100 = load_spec("h100-sxm")
    assert h100.sm_count == 132 and h100.clock_hz == 1.83e9
    assert h100.tensor_flops_per_clk_per_sm["bf16"] == 4096
    assert h100.tensor_flops_per_clk_per_sm["fp8"] == 8192
    assert h100.peak_tensor_flops("bf16") == pytest.approx(989.4e12, rel=1e-3)
    assert h100.fp32_fma_per_clk_per_sm == 128
    assert h100.peak_fp32_flops == pytest.approx(2 * 128 * 132 * 1.83e9)
    assert h100.peak_exp2_per_s == pytest.approx(16 * 132 * 1.83e9)
    assert h100.hbm_bandwidth == pytest.approx(3.35e12)
    assert h100.smem_per_sm == 228 * 1024 and h100.smem_per_block == 227 * 1024
    assert h100.compute_capability == (9, 0)
    assert h100.wgmma == hardware.WgmmaShape(64, 16, 8, 256)
    assert h100.wgmma.valid_n(176) and not h100.wgmma.valid_n(260) and not h100.wgmma.valid_n(12)
    a100 = load_spec("a100-sxm-40gb")
    assert a100.wgmma is None and a100.arch == "ampere"
    assert a100.fp32_fma_per_clk_per_sm == 64
    assert a100.smem_per_sm == 164 * 1024 and a100.smem_per_block == 163 * 1024
    assert a100.hbm_bandwidth == pytest.approx(1.555e12)
    assert load_spec("a100-sxm-80gb").hbm_bandwidth == pytest.approx(2.039e12)
    assert load_spec("h200-sxm").hbm_bandwidth == pytest.approx(4.8e12)
    assert load_spec("h100-pcie").sm_count == 114
    with pytest.raises(HardwareError, match="no tensor-core rate for dtype 'fp8'"):
        a100.peak_tensor_flops("fp8")


def test_cache_returns_same_object():
    assert load_spec("h100-sxm") is load_spec("h100-sxm")
    assert load_spec(load_spec("h100-sxm")) is load_spec("h100-sxm")


@pytest.mark.parametrize(
    "device, key",
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
        ("NVIDIA H200", "h200-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("  nvidia h100 80gb hbm3 ", "h100-sxm"),
    ],
)
def test_alias_lookup(device, key):
    assert spec_for_device(device).key == key
    assert load_spec(device).key == key


def test_unknown_gpu_lists_known():
    with pytest.raises(HardwareError) as exc:
        load_spec("x")
    msg = str(exc.value)
    assert msg.startswith("unknown GPU 'x': known are ")
    for key in SHIPPED:
        assert key in msg
    assert "\n" not in msg
    with pytest.raises(HardwareError, match="unknown GPU device 'NVIDIA B200'.*NVIDIA H200"):
        spec_for_device("NVIDIA B200")


def test_user_toml_path_loads(tmp_path):
    text = GOOD.read_text().replace('key = "h100-sxm"', 'key = "my-gpu"')
    text = text.replace("value = 132\n", "value = 130\n", 1)
    text = text.replace(
        "[tensor_datasheet_flops.bf16]\nvalue = 989.4\n", "[tensor_datasheet_flops.bf16]\nvalue = 974.4\n"
    )
    text = re.sub(r"\[tensor_datasheet_flops\.(fp16|tf32|fp8)\]\n(.*\n){3}", "", text)
    p = tmp_path / "mine.toml"
    p.write_text(text)
    spec = load_spec(str(p))
    assert spec.key == "my-gpu" and spec.sm_count == 130
    assert spec.path == p.resolve()
    assert load_spec(p) is spec  # cached by path


def _mutated(tmp_path, old: str, new: str, count: int = 1) -> Path:
    text = GOOD.read_text()
    assert old in text, old
    p = tmp_path / "h100.toml"
    p.write_text(text.replace(old, new, count))
    return p


@pytest.mark.parametrize(
    "old, new, pattern",
    [
        ("[sm_count]\nvalue = 132\n", "[sm_countx]\nvalue = 132\n", r"^h100\.toml: field 'sm_count' missing$"),
        ("[sm_count]\nvalue = 132\n", "[sm_count]\nvalue = -132\n",
         r"^h100\.toml: field 'sm_count' must be a positive number"),
        ("[sm_count]\nvalue = 132\n", "[sm_count]\nvalue = \"many\"\n",
         r"^h100\.toml: field 'sm_count' must be a positive number"),
        ("[sm_count]\nvalue = 132\n", "[sm_count]\nvalue = 132.5\n",
         r"^h100\.toml: field 'sm_count' must be a whole number"),
        ("[sm_count]\nvalue = 132\n", "[sm_count]\nvalue = true\n",
         r"^h100\.toml: field 'sm_count' must be a positive number"),
        ("[hbm_bandwidth]\nvalue = 3.35\nunit = \"TB/s\"", "[hbm_bandwidth]\nvalue = 3.35\nunit = \"TB\"",
         r"^h100\.toml: field 'hbm_bandwidth' has unit 'TB' but needs one of"),
        ("[hbm_bandwidth]\nvalue = 3.35\nunit = \"TB/s\"", "[hbm_bandwidth]\nvalue = 3.35\nunit = \"\"",
         r"^h100\.toml: field 'hbm_bandwidth' has no unit$"),
        ("[clock_hz]\nvalue = 1830\nunit = \"MHz\"\nsource = ", "[clock_hz]\nvalue = 1830\nunit = \"MHz\"\nsourcex = ",
         r"^h100\.toml: field 'clock_hz' has no source$"),
        ("[compute_capability]\nvalue = [9, 0]", "[compute_capability]\nvalue = [9.0]",
         r"^h100\.toml: field 'compute_capability' must be a list of 2 whole numbers"),
        ("[tensor_flops_per_clk_per_sm.bf16]\nvalue = 4096", "[tensor_flops_per_clk_per_sm.bf16]\nvalue = 2048",
         r"^h100\.toml: field 'tensor_flops_per_clk_per_sm\.bf16' gives 494\.7 TFLOP/s"),
        ("[tensor_flops_per_clk_per_sm.bf16]\nvalue = 4096", "[tensor_flops_per_clk_per_sm.bf16]\nvalue = 0",
         r"^h100\.toml: field 'tensor_flops_per_clk_per_sm\.bf16' must be a positive number"),
        ("[wgmma.n_max]", "[wgmma.nmax]", r"^h100\.toml: field 'wgmma\.n_max' missing$"),
        ('arch = "hopper"', 'arch = "volta"', r"^h100\.toml: field 'arch' must be one of ampere, hopper"),
        ('key = "h100-sxm"\n', "", r"^h100\.toml: field 'key' missing$"),
        ("value = 228\nunit = \"KiB\"", "value = 100\nunit = \"KiB\"",
         r"^h100\.toml: field 'smem_per_block' exceeds 'smem_per_sm'$"),
    ],
)
def test_malformed_user_toml_names_the_field(tmp_path, old, new, pattern):
    p = _mutated(tmp_path, old, new)
    with pytest.raises(HardwareError, match=pattern) as exc:
        load_spec(str(p))
    assert "\n" not in str(exc.value)


def test_bare_number_is_rejected(tmp_path):
    text = re.sub(r"\[smem_per_sm\]\n(.*\n){3}", "", GOOD.read_text())
    text = text.replace('arch = "hopper"\n', 'arch = "hopper"\nsmem_per_sm = 233472\n')
    p = tmp_path / "h100.toml"
    p.write_text(text)
    with pytest.raises(HardwareError, match=r"^h100\.toml: field 'smem_per_sm' must be a table with value, unit and source$"):
        load_spec(str(p))


def test_not_toml_and_missing_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("this is = = not toml")
    with pytest.raises(HardwareError, match=r"^bad\.toml: not valid TOML"):
        load_spec(str(p))
    with pytest.raises(HardwareError, match="no such file"):
        load_spec(str(tmp_path / "absent.toml"))


def test_units_convert():
    spec = load_spec("h100-sxm")
    assert spec.facts["smem_per_sm"].unit == "KiB" and spec.facts["smem_per_sm"].raw == 228
    assert spec.launch_overhead_s == pytest.approx(3e-6)
    assert spec.l2_bytes == 50 * 2**20


# -- calibration --------------------------------------------------------------


def _last_run(gpu_key: str) -> dict:
    """The newest committed validation run of a GPU (runs numbered per date: run10 after run9)."""
    import json
    import re
    from pathlib import Path
    runs = sorted((Path(__file__).resolve().parents[2] / "validation" / "results").glob(f"{gpu_key}-*-run*.json"),
                  key=lambda p: (p.name.split("-run")[0], int(re.search(r"-run(\d+)", p.name).group(1))))
    assert runs, gpu_key
    return json.loads(runs[-1].read_text())


def test_shipped_calibrations():
    h100, h200 = load_calibration("h100-sxm"), load_calibration("h200-sxm")
    # each shipped calibration is the one the last committed validation run of its GPU measured and embedded
    for cal, device in ((h100, "NVIDIA H100 80GB HBM3"), (h200, "NVIDIA H200")):
        embedded = _last_run(cal.gpu_key)["calibration"]
        for name in ("gemm_flops", "copy_bandwidth", "l2_bandwidth", "mma_sync_flops_per_clk_per_sm",
                     "exp2_per_clk_per_sm", "fp32_fma_per_clk_per_sm", "clock_hz"):
            assert getattr(cal, name) == pytest.approx(embedded[name]), (cal.gpu_key, name)
        assert cal.device_name == device
    assert h200.clock_hz == pytest.approx(1.98e9)
    assert h200.mma_sync_flops(132) == pytest.approx(648e12, rel=0.01)
    # the L2 read rate (an 8 MiB buffer re-read by every SM) is about twice the H100's HBM copy rate
    assert 7e12 < h100.l2_bandwidth < 9e12 and 8e12 < h200.l2_bandwidth < 1.1e13
    # cuBLAS reaches about 80% of the dense datasheet peak at 8192^3, as on the H100
    assert 0.7 < h200.gemm_flops / load_spec("h200-sxm").peak_tensor_flops("bf16") < 0.9
    for cal in (h100, h200):
        for name in cal.measured():
            assert cal.sources[name], name
    # by alias and by spec, too
    assert load_calibration("NVIDIA H200") == h200
    assert load_calibration(load_spec("h100-sxm")) == h100
    assert load_calibration("a100-sxm-40gb") is None


def test_calibration_round_trip(tmp_path):
    cal = Calibration(
        gpu_key="h100-sxm",
        device_name='NVIDIA "H100" 80GB HBM3',
        date="2026-11-23",
        source="python -m validation run\nline two",
        clock_hz=1.98e9,
        gemm_flops=7.021e14,
        mma_sync_flops_per_clk_per_sm=2466.5,
        copy_bandwidth=3.1e12,
        exp2_per_clk_per_sm=None,
        fp32_fma_per_clk_per_sm=122,
        sources={"clock_hz": "median of nvidia-smi clocks.sm samples"},
    )
    p = write_calibration(tmp_path / "sub" / "h100-sxm.toml", cal, create_parent=True)
    assert p.is_file()
    assert not list(p.parent.glob("*.tmp"))
    back = load_calibration(str(p))
    assert back == cal
    assert back.exp2_per_clk_per_sm is None
    assert back.sources["clock_hz"] == "median of nvidia-smi clocks.sm samples"
    assert back.sources["gemm_flops"]  # falls back to the overall source
    d = hardware.calibration_to_dict(back)
    assert hardware.calibration_from_dict(d) == cal


def test_calibration_rejects_bad_values(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('gpu_key = "h100-sxm"\n[gemm_flops]\nvalue = -1.0\nunit = "FLOP/s"\nsource = "x"\n')
    with pytest.raises(HardwareError, match=r"^c\.toml: field 'gemm_flops' must be a positive number"):
        load_calibration(str(p))
    p.write_text('[gemm_flops]\nvalue = 1.0\nunit = "FLOP/s"\nsource = "x"\n')
    with pytest.raises(HardwareError, match=r"field 'gpu_key' missing"):
        load_calibration(str(p))
    p.write_text('gpu_key = "h100-sxm"\n[gemm_flop]\nvalue = 1.0\nunit = "FLOP/s"\nsource = "x"\n')
    with pytest.raises(HardwareError, match=r"unknown field 'gemm_flop'"):
        load_calibration(str(p))
    with pytest.raises(HardwareError, match="must be a positive number"):
        write_calibration(tmp_path / "w.toml", Calibration(gpu_key="x", gemm_flops=float("nan")))
