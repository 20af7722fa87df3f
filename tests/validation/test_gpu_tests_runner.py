"""validation/gpu_tests.sh, the runner of GPU test files within one device call's time: each file's log and
summary line, a non-zero exit when one fails or is not reached, the quoting of pytest's -k expressions."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[2] / "validation" / "gpu_tests.sh"


def _run(tmp_path: Path, limit: int, *specs: str) -> subprocess.CompletedProcess:
    env = {"OUT": str(tmp_path / "out"), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    return subprocess.run(["bash", str(RUNNER), str(limit), *specs], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "test_ok.py").write_text("def test_one():\n    assert 1 + 1 == 2\n\ndef test_two():\n    pass\n")
    (tmp_path / "test_bad.py").write_text("def test_fails():\n    assert 2 + 2 == 5\n")
    return tmp_path


def test_each_file_gets_its_log_and_summary_line(files: Path):
    got = _run(files, 100, "ok|test_ok.py -k 'one or two'", "some|test_ok.py -k two")
    assert got.returncode == 0, got.stdout + got.stderr
    lines = got.stdout.splitlines()
    assert lines[0].startswith("ok: rc=0") and "2 passed" in lines[0]
    assert lines[1].startswith("some: rc=0") and "1 deselected" in lines[1]
    assert "2 passed" in (files / "out" / "ok.log").read_text()


def test_a_failing_file_or_one_out_of_time_makes_the_exit_non_zero(files: Path):
    got = _run(files, 100, "bad|test_bad.py", "ok|test_ok.py")
    assert got.returncode == 1 and "bad: rc=1" in got.stdout and "ok: rc=0" in got.stdout
    late = _run(files, 5, "ok|test_ok.py")
    assert late.returncode == 1 and "ok: not run (no time left)" in late.stdout
