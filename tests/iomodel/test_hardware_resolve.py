"""resolve_gpu (one resolver for every tool) and the table-driven spec/calibration readers."""

from __future__ import annotations

import copy
import dataclasses
import tomllib

import pytest

from iomodel.files import write_text_atomic
from iomodel.hardware import (
    DATA_DIR,
    GpuSpec,
    HardwareError,
    UnknownGpuError,
    calibration_from_dict,
    list_specs,
    load_calibration,
    load_spec,
    resolve_gpu,
)
from iomodel.hardware.calibration import CAL_FIELDS
from iomodel.hardware.facts import UNITS
from iomodel.hardware.spec_schema import SPEC_FIELDS, parse_spec

H100 = tomllib.loads((DATA_DIR / "h100-sxm.toml").read_text())
A100 = tomllib.loads((DATA_DIR / "a100-sxm-40gb.toml").read_text())
WHERE = "h100.toml"


def _parse_mutated(base: dict, mutate) -> GpuSpec:
    data = copy.deepcopy(base)
    mutate(data)
    return parse_spec(data, WHERE, None)


def _one_line_error(base: dict, mutate) -> str:
    with pytest.raises(HardwareError) as exc:
        _parse_mutated(base, mutate)
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


# -- resolve_gpu ----------------------------------------------------------------

def test_resolve_known_key_is_the_cached_spec():
    assert resolve_gpu("h100-sxm") is load_spec("h100-sxm")


