"""Bad input to every subcommand of both command lines: one line on stderr, exit status 2, no traceback,
and nothing written or changed outside a fresh temp directory (issue 13).

Each case runs in-process in a fresh temporary working directory that holds the targets a careless
writer could clobber: a FIFO, a read-only file, a directory, a symlink to a directory, a spec file
that is not one, results files that are not results. The repository's files, those targets and the
temp folder itself are snapshotted before and compared after every case.
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBLEM_COMMANDS = ("predict", "tiles", "pseudocode", "draw", "roofline")

# option values a user gets wrong, valid for every problem command (argv fragments)
BAD_PROBLEM_OPTIONS = [
    ["--gpu", "h100-sxn"], ["--gpu", ""], ["--gpu", "rtx9000"], ["--gpu", "nowhere/spec.toml"],
    ["--gpu", "{dir}"], ["--gpu", "{not_a_spec}"], ["--gpu", "{binary}"], ["--gpu", "{empty}"],
    ["--algo", "flash-atention"], ["--algo", ""], ["--algo", "FLASH-ATTENTION"],
    ["--kernel", "bogus"], ["--kernel", "flash_sm08"], ["--algo", "flash-attention", "--kernel", "matmul_sm80"],
    ["--gpu", "a100-sxm-80gb", "--kernel", "flash_sm90"],
    ["--batch", "0"], ["--batch", "-1"], ["--batch", "1.5"], ["--batch", "abc"], ["--batch", ""],
    ["--heads", "0"], ["--heads", "16", "--kv-heads", "3"], ["--kv-heads", "0"],
    ["--seqlen", "0"], ["--seqlen", "1000000000000"], ["--seqlen", "4096.0"], ["--kv-seqlen", "-8"],
    ["--head-dim", "80"], ["--head-dim", "0"], ["--head-dim", "512"],
    ["--dtype", "fp32"], ["--dtype", "int8"],
    ["--calibration", "nne"], ["--calibration", "AUTO"], ["--calibration", "h100-sxn"],
    ["--calibration", "nowhere.toml"], ["--calibration", "{not_a_spec}"],
    ["--gpu", "a100-sxm-80gb", "--calibration", "h100-sxm"],
    ["--algo", "matmul", "--m", "0"], ["--algo", "matmul", "--n", "-4"], ["--algo", "matmul", "--k", "x"],
    ["--no-such-option"],
    # diagram algorithms (issue 14)
    ["--size", "T=0"], ["--size", "T"], ["--algo", "mlp", "--size", "Q=4"], ["--algo", "mlp", "--size", "T=x"],
    ["--diagram", "nowhere.py:f"], ["--diagram", "{dir}:f"], ["--diagram", "{binary}:f"], ["--diagram", "{empty}:f"],
    ["--diagram", "docs/examples/swiglu.py"], ["--diagram", "docs/examples/swiglu.py:nope"],
    ["--diagram", "docs/examples/swiglu.py:swiglu", "--algo", "mlp"],
    ["--algo", "attention-split-kv", "--heads", "12", "--kv-heads", "8"],
    ["--algo", "cross-entropy", "--kernel", "flash_sm80"], ["--algo", "mlp", "--dtype", "fp32"],
]

PREDICT = [
    ["predict", "--tiles", "block_m=128,block_n=64,warps=4,stages=2"],                     # no --kernel
    ["predict", "--kernel", "flash_sm80", "--tiles", "block_m=7,block_n=64,warps=4,stages=2"],
    ["predict", "--kernel", "flash_sm80", "--tiles", "block_m=128"],
    ["predict", "--kernel", "flash_sm80", "--tiles", "x"],
    ["predict", "--kernel", "flash_sm80", "--tiles", "block_m=abc,block_n=64,warps=4,stages=2"],
    ["predict", "--kernel", "flash_sm80", "--tiles", "block_m=-128,block_n=64,warps=4,stages=2"],
    ["predict", "--kernel", "flash_sm80", "--tiles", "block_m=128,block_n=64,warps=4,stages=2,bogus=1"],
    ["predict", "--kernel", "flash_sm90", "--tiles", "block_m=192,block_n=80,stages=2,consumers=2"],
    ["predict", "--kernel", "flash_sm80", "--tiles", "block_m=256,block_n=256,warps=4,stages=4"],
    ["predict", "--algo", "softmax", "--kernel", "softmax", "--tiles", "rows_per_block=8"],
    ["predict", "--top", "3"],
    ["predict", "extra"],
]
TILES = [["tiles", "--top", "0"], ["tiles", "--top", "-1"], ["tiles", "--top", "abc"], ["tiles", "--why-limit", "0"],
         ["tiles", "--tiles", "block_m=128,block_n=64,warps=4,stages=2"]]
PSEUDOCODE = [["pseudocode", "--symbolic", "--tiles", "block_m=128"], ["pseudocode", "--out", "x.txt"]]
DRAW = [["draw", "--out", out] for out in ("{dir}", "{fifo}", "{readonly}.svg", "{readonly}", "missing/x.svg",
                                            "x.png", "x", "", "{long}.svg", "{dirlink}", "{dir}/")]
ROOFLINE = [["roofline", "--out", out] for out in ("{dir}", "{fifo}", "missing/r.html", "r.svg", "{long}.html")] + [
    ["roofline", "--kernel", "bogus"], ["roofline", "--kernel", "flash_sm80"], ["roofline", "--top", "0"],
    ["roofline", "--algo", "softmax"], ["roofline", "--algo", "matmul", "--kernel", "wgmma"]]
VALIDATE = [
    ["validate"], ["validate", "nowhere.json"], ["validate", "{empty}"], ["validate", "{null}"], ["validate", "{list}"],
    ["validate", "{obj}"], ["validate", "{binary}"], ["validate", "{not_results}"], ["validate", "{no_shape}"],
    ["validate", "{dir}"], ["validate", "{future}"], ["validate", "{rows_not_objects}"],
    ["validate", "{run11}", "--html", "{dir}"], ["validate", "{run11}", "--html", "{fifo}"],
    ["validate", "{run11}", "--html", "page.svg"], ["validate", "{run11}", "--html", "missing/page.html"],
    ["validate", "{run11}", "--gpu", "h100-sxn"], ["validate", "{run11}", "--calibration", "nne"],
    ["validate", "{run11}", "--calibration", "{not_a_spec}"], ["validate", "{run11}", "--bogus"],
]
GPUS = [["gpus", "extra"], ["gpus", "--gpu", "h100-sxm"], ["gpus", "--bogus"]]
TOP = [["predcit"], [], ["--bogus"], ["tilez", "--why"], ["validat", "x.json"]]
RUN = [["run", "--dry-run"] + extra for extra in (
    ["--only", "bogus"], ["--only", ""], ["--only", "flash_sm80,bogus"],
    ["--shape", "0:128"], ["--shape", "4096:3"], ["--shape", "abc"], ["--shape", "4096:128:bogus"], ["--shape", "4096"],
    ["--shape", "-4096:128"], ["--rounds", "0"], ["--rounds", "x"], ["--budget-s", "-5"], ["--budget-s", "nan"],
    ["--budget-s", "inf"], ["--budget-s", "0"], ["--seed", "abc"], ["--gpu", "h100-sxn"], ["--gpu", "{not_a_spec}"],
    ["--no-ceilings", "--calibration", "nne"], ["--calibration", "{calibration}"],
    ["--no-ceilings", "--calibration", "{not_a_spec}"],
    ["--out", "{dir}"], ["--out", "{fifo}"], ["--out", "r.txt"], ["--out", "missing/r.json"], ["--out", "{long}.json"],
    ["--out", "{readonly}"], ["--calibration-out", "{dir}"], ["--calibration-out", "c.json"],
    ["--calibration-out", "{fifo}"], ["--no-ceilings", "--calibration-out", "c.toml"], ["--bogus"],
)] + [["rnu"], [], ["report", "x.json"], ["run", "--dry-run", "extra"]]


def _cases():
    cases = [("iomodel", [cmd, *opt]) for cmd in PROBLEM_COMMANDS for opt in BAD_PROBLEM_OPTIONS]
    cases += [("iomodel", a) for a in PREDICT + TILES + PSEUDOCODE + DRAW + ROOFLINE + VALIDATE + GPUS + TOP]
    cases += [("validation", a) for a in RUN]
    return cases


CASES = _cases()


def _fixtures(tmp: Path) -> dict[str, str]:
    """Targets in the temp folder: what a writer must not clobber and what a reader must refuse."""
    (tmp / "adir").mkdir()
    os.mkfifo(tmp / "fifo")
    ro = tmp / "readonly"
    ro.write_text("keep me\n")
    ro.chmod(0o444)
    (tmp / "readonly.svg").write_text("keep me too\n")
    (tmp / "readonly.svg").chmod(0o444)
    os.symlink(tmp / "adir", tmp / "dirlink")
    files = {"empty": "", "null": "null", "list": "[]", "obj": "{}", "not_a_spec": 'key = "x"\nname = [1,\n',
             "not_results": json.dumps({"hello": 1}), "no_shape": json.dumps({"rows": [{"kernel": "flash_sm80", "ok": True}]}),
             "future": json.dumps({"schema_version": 99, "rows": []}), "rows_not_objects": json.dumps({"rows": [1, 2]}),
             "calibration": 'gpu_key = "h100-sxm"\ndate = "2026-11-22"\n'}
    paths = {}
    for name, text in files.items():
        p = tmp / f"{name}.json"
        p.write_text(text)
        paths[name] = str(p)
    (tmp / "binary.json").write_bytes(os.urandom(64) + b"\x00\xff")
    paths.update(dir=str(tmp / "adir"), fifo=str(tmp / "fifo"), readonly=str(ro), dirlink=str(tmp / "dirlink"),
                 binary=str(tmp / "binary.json"), long=str(tmp / ("x" * 300)),
                 run11=str(ROOT / "validation" / "results" / "h100-sxm-2026-11-22-run11.json"))
    return paths


def _snapshot(*roots: Path) -> dict[str, tuple]:
    """path -> (kind, size, mtime_ns, mode) for every entry under the roots (caches left out)."""
    out = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in ("__pycache__", ".pytest_cache", ".git", ".venv-ci")]
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                st = os.lstat(p)
                out[p] = (stat.S_IFMT(st.st_mode), st.st_size if not stat.S_ISDIR(st.st_mode) else 0,
                          st.st_mtime_ns if not stat.S_ISDIR(st.st_mode) else 0, st.st_mode)
    return out


def _main(cli: str):
    if cli == "iomodel":
        from iomodel.cli import main
    else:
        from validation.__main__ import main
    return main


def test_the_table_is_large():
    assert len(CASES) >= 150


@pytest.mark.parametrize("cli, argv", CASES, ids=[f"{c} {' '.join(a)}"[:80] for c, a in CASES])
def test_bad_input_is_one_line_and_writes_nothing(cli, argv, tmp_path, monkeypatch, capsys):
    if cli == "validation" and argv[:1] == ["run"] and "--dry-run" not in argv:
        pytest.skip("a run without --dry-run would start on a GPU")
    paths = _fixtures(tmp_path)
    argv = [a.format(**paths) for a in argv]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OUT", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "adir"))
    before = _snapshot(ROOT, tmp_path)
    try:
        code = _main(cli)(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, f"exit {code}; stderr: {err!r}; stdout: {out[:300]!r}"
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith(f"{cli}"), lines[0]
    assert _snapshot(ROOT, tmp_path) == before, "a file was created or changed"
    assert stat.S_ISFIFO(os.lstat(paths["fifo"]).st_mode)
    assert Path(paths["readonly"]).read_text() == "keep me\n"
