"""``python -m validation``: help, argument errors and a dry run, with any ``import torch`` blocked."""

from __future__ import annotations

import json
import os
import re
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


def _one_line(r) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("validation: error: "), r.stderr
    return lines[0]


def test_report_moved_to_iomodel_validate(no_torch_env):
    r = _run(["--help"], no_torch_env)
    assert r.returncode == 0 and "run" in r.stdout and "python -m iomodel validate" in r.stdout
    assert "invalid choice: 'report'" in _one_line(_run(["report", "x.json"], no_torch_env))
    assert "did you mean run?" in _one_line(_run(["rnu"], no_torch_env))
    assert "required: COMMAND" in _one_line(_run([], no_torch_env))  # one line, as iomodel's, no usage block


def test_help_version_and_argument_errors(no_torch_env, tmp_path):
    r = _run(["run", "--help"], no_torch_env)
    assert r.returncode == 0 and "--dry-run" in r.stdout and "--gpu " in r.stdout and "--rounds" in r.stdout
    assert "--gpu-spec" not in r.stdout and "examples:" in r.stdout and "(default: 510)" in r.stdout
    r = _run(["--version"], no_torch_env)
    assert r.returncode == 0 and r.stdout.startswith("python -m validation 0.")
    assert "--rounds" in _one_line(_run(["run", "--dry-run", "--rounds", "0"], no_torch_env))
    assert "--only" in _one_line(_run(["run", "--only", "nope"], no_torch_env))
    line = _one_line(_run(["run", "--dry-run", "--gpu-spec", "h100-sxn", "--out", str(tmp_path / "x.json")],
                          no_torch_env))
    assert "unknown GPU" in line and "did you mean 'h100-sxm'" in line
    # a real run without torch: one line naming the gpu extra and the dry run
    line = _one_line(_run(["run", "--out", str(tmp_path / "x.json")], no_torch_env))
    assert "torch" in line and 'pip install -e ".[gpu]"' in line and "--dry-run" in line
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("args, needle", [
    (["--budget-s", "-5"], "--budget-s: takes a positive number"),
    (["--budget-s", "nan"], "--budget-s: takes a positive number"),
    (["--shape", "0:128"], "N must be a positive integer"),
    (["--shape", "4096:3"], "head dim 3 is not one the kernels run"),
    (["--calibration", "h100-sxm"], "--calibration not used without --no-ceilings"),
    (["--no-ceilings", "--calibration", "nne"], "did you mean none?"),
    (["--no-ceilings", "--calibration", "none"], "--calibration none"),
    (["--gpu", "a100-sxm-80gb", "--no-ceilings", "--calibration", "h100-sxm"], "measured on h100-sxm"),
    (["--no-ceilings", "--calibration-out", "c.toml"], "--calibration-out not used with --no-ceilings"),
    (["--force-calibration"], "--force-calibration goes with"),
    (["--calibration-out", "{tmp}"], "--calibration-out"),
    (["--out", "{tmp}/r.txt"], "--out"),
    (["--out", "{tmp}/missing/r.json"], "does not exist"),
    (["--only", "algorithms", "--algo-peers", "torch_sdpa_flash"], "--algo-peers: takes a comma list of torch_matmul"),
    (["--only", "algorithms", "--algo-peers", ","], "--algo-peers: takes a comma list"),
    (["--algo-peers", "torch_mlp"], "--algo-peers not used without algorithms, decode or varlen in --only"),
    (["--only", "decode", "--algo-peers", "torch_mlp"], "--algo-peers with --only decode names no decode kernel"),
    (["--only", "varlen", "--algo-peers", "flash_decode_sm80"], "--algo-peers with --only varlen names no varlen"),
    (["--only", "decode,flash_sm81"], "--only: takes a comma list of"),
])
def test_run_option_errors(no_torch_env, tmp_path, args, needle):
    args = [a.format(tmp=tmp_path) for a in args]
    before = sorted(tmp_path.iterdir())
    assert needle in _one_line(_run(["run", "--dry-run", *args], no_torch_env))
    assert sorted(tmp_path.iterdir()) == before  # refused before anything was written


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


def test_dry_run_json_summary(no_torch_env, tmp_path):
    out = tmp_path / "dry.json"
    r = _run(["run", "--dry-run", "--quick", "--only", "flash_sm80", "--no-ceilings", "--calibration", "h100-sxm",
              "--out", str(out), "--seed", "1", "--json"], no_torch_env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)  # accuracy.Report's fields
    assert report["ours"]["n"] > 0 and report["calibrations"][0]["gpu_key"] == "h100-sxm"


def test_dry_run_of_our_backward_kernels(no_torch_env, tmp_path):
    """--algo-peers takes our backward kernels' names; their rows say pass bwd and the report gives
    their error apart from the forward's."""
    out = tmp_path / "bwd.json"
    r = _run(["run", "--dry-run", "--quick", "--only", "algorithms", "--algo-peers",
              "flash_bwd_sm80,flash_bwd_sm80_deterministic,torch_sdpa_flash_bwd", "--no-ceilings",
              "--out", str(out), "--seed", "2"], no_torch_env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert re.search(r"\] flash_bwd_sm80 \d+x\d+ w\d s\d B16 H32 N1024 M1024 d64 causal: ", r.stderr), r.stderr
    assert "our backward kernels (bwd)" in r.stdout and "Our attention backward kernels" in r.stdout
    rows = json.loads(out.read_text())["rows"]
    assert len({row["shape"]["causal"] for row in rows}) == 2 and {row["kernel"] for row in rows} == {
        "flash_bwd_sm80", "flash_bwd_sm80_deterministic", "torch_sdpa_flash_bwd"}
    assert all(row["ok"] and row["pass"] == "bwd" for row in rows)
