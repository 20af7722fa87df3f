"""The command line: defaults, options, outputs and one-line errors with exit status 2 (the boundary
itself: test_boundary.py; a table of bad inputs to every command: tests/test_cli_fuzz.py)."""
import json
import subprocess
import sys

import pytest

from iomodel.cli import main


def test_predict_defaults_to_flash_attention_on_h100(cli):
    code, out, err = cli("predict")
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
def test_predict_every_algorithm_as_json(algo, cli):
    size = ["--m", "2048"] if algo == "matmul" else ["--seqlen", "2048"]
    code, out, _ = cli("predict", "--algo", algo, "--gpu", "a100-sxm-80gb", "--json", *size)
    assert code == 0
    preds = json.loads(out)
    assert preds and all(p["time_s"] > 0 and p["feasible"] for p in preds)
    assert preds[0]["gpu"] == "a100-sxm-80gb"


def test_predict_explicit_tiles_and_gqa_shape(cli):
    code, out, _ = cli("predict", "--kernel", "flash_sm80", "--tiles", "block_m=128,block_n=64,warps=4,stages=2",
                       "--heads", "32", "--kv-heads", "8", "--head-dim", "64", "--json")
    assert code == 0
    (p,) = json.loads(out)
    assert p["config"] == {"block_m": 128, "block_n": 64, "warps": 4, "stages": 2, "q_regs": 0}
    assert p["shape"]["H_kv"] == 8 and p["smem_bytes"] == (128 + 2 * 2 * 64) * 64 * 2


def test_user_spec_file_errors_name_the_field(tmp_path, cli):
    bad = tmp_path / "mine.toml"
    bad.write_text('key = "mine"\nname = "x"\n')
    code, out, err = cli("predict", "--gpu", str(bad))
    assert code == 2 and "mine.toml" in err and len(err.strip().splitlines()) == 1


def test_tiles_lists_ranking_and_rejections(cli):
    code, out, _ = cli("tiles", "--head-dim", "64", "--why", "--top", "5", "--kernel", "flash_sm80")
    assert code == 0
    assert "rank" in out and "rejected:" in out and "configs/s" in out
    assert "registers per thread" in out or "SMEM per block" in out


def test_pseudocode_and_draw(tmp_path, cli):
    code, out, _ = cli("pseudocode")
    assert code == 0 and "parallel for" in out and "for m0" in out and "# sizes:" in out
    code, out, _ = cli("pseudocode", "--algo", "matmul", "--symbolic")
    assert code == 0 and "for b0 in 0..K step Bk" in out
    # the Hopper family's own loop nest: warpgroups that skip the chunks above their own rows
    code, out, _ = cli("pseudocode", "--algo", "flash-attention-causal", "--kernel", "flash_sm90")
    assert code == 0 and "# warpgroups" in out and "skip" in out
    code, out, _ = cli("pseudocode", "--algo", "flash-attention-causal")
    assert code == 0 and "# warps" in out and "skip" not in out
    svg = tmp_path / "fa.svg"
    code, out, _ = cli("draw", "--out", str(svg))
    assert code == 0 and svg.read_text().startswith("<svg")


