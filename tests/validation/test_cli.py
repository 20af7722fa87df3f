"""``python -m validation``: help, argument errors and a dry run, with any ``import torch`` blocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def no_torch_env(tmp_path):
    """An environment whose ``import torch`` fails loudly, even where torch is installed."""
    env = {**os.environ}
    env.pop("OUT", None)
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "torch.py").write_text("raise ImportError('torch must not be imported here')\n")
    env["PYTHONPATH"] = f"{blocker}{os.pathsep}{REPO}"
    return env


def _run(args, env, **kw):
    return subprocess.run([sys.executable, "-m", "validation", *args], capture_output=True, text=True, env=env,
                          cwd=REPO, **kw)


def test_report_moved_to_iomodel_validate(no_torch_env):
    r = _run(["--help"], no_torch_env)
    assert r.returncode == 0 and "run" in r.stdout and "python -m iomodel validate" in r.stdout
    r = _run(["report", "x.json"], no_torch_env)
    assert r.returncode == 2 and "invalid choice: 'report'" in r.stderr



def test_help_and_argument_errors(no_torch_env, tmp_path):
    r = _run(["run", "--help"], no_torch_env)
    assert r.returncode == 0 and "--dry-run" in r.stdout and "--gpu-spec" in r.stdout and "--rounds" in r.stdout
    r = _run(["run", "--dry-run", "--rounds", "0"], no_torch_env)
    assert r.returncode == 2 and "--rounds" in r.stderr
    r = _run(["run", "--only", "nope"], no_torch_env)
    assert r.returncode == 2 and "--only" in r.stderr
    r = _run(["run", "--dry-run", "--gpu-spec", "h100-sxn", "--out", str(tmp_path / "x.json")], no_torch_env)
    assert r.returncode == 2 and r.stderr.startswith("error: unknown GPU") and len(r.stderr.splitlines()) == 1
    # a real run without torch fails with one clear line
    r = _run(["run", "--out", str(tmp_path / "x.json")], no_torch_env)
    assert r.returncode == 2 and r.stderr.startswith("error: ImportError")


def test_dry_run_without_torch(no_torch_env, tmp_path):
    out = tmp_path / "dry.json"
    r = _run(["run", "--dry-run", "--quick", "--only", "flash_sm80,peers", "--out", str(out), "--seed", "3",
              "--rounds", "3"], no_torch_env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "DRY RUN" in r.stderr and "[1/" in r.stderr
    assert "iomodel validation: FAKE GPU (dry run)" in r.stdout  # the report of the run it just made
    data = json.loads(out.read_text())
    assert data["dry_run"] is True and data["rows"] and data["options"]["rounds"] == 3
    assert all(row["timing"]["rounds"] == 3 for row in data["rows"] if row["ok"])