@pytest.mark.parametrize("device, key", [("NVIDIA H100 80GB HBM3", "h100-sxm"), ("nvidia  h200", "h200-sxm"),
                                         ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb")])
def test_resolve_device_name(device, key):
    assert resolve_gpu(device).key == key


def test_resolve_passes_a_spec_through():
    mine = dataclasses.replace(load_spec("h100-sxm"), key="my-gpu", sm_count=100)
    assert resolve_gpu(mine) is mine


def test_resolve_toml_path():
    path = DATA_DIR / "a100-sxm-40gb.toml"
    assert resolve_gpu(path).key == "a100-sxm-40gb"
    assert resolve_gpu(str(path)).key == "a100-sxm-40gb"


def test_resolve_unknown_suggests_the_close_key():
    with pytest.raises(UnknownGpuError) as exc:
        resolve_gpu("h100-sxn")
    msg = str(exc.value)
    assert isinstance(exc.value, HardwareError) and isinstance(exc.value, ValueError)
    assert "\n" not in msg
    assert msg.startswith("unknown GPU 'h100-sxn': known are ")
    assert all(key in msg for key in list_specs())
    assert msg.endswith("; did you mean 'h100-sxm'?")


def test_resolve_unknown_suggests_a_close_alias():
    msg = str(pytest.raises(UnknownGpuError, resolve_gpu, "NVIDIA H100 80GB HBM").value)
    assert msg.endswith("did you mean 'NVIDIA H100 80GB HBM3'?")


def test_resolve_unknown_without_a_close_name_has_no_suggestion():
    msg = str(pytest.raises(UnknownGpuError, resolve_gpu, "zzz").value)
    assert msg == f"unknown GPU 'zzz': known are {', '.join(list_specs())}"


def test_resolve_missing_or_broken_file_says_so(tmp_path):
    with pytest.raises(HardwareError, match="absent.toml: no such file") as exc:
        resolve_gpu(str(tmp_path / "absent.toml"))
    assert not isinstance(exc.value, UnknownGpuError)
    bad = tmp_path / "mine.toml"
    bad.write_text((DATA_DIR / "h100-sxm.toml").read_text().replace("[sm_count]", "[sm_countx]"))
    with pytest.raises(HardwareError, match=r"^mine\.toml: field 'sm_count' missing$"):
        resolve_gpu(str(bad))


# -- the spec table -------------------------------------------------------------

def test_table_covers_every_spec_attribute():
    header = {"key", "name", "arch", "aliases", "facts", "path"}
    attrs = {f.name for f in dataclasses.fields(GpuSpec)} - header
    assert {f.name for f in SPEC_FIELDS if f.on_spec} == attrs
    assert all(f.dim is None or f.dim in UNITS for f in SPEC_FIELDS)


@pytest.mark.parametrize("f", [f for f in SPEC_FIELDS if f.required is True], ids=lambda f: f.name)
def test_required_field_missing(f):
    assert _one_line_error(H100, lambda d: d.pop(f.name)) == f"{WHERE}: field '{f.name}' missing"


@pytest.mark.parametrize("f", [f for f in SPEC_FIELDS if f.required is False], ids=lambda f: f.name)
def test_optional_field_may_be_absent(f):
    base = H100 if f.name in H100 else A100   # the L2 bandwidth estimate is A100's only
    assert f.name in base
    spec = _parse_mutated(base, lambda d: d.pop(f.name))
    assert not any(name.split(".")[0] == f.name for name in spec.facts)


def test_arch_required_field():
    msg = _one_line_error(H100, lambda d: d.pop("wgmma"))
    assert msg == f"{WHERE}: field 'wgmma' missing (arch is hopper)"
    assert parse_spec(A100, "a100.toml", None).wgmma is None
    msg = _one_line_error(H100, lambda d: d["wgmma"].pop("n_multiple"))
    assert msg == f"{WHERE}: field 'wgmma.n_multiple' missing"


@pytest.mark.parametrize("f", [f for f in SPEC_FIELDS if f.layout == "fact"], ids=lambda f: f.name)
def test_bare_number_names_the_field(f):
    msg = _one_line_error(H100, lambda d: d.__setitem__(f.name, 5))
    assert msg == f"{WHERE}: field '{f.name}' must be a table with value, unit and source"


@pytest.mark.parametrize("f", [f for f in SPEC_FIELDS if f.dim], ids=lambda f: f.name)
def test_wrong_unit_names_the_field_and_the_units(f):
    base = H100 if f.name in H100 else A100

    def mutate(d):
        table = d[f.name] if f.layout == "fact" else next(iter(d[f.name].values()))
        table["unit"] = "furlong"
    msg = _one_line_error(base, mutate)
    sub = f.name if f.layout == "fact" else f"{f.name}.{next(iter(base[f.name]))}"
    assert msg == f"{WHERE}: field '{sub}' has unit 'furlong' but needs one of {', '.join(UNITS[f.dim])}"


@pytest.mark.parametrize("f", [f for f in SPEC_FIELDS if f.layout == "by_dtype"], ids=lambda f: f.name)
def test_per_dtype_table_must_hold_dtypes(f):
    msg = _one_line_error(H100, lambda d: d.__setitem__(f.name, {}))
    assert msg == f"{WHERE}: field '{f.name}' must be a table of dtype -> {{value, unit, source}}"


def test_whole_number_fields_reject_fractions():
    msg = _one_line_error(H100, lambda d: d["regs_per_sm"].__setitem__("value", 65536.5))
    assert msg == f"{WHERE}: field 'regs_per_sm' must be a whole number (got 65536.5 32-bit registers)"


# -- the calibration table ------------------------------------------------------

@pytest.mark.parametrize("f", CAL_FIELDS, ids=lambda f: f.name)
def test_calibration_field_errors(tmp_path, f):
    p = tmp_path / "c.toml"
    p.write_text(f'gpu_key = "h100-sxm"\n[{f.name}]\nvalue = 1.0\nunit = "furlong"\nsource = "x"\n')
    with pytest.raises(HardwareError) as exc:
        load_calibration(str(p))
    assert str(exc.value) == f"c.toml: field '{f.name}' has unit 'furlong' but needs one of {', '.join(UNITS[f.dim])}"
    p.write_text(f'gpu_key = "h100-sxm"\n{f.name} = 1.0\n')
    with pytest.raises(HardwareError, match=rf"^c\.toml: field '{f.name}' must be a table with value, unit and source$"):
        load_calibration(str(p))
    with pytest.raises(HardwareError, match=rf"^calibration: field '{f.name}' must be a positive number \(got -1\)$"):
        calibration_from_dict({"gpu_key": "k", f.name: -1})
    p.write_text(f'gpu_key = "h100-sxm"\n[{f.name}]\nvalue = 2\nunit = "{f.unit}"\nsource = "x"\n')
    assert getattr(load_calibration(str(p)), f.name) == pytest.approx(2.0 * UNITS[f.dim][f.unit])   # base units


# -- the atomic writer ----------------------------------------------------------

def test_write_text_atomic_replaces_whole_and_leaves_no_temp(tmp_path):
    p = write_text_atomic(tmp_path / "sub" / "out.txt", "one\n", create_parent=True)
    assert p.read_text() == "one\n"
    write_text_atomic(p, "two\n")
    assert p.read_text() == "two\n"
    assert [x.name for x in p.parent.iterdir()] == ["out.txt"]


def test_every_calibration_field_survives_a_write_and_a_read(tmp_path):
    """What write_calibration writes, load_calibration reads back to the same number (in base units)."""
    from iomodel.hardware.calibration import Calibration, calibration_toml

    values = {f.name: 1.5e-7 if f.dim == "time" else 3.0e12 for f in CAL_FIELDS}
    cal = Calibration(gpu_key="h100-sxm", **values, sources={k: "test" for k in values})
    p = tmp_path / "c.toml"
    p.write_text(calibration_toml(cal))
    back = load_calibration(str(p))
    for name, value in values.items():
        assert getattr(back, name) == pytest.approx(value), name
