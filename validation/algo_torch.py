"""The algorithm peers on a GPU (``validation.algorithms``): random inputs, PyTorch's versions of the
library's algorithms, and their check against a float32 reference computed on the same inputs.

Inputs are standard normal values drawn in float32 and cast (never zeros); the second operand of the
loss and of the MLP is scaled by 1/sqrt(its rows), so logits and activations are of order one, as in
a trained network.  Targets of the loss are uniform over the vocabulary.  torch is passed in.

A peer of the attention backward has the input set ``(q, k, v, out, dout, causal)``: q, k, v (B, H,
N|M, d) requiring grad, ``out`` the forward of ``F.scaled_dot_product_attention`` (``is_causal`` as the
shape says) run once (untimed) with the peer's backend forced by ``sdpa_kernel`` (autograd then runs
that backend's backward), ``dout`` standard normal with ``out``'s strides.  The timed call is
``torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)``.  Our backward kernels
(``iomodel.algo_peers.BACKWARD_KERNELS``) have ``(q, k, v, out, lse, dout, causal)``: q, k, v and dout
standard normal, ``out`` and the LSE from our forward, ``kernels.flash_attention(...,
return_lse=True)``, untimed; the timed call is ``kernels.flash_attention_backward(dout, q, k, v, out,
lse, causal=..., config=..., deterministic=...)`` for ``flash_bwd_sm80`` and its deterministic twin,
``kernels.flash_bwd_sm90.backward`` with the same arguments for ``flash_bwd_sm90`` and its twin.  Both
checks compare dQ, dK and dV with the math backend's on float32 copies (causal as the row), a few heads
at a time so that the float32 score matrices stay near 1 GiB each; our kernels' check runs in the
kernels' debug mode, as the forward's.

The backward rows of one shape run as a group (``validation.backward``): ``make_backward_group`` draws q, k,
v and dout once a set and gives each kernel its call's arguments from them (``BackwardSet.args``: our
kernels share one forward; each peer has leaves sharing q, k and v's memory and its backend's forward; a
backend that refuses the inputs leaves its exception there, raised by its runner), ``reference`` computes
the float32 gradients once for the group, and ``check(kernel, fn, inputs, ref)`` compares a row with them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from iomodel.algo_peers import BACKWARD_KERNELS, DETERMINISTIC_KERNELS, algo_of

__all__ = ["TorchAlgorithms", "BackwardSet", "BACKENDS"]

#: backward peer -> the ``torch.nn.attention.SDPBackend`` member its forward is forced to
BACKENDS = {"torch_sdpa_flash_bwd": "FLASH_ATTENTION", "torch_sdpa_cudnn_bwd": "CUDNN_ATTENTION",
            "torch_sdpa_efficient_bwd": "EFFICIENT_ATTENTION"}
_REF_ELEMENTS = 1 << 28   # float32 scores per reference chunk (1 GiB)


def _backward_entry(kernel: str) -> Callable[..., Any]:
    """The entry point of one of our backward families: both have ``kernels.flash_bwd_sm80.backward``'s
    signature (``deterministic`` picks the twin)."""
    if kernel.startswith("flash_bwd_sm90"):
        from kernels import flash_bwd_sm90

        return flash_bwd_sm90.backward
    import kernels

    return kernels.flash_attention_backward


@dataclass
class BackwardSet:
    """One input set of a backward group: q, k, v (B, H, N|M, d), dout, the mask flag, and each kernel's
    call arguments (``args[kernel]``: the tuple its row runner takes, or the exception its forward raised)."""

    q: Any
    k: Any
    v: Any
    dout: Any
    causal: bool
    args: dict = field(default_factory=dict)


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
        if kernel in BACKWARD_KERNELS:
            return [self._ours_set(g, shape, dt) for _ in range(n_sets)]
        if algo == "attention-backward":
            return [self._backward_set(kernel, g, shape, dt) for _ in range(n_sets)]
        raise ValueError(f"{kernel}: not an algorithm peer")

    def _backend(self, name: str):
        """``sdpa_kernel`` forcing one SDPA backend (by its ``SDPBackend`` member name)."""
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel([getattr(SDPBackend, name)])

    def _qkv(self, g, shape, dt) -> tuple:
        """q, k, v (B, H, N|M, d) standard normal, and ``dout`` drawn after them."""
        B, H, N, M, d = (shape[k] for k in ("B", "H", "N", "M", "d"))
        q, k, v, dout = (self._randn(g, B * H * n, d, dt).reshape(B, H, n, d) for n in (N, M, M, N))
        return q, k, v, dout

    def _dout_like(self, out, dout):
        """``dout``'s values with ``out``'s strides (as autograd hands a gradient over)."""
        like = self.torch.empty_like(out)
        like.copy_(dout)
        return like

    def _peer_args(self, kernel: str, q, k, v, dout, causal: bool) -> tuple:
        """(q', k', v', out, dout, causal) of a peer's backward: leaves sharing q, k and v's memory, the
        forward run with the peer's backend (a backend this device or these inputs lack raises here)."""
        leaves = tuple(x.detach().requires_grad_() for x in (q, k, v))
        with self._backend(BACKENDS[kernel]):
            out = self.F.scaled_dot_product_attention(*leaves, is_causal=causal)
        return (*leaves, out, self._dout_like(out, dout), causal)

    def _ours_args(self, q, k, v, dout, causal: bool) -> tuple:
        """(q, k, v, out, lse, dout, causal) of our backward kernels: ``out`` and the LSE from our forward."""
        import kernels

        out, lse = kernels.flash_attention(q, k, v, causal=causal, return_lse=True)
        return q, k, v, out, lse, self._dout_like(out, dout), causal

    def _backward_set(self, kernel: str, g, shape, dt) -> tuple:
        """One peer's backward row's input set (``_peer_args``), on fresh q, k, v and dout."""
        return self._peer_args(kernel, *self._qkv(g, shape, dt), bool(shape.get("causal", False)))

    def _ours_set(self, g, shape, dt) -> tuple:
        """One row of our backward kernel's input set (``_ours_args``), on fresh q, k, v and dout."""
        return self._ours_args(*self._qkv(g, shape, dt), bool(shape.get("causal", False)))

    def make_backward_group(self, shape, kernels, n_sets: int, seed: int) -> list[tuple]:
        """``n_sets`` input sets ``(BackwardSet,)`` of one backward shape for `kernels` (module docstring)."""
        torch = self.torch
        g = torch.Generator(device="cuda")
        g.manual_seed(seed)
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[shape.get("dtype", "bf16")]
        causal = bool(shape.get("causal", False))
        sets = []
        for _ in range(n_sets):
            s = BackwardSet(*self._qkv(g, shape, dt), causal)
            mine = None
            for kernel in dict.fromkeys(kernels):
                if kernel in BACKWARD_KERNELS:   # our rows share one forward
                    mine = mine or self._ours_args(s.q, s.k, s.v, s.dout, causal)
                    s.args[kernel] = mine
                    continue
                try:
                    s.args[kernel] = self._peer_args(kernel, s.q, s.k, s.v, s.dout, causal)
                except Exception as exc:  # noqa: BLE001 - a backend refusing these inputs: its row says so
                    s.args[kernel] = exc
            sets.append((s,))
        return sets

    def group_runner(self, kernel: str, config: Any = None) -> Callable[..., Any]:
        """The timed call of `kernel` on a ``BackwardSet`` (its arguments there, as ``runner`` takes them)."""
        run = self.runner(kernel, config)

        def call(s: BackwardSet):
            args = s.args[kernel]
            if isinstance(args, Exception):
                raise args
            return run(*args)

        return call

    def reference(self, s: BackwardSet) -> tuple:
        """The float32 dQ, dK, dV of a backward group's first set (every row of the group is checked on it)."""
        return self._backward_reference(s.q, s.k, s.v, s.dout, s.causal)

    def runner(self, kernel: str, config: Any = None) -> Callable[..., Any]:
        """The timed call on one input tuple (``config``: our backward kernels' tiles)."""
        torch, F = self.torch, self.F
        algo = algo_of(kernel)
        if kernel in BACKWARD_KERNELS:
            backward = _backward_entry(kernel)
            det = kernel in DETERMINISTIC_KERNELS
            return lambda q, k, v, out, lse, dout, causal: backward(
                dout, q, k, v, out, lse, causal=causal, config=config, deterministic=det)
        if algo == "matmul":
            return lambda a, b, c: torch.matmul(a, b, out=c)
        if algo == "cross-entropy":
            return lambda h, w, t: F.cross_entropy(h @ w, t)
        if algo == "mlp":
            return lambda x, w1, w2: F.gelu(x @ w1) @ w2
        if algo == "attention-backward":
            return lambda q, k, v, out, dout, _causal: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        raise ValueError(f"{kernel}: not an algorithm peer")

    def _rel(self, out, ref) -> tuple[float, bool]:
        """(max |out - ref| / max |ref|, whether ``out`` is all finite)."""
        o = out.float()
        if not bool(self.torch.isfinite(o).all()):
            return float("nan"), False
        return float((o - ref).abs().max()) / max(float(ref.abs().max()), 1e-30), True

    def check(self, kernel: str, fn: Callable[..., Any], inputs, ref=None) -> tuple[float, bool]:
        """Run ``fn`` once on the first input set and compare with float32 on the same inputs; matmul's
        output buffer is NaN-poisoned first, so an unwritten element fails.  The loss is checked as the
        scalar the timed call returns and per token (``reduction='none'``), the worse of the two.  `ref`:
        a backward group's reference (``reference``), its set a ``BackwardSet``."""
        torch, F = self.torch, self.F
        algo = algo_of(kernel)
        if algo == "attention-backward":
            with self._debug(kernel):
                if ref is not None:
                    return self._compare_grads(fn(*inputs[0]), ref)
                return self._check_backward(fn, inputs[0])
        a, b, c = inputs[0]
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

    def _debug(self, kernel: str):
        """Our kernels' check in the kernels' debug mode (``kernels.runtime.debugging``); peers' as they are."""
        from kernels.runtime import debugging

        return debugging(kernel in BACKWARD_KERNELS)

    def _backward_reference(self, q, k, v, dout, causal: bool = False) -> tuple:
        """dQ, dK, dV of the math backend on float32 copies, a few (batch, head) pairs at a time."""
        torch = self.torch
        B, H, N, d = q.shape
        M = k.shape[2]
        flat = [x.detach().reshape(B * H, x.shape[2], d) for x in (q, k, v, dout)]
        grads = [torch.empty(x.shape, device="cuda", dtype=torch.float32) for x in flat[:3]]
        step = max(1, _REF_ELEMENTS // (N * M))
        for i in range(0, B * H, step):
            qs, ks, vs = (x[i:i + step].float().requires_grad_() for x in flat[:3])
            with self._backend("MATH"):
                o = self.F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
            for dst, src in zip(grads, torch.autograd.grad(o, (qs, ks, vs), flat[3][i:i + step].float())):
                dst[i:i + step] = src
            del o, qs, ks, vs
        return tuple(gr.reshape(x.shape) for gr, x in zip(grads, (q, k, v)))

    def _check_backward(self, fn: Callable[..., Any], inputs: tuple) -> tuple[float, bool]:
        """The timed call once, dQ, dK and dV each against float32: the worst of the three.  Both
        input layouts start with q, k, v and end with dout, causal."""
        grads = fn(*inputs)
        (q, k, v), dout, causal = inputs[:3], inputs[-2], inputs[-1]
        return self._compare_grads(grads, self._backward_reference(q, k, v, dout, causal))

    def _compare_grads(self, grads, refs) -> tuple[float, bool]:
        """The worst of dQ, dK and dV against their float32 references (NaN where any is not finite)."""
        self.torch.cuda.synchronize()
        errs = [self._rel(gr, ref) for gr, ref in zip(grads, refs)]
        if not all(ok for _e, ok in errs):
            return float("nan"), False
        return max(e for e, _ok in errs), True
