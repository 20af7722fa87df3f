"""The variable-length prefill rows on a GPU (``validation.varlen``): packed inputs, our varlen and dense
kernels, PyTorch's native varlen forwards, and a float32 reference per sequence.

One input set (``VarlenSet``) holds q (T, H, d) and k, v (T, H_kv, d), standard normal values drawn in
float32 and cast (never zeros), the sequences back to back; ``cu_seqlens`` (B + 1,) int32 on the GPU,
starting at 0; the longest length.  Where the group has dense rows, the first B * N tokens as a dense
batch (B, H, N, d), contiguous copies; where it has the nested-tensor peer, nested (jagged) views of the
packed tensors, (B, H, j, d) after the transpose SDPA wants (made once per set, untimed; an error making
them is that peer's row's error).

Our varlen call: ``kernels.flash_attention_varlen(q, k, v, cu, cu, N_max, N_max, causal=...,
validate=False, config=cfg)``; its check runs once with ``validate=True`` (the host-side check of
``cu_seqlens``) in the kernels' debug mode.  Our dense rows: ``kernels.flash_attention(q, k, v,
causal=..., config=cfg, backend=...)`` on the dense batch, checked the same way.  The peers are looked up
when their row runs, so a torch without them records an error: ``torch.nn.attention.varlen.varlen_attn``
(causal as its signature takes it: ``is_causal`` in its first releases, ``window_size=(-1, 0)`` later;
``enable_gqa=True`` where it takes that and H != H_kv), and ``F.scaled_dot_product_attention`` on the
nested tensors inside ``sdpa_kernel(FLASH_ATTENTION)`` (``is_causal``; ``enable_gqa`` where H != H_kv).
Causal is bottom-right per sequence, which at N_q = N_k is top-left too.
"""
from __future__ import annotations

import importlib
import inspect
import itertools
from dataclasses import dataclass
from typing import Any

from iomodel.algo_peers import VARLEN_DENSE, VARLEN_PEERS

from .records import short_error
from .torch_common import first_call, randn

__all__ = ["VarlenSet", "VarlenRef", "TorchVarlen", "varlen_reference"]

_FREE_SHARE = 0.6           # of the free memory, what a group's input sets may take (the reference needs room)


@dataclass
class VarlenSet:
    """One input set of a varlen group (module docstring)."""

    q: Any
    k: Any
    v: Any
    cu: Any
    seqlens: list
    causal: bool
    dense: tuple | None = None      # (q, k, v) (B, H, N, d)
    nested: Any = None              # (q, k, v) nested (B, H, j, d), or the exception making them raised

    @property
    def max_len(self) -> int:
        return max(self.seqlens)


@dataclass
class VarlenRef:
    """The group's float32 reference: packed (T, H, d), and the dense batch's (B, H, N, d) where it has one."""

    packed: Any
    dense: Any = None


def varlen_reference(torch, q, k, v, seqlens, causal: bool):
    """float32 attention of each sequence alone (``validation.reference.attention_reference`` on its
    slice, bottom-right causal), written back to back as (T, H, d); empty sequences write nothing."""
    from .reference import attention_reference

    out = torch.zeros(q.shape, device=q.device, dtype=torch.float32)
    start = 0
    for n in seqlens:
        if n:
            qs, ks, vs = (x[start:start + n].transpose(0, 1)[None] for x in (q, k, v))   # (1, H, n, d)
            out[start:start + n] = attention_reference(qs, ks, vs, causal)[0][0].transpose(0, 1)
        start += n
    return out


class _Ours:
    """Our varlen kernel: ``fn(s)`` the timed call (``validate=False``), ``checked(s)`` the check's."""

    def __init__(self, entry, config: Any, causal: bool):
        self.entry, self.config, self.causal = entry, config, causal

    def _call(self, s: VarlenSet, validate: bool):
        return self.entry(s.q, s.k, s.v, s.cu, s.cu, s.max_len, s.max_len, causal=self.causal, validate=validate,
                          config=self.config)

    def __call__(self, s: VarlenSet):
        return self._call(s, False)

    def checked(self, s: VarlenSet):
        return self._call(s, True)


