"""The device sides' shared peer call (validation/torch_common.py) without a GPU: torch's reasons for
refusing a backend folded into the error, and the error's head whatever the exception."""
from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest

from validation.torch_common import first_call, reasons

TORCH = SimpleNamespace(cuda=SimpleNamespace(synchronize=lambda: None))


def _refusing(exc):
    def fn(_s):
        warnings.warn("Flash attention kernel not used because:")
        warnings.warn("Flash attention has been runtime disabled. (Triggered internally at x.cpp)")
        warnings.warn("both fused kernels require the same num_heads (Triggered internally at y.cpp)")
        raise exc
    return fn


def test_reasons_drop_headers_and_disabled_backends():
    seen = [SimpleNamespace(message=m) for m in ("a because:", "b (Triggered at z)", "c runtime disabled", "b")]
    assert reasons(seen) == "b"


@pytest.mark.parametrize("exc, head", [(RuntimeError("No available kernel.\nmore"), "No available kernel."),
                                       (RuntimeError(""), "RuntimeError"),
                                       (ValueError("bad"), "ValueError: bad")])
def test_a_refusal_carries_torchs_reasons(exc, head):
    with pytest.raises(RuntimeError) as info:
        first_call(TORCH, _refusing(exc), None)
    assert str(info.value) == f"{head} (torch: both fused kernels require the same num_heads)"
    assert info.value.__cause__ is exc


def test_without_reasons_the_error_is_the_calls_own():
    def fn(_s):
        raise KeyError("k")
    with pytest.raises(KeyError):
        first_call(TORCH, fn, None)
    assert first_call(TORCH, lambda s: s + 1, 1) == 2
