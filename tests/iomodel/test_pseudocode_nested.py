"""Pseudocode of nested streams: each operation at the depth of the innermost loop over its own axes,
accumulators initialized just inside the loop enclosing their stream, each input loaded once per loop."""
from diagrams import library
from iomodel.pseudocode import pseudocode


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _find(lines, needle):
    hits = [i for i, ln in enumerate(lines) if needle in ln]
    assert hits, f"no line with {needle!r}:\n" + "\n".join(lines)
    return hits


def test_fused_mlp_places_each_operation_in_its_own_loop():
    lines = pseudocode(library.mlp()).splitlines()
    (f_loop,), (d_loop,) = _find(lines, "for f0 in"), _find(lines, "for d0 in")
    (up,), (gelu,), (down,) = _find(lines, "H_acc +="), _find(lines, "G = gelu"), _find(lines, "Y_acc +=")
    (init_h,), (init_y,) = _find(lines, "init H_acc"), _find(lines, "init Y_acc")
    assert f_loop < d_loop < up < gelu < down
    assert _indent(lines[up]) > _indent(lines[d_loop])            # the first matmul inside the d stream
    assert _indent(lines[f_loop]) < _indent(lines[gelu]) <= _indent(lines[d_loop]) + 2   # GeLU after it closes
    assert _indent(lines[gelu]) == _indent(lines[down])           # the second matmul beside the GeLU
    assert init_y < f_loop and _indent(lines[init_y]) == _indent(lines[f_loop])
    assert f_loop < init_h < d_loop and _indent(lines[init_h]) == _indent(lines[d_loop])
    assert len(_find(lines, "load W1")) == 1 and _find(lines, "load W1")[0] > d_loop   # once, in the d loop
    (w2,) = _find(lines, "load W2")
    assert f_loop < w2 < d_loop                                    # W2 carries f, not d
    (store,) = _find(lines, "store Y")
    assert store > down and _indent(lines[store]) == _indent(lines[f_loop])   # after the f stream


def test_cross_entropy_finishes_the_log_sum_exp_after_the_vocabulary_stream():
    text = pseudocode(library.cross_entropy())
    lines = text.splitlines()
    (v_loop,), (lse,), (loss,) = _find(lines, "for v0 in"), _find(lines, "lse = lse_max + log"), _find(lines, "loss =")
    assert v_loop < lse < loss and _indent(lines[lse]) == _indent(lines[v_loop])
    assert "probabilities" in text and "store loss" in text


def test_flash_attention_loop_nest_unchanged():
    lines = pseudocode(library.flash_attention()).splitlines()
    (init,), (loop,), (div,) = _find(lines, "init O_acc"), _find(lines, "for m0"), _find(lines, "O = O_acc / O_sum")
    assert init < loop < div and _indent(lines[div]) == _indent(lines[loop])