class _Dense:
    """Our dense forward on the set's dense batch, with the row's config and backend."""

    def __init__(self, entry, config: Any, causal: bool, backend: str):
        self.entry, self.config, self.causal, self.backend = entry, config, causal, backend

    def __call__(self, s: VarlenSet):
        q, k, v = s.dense
        return self.entry(q, k, v, causal=self.causal, config=self.config, backend=self.backend)

    checked = __call__


class _VarlenAttn:
    """``torch.nn.attention.varlen.varlen_attn`` on the packed tensors, causal and GQA as its signature
    takes them (``how`` says which)."""

    def __init__(self, torch, causal: bool, gqa: bool):
        try:
            fn = getattr(importlib.import_module("torch.nn.attention.varlen"), "varlen_attn", None)
        except ImportError as exc:
            raise RuntimeError(f"torch {torch.__version__} has no torch.nn.attention.varlen ({exc})") from None
        if fn is None:
            raise RuntimeError(f"torch {torch.__version__}: torch.nn.attention.varlen has no varlen_attn")
        params = inspect.signature(fn).parameters
        self.kw: dict[str, Any] = {}
        self.how = {"call": VARLEN_PEERS["torch_varlen_attn"]}
        if "is_causal" in params:
            self.kw["is_causal"] = causal
        elif "window_size" in params:
            self.kw["window_size"] = (-1, 0) if causal else (-1, -1)
        elif causal:
            raise RuntimeError("varlen_attn takes neither is_causal nor window_size: no causal call")
        self.how["causal"] = ", ".join(f"{k}={v}" for k, v in self.kw.items()) or "not causal"
        if gqa and "enable_gqa" in params:
            self.kw["enable_gqa"] = True
        if gqa:   # without the argument, FlashAttention's kernel shares K/V heads as given (or refuses: the check says)
            self.how["gqa"] = "enable_gqa=True" if "enable_gqa" in params else "H_kv < H as given (no enable_gqa)"
        self.fn = fn

    def __call__(self, s: VarlenSet):
        return self.fn(s.q, s.k, s.v, s.cu, s.cu, s.max_len, s.max_len, **self.kw)


class _Nested:
    """SDPA's flash backend on the set's nested tensors, pinned by ``sdpa_kernel``; its output, nested
    (B, H, j, d), back to (T, H, d) for the check (``packed``)."""

    def __init__(self, torch, causal: bool, gqa: bool):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        self.F, self.causal = torch.nn.functional, causal
        self.pin = lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION])
        self.kw = {"enable_gqa": True} if gqa else {}
        self.how = {"call": VARLEN_PEERS["sdpa_flash_nested"], "causal": f"is_causal={causal}",
                    "gqa": "enable_gqa=True" if gqa else "same heads"}

    def __call__(self, s: VarlenSet):
        if isinstance(s.nested, BaseException):
            raise RuntimeError(f"could not make the nested tensors: {short_error(s.nested)}")
        q, k, v = s.nested
        with self.pin():
            return self.F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, **self.kw)

    @staticmethod
    def packed(out):
        return out.transpose(1, 2).values()


