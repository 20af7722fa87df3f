"""The command line: defaults, options, outputs and one-line errors with exit status 2."""
import json
import subprocess
import sys

import pytest

from iomodel.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_defaults_to_flash_attention_on_h100(capsys):
    code, out, err = run(capsys, "predict")
    assert code == 0
    assert "H100 SXM" in out and "TFLOP/s" in out and "bottleneck" in out
    assert "flash_sm90" in out and "flash_sm80" in out
    for term in ("tensor", "exp", "smem", "hbm", "launch"):
        assert term in out


def test_predict_as_module_without_arguments():
    proc = subprocess.run([sys.executable, "-m", "iomodel", "predict"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "predicted" in proc.stdout


@pytest.mark.parametrize("algo", ["flash-attention", "flash-attention-causal", "gqa", "attention-unfused", "matmul", "softmax"])
def test_predict_every_algorithm_as_json(capsys, algo):
    code, out, _ = run(capsys, "predict", "--algo", algo, "--gpu", "a100-sxm-80gb", "--json", "--seqlen", "2048")
    assert code == 0
    preds = json.loads(out)
    assert preds and all(p["time_s"] > 0 and p["feasible"] for p in preds)
    assert preds[0]["gpu"] == "a100-sxm-80gb"


def test_predict_explicit_tiles_and_gqa_shape(capsys):
    code, out, _ = run(capsys, "predict", "--kernel", "flash_sm80", "--tiles", "block_m=128,block_n=64,warps=4,stages=2",
                       "--heads", "32", "--kv-heads", "8", "--head-dim", "64", "--json")
    assert code == 0
    (p,) = json.loads(out)
    assert p["config"] == {"block_m": 128, "block_n": 64, "warps": 4, "stages": 2}
    assert p["shape"]["H_kv"] == 8 and p["smem_bytes"] == (128 + 2 * 2 * 64) * 64 * 2


@pytest.mark.parametrize("argv, needle", [
    (["predict", "--gpu", "rtx9000"], "unknown GPU"),
    (["predict", "--seqlen", "0"], "positive integer"),
    (["predict", "--batch", "-2"], "positive integer"),
    (["predict", "--head-dim", "80"], "head dim 80"),
    (["predict", "--algo", "bogus"], "invalid choice"),
    (["predict", "--heads", "6", "--kv-heads", "4"], "multiple"),
    (["predict", "--kernel", "flash_sm80", "--tiles", "block_m=256,block_n=256,warps=4,stages=4"], "do not fit"),
    (["predict", "--kernel", "flash_sm80", "--tiles", "block_m=128"], "missing"),
    (["predict", "--kernel", "nope"], "unknown kernel family"),
    (["predict", "--kernel", "flash_sm8"], "did you mean flash_sm80"),
    (["predict", "--kernel", "flash_sm80", "--tiles", "block_m=24,block_n=64,warps=4,stages=2"], "cannot build"),
    (["predict", "--kernel", "flash_sm90", "--tiles", "block_m=192,block_n=80,stages=2,consumers=2"], "64 * consumers"),
    (["predict", "--gpu", "a100-sxm-40gb", "--kernel", "flash_sm90"], "no wgmma"),
    (["validate", "/nonexistent.json"], "nonexistent"),
])
def test_bad_input_one_line_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as e:
        code = main(argv)
        raise SystemExit(code)
    out, err = capsys.readouterr()
    assert e.value.code == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_user_spec_file_errors_name_the_field(tmp_path, capsys):
    bad = tmp_path / "mine.toml"
    bad.write_text('key = "mine"\nname = "x"\n')
    code, out, err = run(capsys, "predict", "--gpu", str(bad))
    assert code == 2 and "mine.toml" in err and len(err.strip().splitlines()) == 1


def test_tiles_lists_ranking_and_rejections(capsys):
    code, out, _ = run(capsys, "tiles", "--head-dim", "64", "--why", "--top", "5", "--kernel", "flash_sm80")
    assert code == 0
    assert "rank" in out and "rejected:" in out and "configs/s" in out
    assert "registers per thread" in out or "SMEM per block" in out


def test_pseudocode_and_draw(capsys, tmp_path):
    code, out, _ = run(capsys, "pseudocode")
    assert code == 0 and "parallel for" in out and "for m0" in out and "# sizes:" in out
    code, out, _ = run(capsys, "pseudocode", "--algo", "matmul", "--symbolic")
    assert code == 0 and "for b0 in 0..b step kb" in out
    # the Hopper family's own loop nest: warpgroups that skip the chunks above their own rows
    code, out, _ = run(capsys, "pseudocode", "--algo", "flash-attention-causal", "--kernel", "flash_sm90")
    assert code == 0 and "# warpgroups" in out and "skip" in out
    code, out, _ = run(capsys, "pseudocode", "--algo", "flash-attention-causal")
    assert code == 0 and "# warps" in out and "skip" not in out
    svg = tmp_path / "fa.svg"
    code, out, _ = run(capsys, "draw", "--out", str(svg))
    assert code == 0 and svg.read_text().startswith("<svg")


def test_gpus_lists_every_spec(capsys):
    code, out, _ = run(capsys, "gpus")
    assert code == 0
    for key in ("a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "h100-pcie", "h200-sxm"):
        assert key in out
