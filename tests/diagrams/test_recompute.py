"""Recomputation as a choice: a backward reads a saved intermediate (the forward writes it) or recomputes
it. For attention, saving P trades the recomputation of S = Q K^T (2 B H N M d tensor FLOPs, and the
softmax's exps) for 2 B H N M bytes written by the forward and read by the backward (bf16); the gradients
are the same."""
import numpy as np
import pytest

from diagrams import library
from diagrams.autodiff import backward, saving
from diagrams.core import DiagramError
from diagrams.evaluate import evaluate
from iomodel.derive import derive

SIZES = {"B": 2, "H": 3, "N": 5, "M": 7, "d": 4}


def _symbols(expr):
    syms = sorted(expr.free_symbols, key=lambda s: s.name)
    return syms, [SIZES[s.name] for s in syms]


def _numbers(expr):
    syms, vals = _symbols(expr)
    return float(expr.subs(dict(zip(syms, vals))))


def test_saving_p_trades_flops_for_bytes():
    att = library.attention()
    recompute, saved = backward(att, dtype="bf16"), backward(att, dtype="bf16", save="P")
    assert "P" in {x.name for x in saved.inputs()} and "P" not in {x.name for x in recompute.inputs()}
    k_re, k_sv = (derive(d.group("b", 1).group("h", 1)).kernels[0] for d in (recompute, saved))
    bhnm = SIZES["B"] * SIZES["H"] * SIZES["N"] * SIZES["M"]
    assert _numbers(k_re.flops["tensor"] - k_sv.flops["tensor"]) == 2 * bhnm * SIZES["d"]
    assert _numbers(k_sv.global_bytes - k_re.global_bytes) == 2 * bhnm        # P read, bf16
    assert _numbers(k_re.flops["exp"]) > 0 and "exp" not in k_sv.flops       # no softmax rerun
    fw, fw_saving = (derive(d.group("b", 1).group("h", 1)).kernels[0] for d in (att, saving(att, "P")))
    assert _numbers(fw_saving.global_bytes - fw.global_bytes) == 2 * bhnm      # P written once


def test_saved_and_recomputed_gradients_agree():
    rng = np.random.default_rng(7)
    att = library.attention()
    shapes = {"Q": ("B", "H", "N", "d"), "K": ("B", "H", "M", "d"), "V": ("B", "H", "M", "d"),
              "dO": ("B", "H", "N", "d")}
    inputs = {k: rng.standard_normal([SIZES[a] for a in v]) for k, v in shapes.items()}
    fw = evaluate(saving(att, "P"), {k: inputs[k] for k in ("Q", "K", "V")}, SIZES)
    got = evaluate(backward(att, save="P"), {**inputs, "P": fw["P"]}, SIZES)
    ref = evaluate(backward(att), inputs, SIZES)
    for name in ("dQ", "dK", "dV"):
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-12, atol=1e-12)


def test_saving_an_unknown_array_is_one_line():
    with pytest.raises(DiagramError, match="cannot save 'Z'"):
        backward(library.attention(), save="Z")