def test_gpus_lists_every_spec(cli):
    code, out, _ = cli("gpus")
    assert code == 0
    for key in ("a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "h100-pcie", "h200-sxm"):
        assert key in out


def test_version_help_defaults_and_examples(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("iomodel 0.")
    for cmd in ("predict", "tiles", "pseudocode", "draw", "roofline", "validate", "gpus"):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        out = capsys.readouterr().out
        assert "examples:" in out and f"iomodel {cmd}" in out, cmd
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for default in ("(default: 4096)", "(default: h100-sxm)", "(default: auto)", "(default: bf16)",
                    "(default: flash-attention)", "default: seqlen"):
        assert default in out, default


@pytest.mark.parametrize("argv, needle", [
    (["predict", "--gpu", "rtx9000"], "unknown GPU"),
    (["predict", "--seqlen", "0"], "positive integer"),
    (["predict", "--batch", "-2"], "positive integer"),
    (["predict", "--head-dim", "80"], "head dim 80"),
    (["predict", "--algo", "bogus"], "invalid choice"),
    (["predict", "--heads", "6", "--kv-heads", "4"], "multiple"),
    (["predict", "--kernel", "flash_sm80", "--tiles", "block_m=256,block_n=256,warps=4,stages=4"], "do not fit"),
    (["predict", "--kernel", "flash_sm80", "--tiles", "block_m=128"], "missing"),
    (["predict", "--kernel", "nope"], "invalid choice: 'nope'"),
    (["predict", "--kernel", "flash_sm8"], "did you mean flash_sm80"),
    (["predict", "--kernel", "flash_sm80", "--tiles", "block_m=24,block_n=64,warps=4,stages=2"], "cannot build"),
    (["predict", "--kernel", "flash_sm90", "--tiles", "block_m=192,block_n=80,stages=2,consumers=2"], "64 * consumers"),
    (["predict", "--gpu", "a100-sxm-40gb", "--kernel", "flash_sm90"], "no wgmma"),
    (["validate", "/nonexistent.json"], "nonexistent"),
    # a flag the command does not take: argparse refuses it, naming the commands that do
    (["roofline", "--kernel", "bogus"], "roofline takes no --kernel"),
    (["draw", "--gpu", "a100-sxm-80gb"], "draw takes no --gpu"),
    (["tiles", "--tiles", "block_m=128"], "tiles takes no --tiles"),
    (["predict", "--seqlne", "4"], "did you mean --seqlen?"),
    # a flag the algorithm does not read
    (["predict", "--m", "4096"], "--m not used by --algo flash-attention"),
    (["predict", "--algo", "matmul", "--heads", "4", "--batch", "2"], "--batch, --heads not used by --algo matmul"),
    (["predict", "--algo", "softmax", "--head-dim", "64"], "--head-dim not used by --algo softmax"),
    (["roofline", "--algo", "softmax"], "invalid choice: 'softmax'"),
    # options that need another one
    (["predict", "--tiles", "block_m=128,block_n=64,warps=4,stages=2"], "--tiles needs --kernel"),
    (["predict", "--algo", "flash-attention", "--kernel", "matmul_sm80"],
     "--kernel matmul_sm80 serves --algo matmul, not flash-attention"),
    (["pseudocode", "--algo", "matmul", "--kernel", "flash_sm90"], "serves --algo flash-attention"),
    (["pseudocode", "--symbolic", "--gpu", "a100-sxm-80gb"], "--gpu not used: --symbolic"),
    (["tiles", "--why-limit", "3"], "--why-limit not used without --why"),
    (["predict", "--force-calibration"], "--force-calibration goes with a --calibration"),
    # names: did you mean
    (["predict", "--algo", "flash-atention"], "did you mean flash-attention?"),
    (["predict", "--gpu", "h100-sxn"], "did you mean 'h100-sxm'?"),
    (["predcit"], "did you mean predict?"),
    # calibrations: never a silent fallback to datasheet rates, never another GPU's without a word
    (["predict", "--calibration", "nne"], "did you mean none?"),
    (["predict", "--calibration", "AUTO"], "did you mean auto?"),
    (["predict", "--calibration", "a100-sxm-80gb", "--gpu", "a100-sxm-80gb"], "no calibration 'a100-sxm-80gb'"),
    (["predict", "--gpu", "a100-sxm-80gb", "--calibration", "h100-sxm"], "measured on h100-sxm, not a100-sxm-80gb"),
    # sizes the GPU or the launch cannot hold
    (["predict", "--seqlen", str(10**12)], "32-bit size limit"),
    (["predict", "--algo", "attention-unfused", "--seqlen", "65536", "--batch", "64"], "of GPU memory"),
    (["predict", "--kernel", "flash_sm80", "--batch", "70000", "--seqlen", "128"], "at most 65535"),
    (["predict", "--algo", "matmul", "--kernel", "matmul_sm80", "--m", "100000000", "--n", "16", "--k", "16"],
     "row blocks"),
    # outputs are checked before any work
    (["draw", "--out", "x.png"], "--out x.png: unknown suffix"),
])
def test_bad_input_one_line_exit_2(argv, needle, cli):
    code, out, err = cli(*argv)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("iomodel: error: ") and needle in lines[0], err


def test_forced_calibration_of_another_gpu(cli):
    code, out, err = cli("predict", "--gpu", "a100-sxm-80gb", "--calibration", "h100-sxm",
                         "--force-calibration", "--json")
    assert code == 0 and json.loads(out)[0]["calibration_used"].startswith("h100-sxm")


def test_calibration_none_and_auto(cli):
    _, out, _ = cli("predict", "--calibration", "none", "--json")
    assert json.loads(out)[0]["calibration_used"] is None
    _, out, _ = cli("predict", "--json")
    assert json.loads(out)[0]["calibration_used"].startswith("h100-sxm")


def test_times_in_human_units():
    from iomodel.cli.predict import format_duration

    assert format_duration(0.0) == "0.0 us"
    assert format_duration(5e-9) == "5.0 ns"
    assert format_duration(3e-5) == "30.0 us"
    assert format_duration(9.11e-4) == "0.911 ms"
    assert format_duration(12.5) == "12.500 s"
    assert format_duration(600) == "10.0 min"
    assert format_duration(7200) == "2 h"
    assert len(format_duration(1e15)) < 12


def test_json_on_tiles_and_gpus(cli):
    code, out, _ = cli("tiles", "--kernel", "flash_sm80", "--top", "2", "--why", "--why-limit", "3", "--json")
    (res,) = json.loads(out)
    assert code == 0 and res["kernel"] == "flash_sm80" and len(res["ranked"]) == 2 and len(res["rejected"]) == 3
    assert set(res["ranked"][0]) >= {"time_s", "tflops", "bottleneck", "config", "shape"}  # Prediction's fields
    code, out, _ = cli("gpus", "--json")
    specs = json.loads(out)
    assert code == 0 and {s["key"] for s in specs} >= {"h100-sxm", "a100-sxm-80gb"} and specs[0]["sm_count"] > 0


def test_pictures_to_standard_output(cli):
    code, out, _ = cli("draw", "--out", "-")
    assert code == 0 and out.startswith("<svg") and "wrote" not in out


@pytest.mark.parametrize("args, says", [
    (("predict", "--algo", "matmul", "--softcap", "3"), "--softcap applies to attention forwards, not --algo matmul"),
    (("pseudocode", "--algo", "softmax", "--window-size", "4,0"), "--window-size applies to attention forwards"),
    (("draw", "--algo", "matmul", "--alibi", "--out", "-"), "--alibi applies to attention forwards"),
    (("draw", "--kernel", "flash_bwd_sm80", "--window-size", "512,0", "--out", "-"), "has no sliding window"),
    (("pseudocode", "--kernel", "unfused", "--softcap", "30"), "unfused has no softcap"),
    (("draw", "--algo", "attention-unfused", "--window-size", "64,0", "--out", "-"), "unfused has no sliding window")])
def test_options_an_algorithm_does_not_take_get_one_line(cli, args, says):
    code, out, err = cli(*args)
    assert code == 2 and says in err and "Traceback" not in err and not out