class TorchVarlen:
    """``make_inputs``, ``reference``, ``runner`` and ``check`` of the varlen rows."""

    def __init__(self, torch):
        self.torch = torch

    def _nested(self, s: VarlenSet, seqlens) -> Any:
        """Nested (jagged) views of the packed tensors, or the exception making them raised."""
        torch = self.torch
        try:
            from torch.nested import nested_tensor_from_jagged

            offsets = s.cu.to(torch.int64)
            kw = {}
            if "max_seqlen" in inspect.signature(nested_tensor_from_jagged).parameters:
                kw = {"min_seqlen": min(seqlens), "max_seqlen": max(seqlens)}   # no host sync to find them
            return tuple(nested_tensor_from_jagged(x, offsets, **kw).transpose(1, 2) for x in (s.q, s.k, s.v))
        except Exception as exc:  # noqa: BLE001 - the nested peer's row records it
            return exc

    def _set(self, g, shape, dense, nested: bool) -> VarlenSet:
        torch = self.torch
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[shape.get("dtype", "bf16")]
        T, H, h_kv, d, lens = shape["T"], shape["H"], shape["H_kv"], shape["d"], list(shape["seqlens"])
        cu = torch.tensor([0, *itertools.accumulate(lens)], device="cuda", dtype=torch.int32)
        s = VarlenSet(randn(torch, g, (T, H, d), dt), randn(torch, g, (T, h_kv, d), dt),
                      randn(torch, g, (T, h_kv, d), dt), cu, lens, bool(shape.get("causal")))
        if dense is not None:   # the first B N tokens as B sequences of N
            B, n = dense["B"], dense["N_max"]
            s.dense = tuple(x[:B * n].view(B, n, x.shape[1], d).transpose(1, 2).contiguous() for x in (s.q, s.k, s.v))
        if nested:
            s.nested = self._nested(s, lens)
        return s

    def make_inputs(self, shape, dense, nested: bool, n_sets: int, seed: int) -> list[tuple[VarlenSet]]:
        """``n_sets`` input sets (fewer, at least 2, where the free memory holds no more), each a 1-tuple."""
        torch = self.torch
        per_token = (shape["H"] + 2 * shape["H_kv"]) * shape["d"] * 2
        per_set = per_token * (shape["T"] + (dense["T"] if dense is not None else 0))
        free = int(torch.cuda.mem_get_info()[0])
        fit = int(_FREE_SHARE * free // max(per_set, 1))
        if fit < 2:
            raise MemoryError(f"a varlen input set needs {per_set / 2**30:.1f} GiB; "
                              f"{free / 2**30:.1f} GiB free holds fewer than two")
        g = torch.Generator(device="cuda")
        g.manual_seed(seed)
        return [(self._set(g, shape, dense, nested),) for _ in range(min(n_sets, fit))]

    def reference(self, s: VarlenSet) -> VarlenRef:
        ref = VarlenRef(varlen_reference(self.torch, s.q, s.k, s.v, s.seqlens, s.causal))
        if s.dense is not None:
            from .reference import attention_reference

            ref.dense = attention_reference(*s.dense, s.causal)[0]
        return ref

    def runner(self, kernel: str, config: Any, shape):
        """The timed call of a row on one input set."""
        causal, gqa = bool(shape.get("causal")), shape["H"] != shape["H_kv"]
        if kernel == "torch_varlen_attn":
            return _VarlenAttn(self.torch, causal, gqa)
        if kernel == "sdpa_flash_nested":
            return _Nested(self.torch, causal, gqa)
        import kernels

        if kernel in VARLEN_DENSE:
            return _Dense(kernels.flash_attention, config, causal, VARLEN_DENSE[kernel])
        entry = getattr(kernels, "flash_attention_varlen", None)
        if entry is None:
            raise RuntimeError("kernels has no flash_attention_varlen (yet)")
        if config is None and shape.get("backend") == "sm80":   # the config names the family: none, no sm80
            raise RuntimeError(f"{kernel}: no flash_sm80 config picked (the run's notes say why); without one "
                               "the kernel would pick its own family")
        return _Ours(entry, config, causal)

    def check(self, kernel: str, fn, inputs, ref: VarlenRef) -> tuple[float, bool]:
        """The row's call once on the first set against the reference: (max |out - ref| / max |ref|,
        whether the output is all finite).  Ours in the kernels' debug mode, with ``validate=True``."""
        torch, s = self.torch, inputs[0][0]
        if kernel in VARLEN_PEERS:
            out = first_call(torch, fn, s)
            want = ref.packed
            if isinstance(fn, _Nested):
                out = fn.packed(out)
        else:
            from kernels.runtime import debugging

            with debugging(True):
                out = fn.checked(s)
                torch.cuda.synchronize()
            want = ref.dense if kernel in VARLEN_DENSE else ref.packed
        from .reference import relative_error

        return relative_error(torch, out, want)
