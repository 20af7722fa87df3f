"""FlashAttention's window_size and flash_attn_func without a GPU: the canonical window of (window_size,
causal), what the kernel and the model's shape take, the window variant's template name, and the
arguments flash_attn_func refuses (before it needs torch)."""
from __future__ import annotations

import pytest

from kernels import codegen, flash_attn_func
from kernels.window import UNBOUNDED, Window, window
from iomodel.families.flash_sm80 import FlashConfig


@pytest.mark.parametrize("size, causal, want", [
    ((-1, -1), False, Window(-1, -1)), ((-1, -1), True, Window(-1, 0)), ((4096, 0), False, Window(4096, 0)),
    ((4096, 7), True, Window(4096, 0)), ((0, 0), False, Window(0, 0)), ((-1, 5), False, Window(-1, 5)),
    ([3, -1], False, Window(3, -1))])
def test_canonical_window(size, causal, want):
    assert window(size, causal) == want


def test_what_the_kernel_and_the_model_take():
    plain, causal, band, right = Window(-1, -1), Window(-1, 0), Window(100, 0), Window(-1, 3)
    assert not plain.local and not plain.causal and plain.shape_fields() == {"causal": False}
    assert not causal.local and causal.causal and causal.shape_fields() == {"causal": True}
    assert band.local and band.causal and band.kernel_args() == (100, 0)
    assert band.shape_fields() == {"causal": True, "window_left": 100, "window_right": 0}
    assert right.local and right.causal and right.kernel_args() == (UNBOUNDED, 3)
    left_only = Window(5, -1)
    assert left_only.local and not left_only.causal and left_only.kernel_args() == (5, 0)


@pytest.mark.parametrize("size, causal, msg", [
    ((-2, 0), False, "window_size's left must be an int >= -1"), ((0, 1.5), False, "window_size's right"),
    ((True, 0), False, "window_size's left"), ((1, 2, 3), False, "window_size must be a pair"),
    (5, False, "window_size must be a pair")])
def test_bad_windows_are_one_line(size, causal, msg):
    with pytest.raises(ValueError, match=msg):
        window(size, causal)
    with pytest.raises(TypeError, match="causal must be a bool"):
        window((-1, -1), 1)


def test_the_window_variant_is_a_ninth_template_argument():
    cfg = FlashConfig(128, 64, 4, 2, 128)
    assert codegen.flash_sm80_kernel(cfg, "bf16", True).endswith("true, false>")
    assert codegen.flash_sm80_kernel(cfg, "bf16", True, False, True).endswith("true, false, true>")


@pytest.mark.parametrize("kw, msg", [
    ({"dropout_p": 0.1}, "dropout_p=0.1 is not supported"), ({"dropout_p": 1.5}, r"dropout_p must be a number in \[0, 1\)"),
    ({"softcap": -1.0}, "softcap must be a finite number >= 0"), ({"softcap": float("inf")}, "softcap must be"),
    ({"softcap": True}, "softcap must be")])
def test_flash_attn_func_refuses_what_it_does_not_do(kw, msg):
    with pytest.raises(ValueError, match=msg):
        flash_attn_func(None, None, None, **kw)


def test_numpys_bool_is_a_bool():
    np = pytest.importorskip("numpy")
    assert window((-1, -1), np.bool_(True)) == Window(-1, 0)
