"""The algorithm peers on a GPU (``validation.algorithms``): random inputs, PyTorch's versions of the
library's algorithms, and their check against a float32 reference computed on the same inputs.

Inputs are standard normal values drawn in float32 and cast (never zeros); the second operand of the
loss and of the MLP is scaled by 1/sqrt(its rows), so logits and activations are of order one, as in
a trained network.  Targets of the loss are uniform over the vocabulary.  torch is passed in.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from iomodel.algo_peers import algo_of

__all__ = ["TorchAlgorithms"]


class TorchAlgorithms:
    """``make_inputs``, ``runner`` and ``check`` of the algorithm peers, on the current CUDA device."""

    def __init__(self, torch):
        self.torch = torch
        self.F = torch.nn.functional

    def _randn(self, g, rows: int, cols: int, dt, scale: float = 1.0):
        t = self.torch.randn(rows, cols, generator=g, device="cuda", dtype=self.torch.float32)
        if scale != 1.0:
            t.mul_(scale)
        return t.to(dt)

    def make_inputs(self, kernel: str, shape, n_sets: int, seed: int) -> list[tuple]:
        """``n_sets`` input tuples of the row's peer (matmul's third element is its output buffer)."""
        torch = self.torch
        g = torch.Generator(device="cuda")
        g.manual_seed(seed)
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[shape.get("dtype", "bf16")]
        algo = algo_of(kernel)
        if algo == "matmul":
            M, N, K = shape["M"], shape["N"], shape["K"]
            return [(self._randn(g, M, K, dt), self._randn(g, K, N, dt),
                     torch.empty(M, N, device="cuda", dtype=dt)) for _ in range(n_sets)]
        if algo == "cross-entropy":
            T, D, V = shape["T"], shape["D"], shape["V"]
            return [(self._randn(g, T, D, dt), self._randn(g, D, V, dt, 1 / math.sqrt(D)),
                     torch.randint(0, V, (T,), generator=g, device="cuda")) for _ in range(n_sets)]
        if algo == "mlp":
            T, D, Fh = shape["T"], shape["D"], shape["F"]
            return [(self._randn(g, T, D, dt), self._randn(g, D, Fh, dt, 1 / math.sqrt(D)),
                     self._randn(g, Fh, D, dt, 1 / math.sqrt(Fh))) for _ in range(n_sets)]
        raise ValueError(f"{kernel}: not an algorithm peer")

    def runner(self, kernel: str) -> Callable[..., Any]:
        """The timed call on one input tuple."""
        torch, F = self.torch, self.F
        algo = algo_of(kernel)
        if algo == "matmul":
            return lambda a, b, c: torch.matmul(a, b, out=c)
        if algo == "cross-entropy":
            return lambda h, w, t: F.cross_entropy(h @ w, t)
        if algo == "mlp":
            return lambda x, w1, w2: F.gelu(x @ w1) @ w2
        raise ValueError(f"{kernel}: not an algorithm peer")

    def _rel(self, out, ref) -> tuple[float, bool]:
        """(max |out - ref| / max |ref|, whether ``out`` is all finite)."""
        o = out.float()
        if not bool(self.torch.isfinite(o).all()):
            return float("nan"), False
        return float((o - ref).abs().max()) / max(float(ref.abs().max()), 1e-30), True

    def check(self, kernel: str, fn: Callable[..., Any], inputs) -> tuple[float, bool]:
        """Run ``fn`` once on the first input set and compare with float32 on the same inputs; matmul's
        output buffer is NaN-poisoned first, so an unwritten element fails.  The loss is checked as the
        scalar the timed call returns and per token (``reduction='none'``), the worse of the two."""
        torch, F = self.torch, self.F
        a, b, c = inputs[0]
        algo = algo_of(kernel)
        if algo == "matmul":
            c.fill_(float("nan"))
            out = fn(a, b, c)
            torch.cuda.synchronize()
            return self._rel(out, a.float() @ b.float())
        if algo == "cross-entropy":
            logits = a.float() @ b.float()
            err, ok = self._rel(fn(a, b, c).reshape(1), F.cross_entropy(logits, c).reshape(1))
            tok_err, tok_ok = self._rel(F.cross_entropy(a @ b, c, reduction="none"),
                                        F.cross_entropy(logits, c, reduction="none"))
            return (max(err, tok_err) if ok and tok_ok else float("nan")), ok and tok_ok
        out = fn(a, b, c)
        return self._rel(out, F.gelu(a.float() @ b.float()) @ c.float())
