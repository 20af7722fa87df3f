"""Spec and calibration TOML files read strictly: the schema version, unknown top-level fields, a
calibration's GPU, and files that are no TOML at all (binary, a folder, a named pipe), each refused in
one HardwareError line naming the file."""

from __future__ import annotations

import os
import random
import string

import pytest

from iomodel import hardware
from iomodel.hardware import Calibration, HardwareError, calibration, list_specs, load_calibration, load_spec

SEED = random.randrange(2**32)   # fresh made-up names every run; the seed is in every failure message
RNG = random.Random(SEED)
SPEC = (hardware.DATA_DIR / "h100-sxm.toml").read_text()
CAL = (hardware.CALIBRATION_DIR / "h100-sxm.toml").read_text()


def _field_name() -> str:
    """A made-up top-level field no schema knows."""
    return "x_" + "".join(RNG.choice(string.ascii_lowercase) for _ in range(RNG.randrange(3, 12)))


def _one_line(load, path) -> str:
    with pytest.raises(HardwareError) as exc:
        load(str(path))
    msg = str(exc.value)
    assert "\n" not in msg and path.name in msg, (SEED, msg)
    return msg


@pytest.mark.parametrize("text, base", [(SPEC, "spec"), (CAL, "calibration")])
@pytest.mark.parametrize("version", ["2", "0", '"1"', "1.0", "true"])
def test_schema_version_other_than_one_is_refused(tmp_path, text, base, version):
    p = tmp_path / f"{base}.toml"
    p.write_text(text.replace("schema_version = 1", f"schema_version = {version}", 1))
    load = load_spec if base == "spec" else load_calibration
    assert "is not supported (this iomodel reads 1)" in _one_line(load, p)


@pytest.mark.parametrize("text, base", [(SPEC, "spec"), (CAL, "calibration")])
def test_schema_version_absent_means_one(tmp_path, text, base):
    p = tmp_path / f"{base}.toml"
    p.write_text(text.replace("schema_version = 1\n", "", 1))
    loaded = load_spec(str(p)) if base == "spec" else load_calibration(str(p))
    assert loaded is not None


@pytest.mark.parametrize("text, base", [(SPEC, "spec"), (CAL, "calibration")])
def test_unknown_top_level_field_is_refused(tmp_path, text, base):
    field = _field_name()
    p = tmp_path / f"{base}.toml"
    head, rest = text.split("schema_version = 1\n", 1)
    p.write_text(f'{head}schema_version = 1\n{field} = "{RNG.random()}"\n{rest}')
    load = load_spec if base == "spec" else load_calibration
    assert _one_line(load, p).endswith(f"unknown field '{field}'"), SEED


def test_calibration_of_an_unknown_gpu_is_refused(tmp_path):
    key = "gpu-" + "".join(RNG.choice(string.ascii_lowercase) for _ in range(8))
    p = tmp_path / "c.toml"
    p.write_text(CAL.replace('gpu_key = "h100-sxm"', f'gpu_key = "{key}"'))
    msg = _one_line(load_calibration, p)
    assert f"field 'gpu_key' is {key!r}, not a known GPU (known are {', '.join(list_specs())})" in msg


def test_calibration_found_by_key_must_be_for_that_key(tmp_path, monkeypatch):
    """A file under the calibration folder named for one GPU but measured on another is refused; a
    user GPU's own calibration (a key no shipped spec has) still loads by its key."""
    monkeypatch.setattr(calibration, "CALIBRATION_DIR", tmp_path)
    (tmp_path / "h100-sxm.toml").write_text(CAL.replace('gpu_key = "h100-sxm"', 'gpu_key = "h200-sxm"'))
    with pytest.raises(HardwareError, match=r"^h100-sxm\.toml: field 'gpu_key' is 'h200-sxm' but the file is for "
                                            r"'h100-sxm'$"):
        load_calibration("h100-sxm")
    (tmp_path / "my-gpu.toml").write_text(CAL.replace('gpu_key = "h100-sxm"', 'gpu_key = "my-gpu"'))
    assert load_calibration("my-gpu").gpu_key == "my-gpu"


def test_calibration_written_reads_back(tmp_path):
    cal = Calibration(gpu_key=RNG.choice(list_specs()), gemm_flops=RNG.uniform(1e14, 1e15), date="2026-11-22")
    p = hardware.write_calibration(tmp_path / "c.toml", cal)
    assert load_calibration(str(p)) == cal, SEED


@pytest.mark.parametrize("load", [load_spec, load_calibration], ids=["spec", "calibration"])
def test_files_that_are_no_toml(tmp_path, load):
    binary = tmp_path / "binary.toml"
    # 0xff is never valid UTF-8, so the file is binary whatever the random bytes before it
    binary.write_bytes(bytes(RNG.randrange(256) for _ in range(RNG.randrange(1, 256))) + b"\xff")
    assert "not UTF-8 text (a binary file?)" in _one_line(load, binary), SEED
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert "missing" in _one_line(load, empty)
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    assert "a directory, not a TOML file" in _one_line(load, folder)
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    assert "a named pipe (FIFO), not a TOML file" in _one_line(load, fifo)   # not opened: it would block
