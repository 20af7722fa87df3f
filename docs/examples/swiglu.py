"""Bring your own algorithm: a SwiGLU gate, Y = silu(X.Wg) * (X.Wu), drawn with the diagram API.

    python -m iomodel predict --diagram docs/examples/swiglu.py:swiglu
    python -m iomodel tiles --diagram docs/examples/swiglu.py:swiglu --size T=4096
    python -m iomodel pseudocode --diagram docs/examples/swiglu.py:swiglu --kernel wgmma

The function returns the relabeled diagram and the sizes of its symbols. Sizes and tiles left as
symbols (here Bt, Bf, Bk, w, st) are what `iomodel tiles` searches; `unit_threads` is passed by iomodel
(32 for the mma_sync style's warps, 128 for wgmma's warpgroups) when the function takes it.
"""
from diagrams.core import Array, Contraction, Map, axis, size_expr
from diagrams.diagram import Diagram


def swiglu(unit_threads=32):
    t, d, f = axis("t", "T"), axis("d", "D"), axis("f", "F")
    X = Array("X", (t, d), "bf16")
    Wg, Wu = Array("Wg", (d, f), "bf16"), Array("Wu", (d, f), "bf16")
    G, U = Array("G", (t, f), "fp32"), Array("U", (t, f), "fp32")
    Y = Array("Y", (t, f), "bf16")
    ops = (Contraction("G=X.Wg", (X, Wg), G), Contraction("U=X.Wu", (X, Wu), U),
           # silu(g) * u = g / (1 + exp(-g)) * u: one exp, an add, a divide and two multiplies
           Map("swiglu", (G, U), Y, costs=(("exp", 1), ("fp32", 4)), formula="silu(g) * u"))
    d_ = Diagram("swiglu", ops, ("Y",))
    # blocks own Bt x Bf of the output; the contraction over D streams through SMEM; warps split the rows
    d_ = d_.group("t", "Bt").group("f", "Bf").stream("d", "Bk", "smem", stages="st")
    d_ = d_.group("t", size_expr("Bt") / size_expr("w"), "reg", unit_threads=unit_threads)
    for x in ("X", "Wg", "Wu"):
        d_ = d_.stage(x, "smem")
    return d_, {"T": 16384, "D": 4096, "F": 14336}
