"""The model of a sliding window (FlashAttention's window_size on the shape: window_left, window_right):
its FLOPs, the band on the family's diagram, which families have one, and the configs offered."""
from __future__ import annotations

import numpy as np
import pytest

from iomodel import families
from iomodel.api import predict
from iomodel.chooser import choose
from iomodel.errors import ModelError
from iomodel.problems import conventional_flops, is_windowed, window_of

CFG = {"block_m": 128, "block_n": 64, "warps": 4, "stages": 2}


def _shape(n_q, n_k, left=-1, right=-1, causal=False, **kw):
    s = {"B": 1, "H": 16, "N_q": n_q, "N_k": n_k, "d": 128, "causal": causal, "dtype": "bf16", **kw}
    if left >= 0 or right >= 0:
        s.update(window_left=left, window_right=right)
    return s


@pytest.mark.parametrize("n_q, n_k, left, right", [(300, 300, 50, 0), (200, 517, 64, -1), (517, 200, -1, 3),
                                                   (100, 100, 0, 0), (64, 64, 1000, 0), (90, 70, 10, 20)])
def test_flops_count_the_band_pair_by_pair(n_q, n_k, left, right):
    i, j = np.arange(n_q)[:, None] + (n_k - n_q), np.arange(n_k)[None, :]
    live = np.ones((n_q, n_k), bool)
    if left >= 0:
        live &= j >= i - left
    if right >= 0:
        live &= j <= i + right
    want = 4.0 * 16 * 128 * live.sum()
    assert conventional_flops(_shape(n_q, n_k, left, right)) == pytest.approx(want)


def test_window_fields():
    assert window_of({"causal": True}) == (-1, 0) and not is_windowed({"causal": True})
    assert window_of(_shape(8, 8, 3, -1, causal=True)) == (3, 0) and is_windowed(_shape(8, 8, 3, 0))
    assert is_windowed(_shape(8, 8, -1, 2)) and not is_windowed(_shape(8, 8, -1, 0))


def test_a_window_of_4096_keys_is_about_four_times_cheaper_than_causal_at_32k():
    causal = predict("flash_sm80", "h100-sxm", _shape(32768, 32768, causal=True), CFG)
    band = predict("flash_sm80", "h100-sxm", _shape(32768, 32768, 4096, 0, causal=True), CFG)
    work = conventional_flops(_shape(32768, 32768, causal=True)) / conventional_flops(_shape(32768, 32768, 4096, 0))
    assert 4.2 < work < 4.4
    assert 3.5 < causal.time_s / band.time_s < work * 1.05
    # (-1, 0) is the causal band: the same prediction as causal=True
    same = predict("flash_sm80", "h100-sxm", {**_shape(4096, 4096), "window_left": -1, "window_right": 0}, CFG)
    assert same.time_s == pytest.approx(predict("flash_sm80", "h100-sxm", _shape(4096, 4096, causal=True), CFG).time_s)


def test_only_a_family_with_a_window_takes_one():
    shape = _shape(8192, 8192, 1024, 0, causal=True)
    with pytest.raises(ModelError, match="flash_bwd_sm80 has no sliding window"):
        predict("flash_bwd_sm80", "h100-sxm", shape, families.get("flash_bwd_sm80").shipped[0])
    with pytest.raises(ModelError, match="window_left must be an integer >= -1"):
        predict("flash_sm80", "h100-sxm", {**shape, "window_left": -3}, CFG)
    withheld = 0   # (every flash_sm90 config runs a plain causal window since its stale max of 2026-11-29)
    for name in ("flash_sm80", "flash_sm90"):
        pick = choose([name], "h100-sxm", shape)
        fam = families.get(name)
        unshipped = fam.unshipped_for({"causal", "window"})
        assert pick.config not in unshipped
        withheld += len(unshipped)
        for c in unshipped:   # not offered for the window, offered for plain causal attention (unless that spills)
            assert c not in fam.shipped_for({**shape, "d": c.head_dim})
            assert (c in fam.shipped_for(_shape(8192, 8192, causal=True) | {"d": c.head_dim})
                    or (c, frozenset({"causal"})) in fam.spilling_variants)
    assert withheld
    # on an H100 the wgmma kernel's window is the pick, about four times faster than its causal attention
    both = ["flash_sm80", "flash_sm90"]
    band = choose(both, "h100-sxm", _shape(32768, 32768, 4096, 0, causal=True))
    causal = choose(both, "h100-sxm", _shape(32768, 32768, causal=True))
    assert band.kernel == causal.kernel == "flash_sm90" and 3.6 < causal.time_s / band.time_s < 4.4


def test_cli_window_size(cli):
    import json

    code, out, _ = cli("predict", "--kernel", "flash_sm90", "--seqlen", "32768", "--causal", "--window-size", "4096,7",
                       "--json")
    (row,) = json.loads(out)
    assert code == 0 and row["shape"]["window_left"] == 4096 and row["shape"]["window_right"] == 0   # causal
    code, out, _ = cli("predict", "--kernel", "flash_sm90", "--seqlen", "32768", "--causal", "--json")
    assert json.loads(out)[0]["time_s"] > 3.5 * row["time_s"]
    for argv, msg in ((("--window-size", "4096"), "expected LEFT,RIGHT"), (("--window-size=-2,0",), ">= -1"),
                      (("--algo", "flash-decode", "--window-size", "4,0"), "applies to attention forwards"),
                      (("--kernel", "flash_bwd_sm80", "--window-size", "4,0"), "flash_bwd_sm80 has no sliding window")):
        code, out, err = cli("predict", *argv)
        assert code != 0 and msg in err and len(err.strip().splitlines()) == 1, (argv, err)
