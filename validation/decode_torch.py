"""The decode rows on a GPU (``validation.decode``): the KV cache and its paged twins, our
``kernels.flash_attention_with_kvcache`` and SDPA's backends on the same values, a float32 reference.

One input set (``DecodeSet``) holds q (B, N_q, H, d) and the caches (B, N_k, H_kv, d), standard normal
values drawn in float32 and cast (never zeros); ``cache_seqlens`` an int32 CUDA tensor of N_k for every
sequence (the whole cache is live); for each page size a pool (blocks, page, H_kv, d) holding the same
values behind a shuffled block table (B, N_k / page) int32; for the peers dense copies in SDPA's layout,
q (B, H, N_q, d) and K, V (B, H_kv, N_k, d), and with N_q > 1 an additive (N_q, N_k) mask in the
inputs' dtype, 0 where query i sees key j (j <= i + N_k - N_q: causal, bottom-right) and -inf elsewhere.

Our call: ``flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens[, block_table=...],
causal=True, validate=False, config=cfg)``; its check runs once with ``validate=True`` (the host-side
check of the lengths and the block table) in the kernels' debug mode.  A peer: ``F.scaled_dot_product_
attention`` inside ``sdpa_kernel(backend)`` with ``enable_gqa=True`` where H != H_kv; a backend that
refuses that gets K/V heads repeated (``repeat_interleave``, made for every input set, untimed) and its
row says so; a backend that refuses both records the error.  N_q > 1 needs a bottom-right mask, which
SDPA's ``is_causal`` (top-left) is not: flash and the memory-efficient kernel take
``torch.nn.attention.bias.causal_lower_right`` (their own bottom-right masking, nothing materialized),
cuDNN the additive mask of the input set (given the CausalBias or a boolean mask, torch builds or
converts a mask with elementwise kernels on every call, timed with it; a profile of the additive one
shows cuDNN's attention kernel alone).  On an H100 with torch 2.11 the memory-efficient backend
refuses ``enable_gqa`` ("No available kernel"), so its GQA rows read H / H_kv times the cache.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from iomodel.algo_peers import DECODE_FLOOR, DECODE_PEERS

from .records import short_error
from .torch_common import first_call, randn

__all__ = ["DecodeSet", "TorchDecode", "decode_reference"]

_REF_ELEMENTS = 1 << 27     # float32 elements of K (or V) in one reference chunk (512 MiB)
_FREE_SHARE = 0.7           # of the free memory, what a group's input sets may take


@dataclass
class DecodeSet:
    """One input set of a decode group (module docstring)."""

    q: Any
    k_cache: Any
    v_cache: Any
    seqlens: Any
    paged: dict = field(default_factory=dict)       # page size -> (k pool, v pool, block table)
    q_peer: Any = None
    k_peer: Any = None
    v_peer: Any = None
    mask: Any = None
    expanded: Any = None                            # (k, v) with repeated heads, for a peer that needs them


def decode_reference(torch, q, k, v, causal: bool = True, scale: float | None = None):
    """float32 attention of q (B, N_q, H, d) over k, v (B, N_k, H_kv, d), query head h on K/V head
    h // (H / H_kv), causal bottom-right; a sequence and a few K/V heads at a time, so the float32
    copies stay near ``_REF_ELEMENTS``.  Returns (B, N_q, H, d)."""
    B, n_q, H, d = q.shape
    n_k, h_kv = k.shape[1], k.shape[2]
    g, scale = H // h_kv, d ** -0.5 if scale is None else scale
    out = torch.empty((B, n_q, H, d), device=q.device, dtype=torch.float32)
    step = max(1, _REF_ELEMENTS // (n_k * d))
    hidden = None
    if causal and n_q > 1:   # query i sees keys j <= i + n_k - n_q
        hidden = torch.arange(n_k, device=q.device)[None, :] > torch.arange(n_q, device=q.device)[:, None] + n_k - n_q
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False   # a true fp32 reference
    try:
        for b in range(B):
            for h0 in range(0, h_kv, step):
                h1 = min(h_kv, h0 + step)
                kf, vf = (x[b, :, h0:h1].float().transpose(0, 1) for x in (k, v))            # (hk, N_k, d)
                qf = q[b, :, h0 * g:h1 * g].float().reshape(n_q, h1 - h0, g, d).permute(1, 2, 0, 3)  # (hk, g, N_q, d)
                s = torch.matmul(qf, kf[:, None].transpose(-1, -2)) * scale                     # (hk, g, N_q, N_k)
                if hidden is not None:
                    s.masked_fill_(hidden, float("-inf"))
                o = torch.matmul(torch.softmax(s, dim=-1), vf[:, None])                          # (hk, g, N_q, d)
                out[b, :, h0 * g:h1 * g] = o.permute(2, 0, 1, 3).reshape(n_q, (h1 - h0) * g, d)
                del kf, vf, qf, s, o
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return out


class _Ours:
    """Our kernel on one cache layout: ``fn(s)`` the timed call (``validate=False``), ``checked(s)`` the
    check's (``validate=True``)."""

    def __init__(self, entry, config: Any, page_size: int | None):
        self.entry, self.config, self.page_size = entry, config, page_size

    def _call(self, s: DecodeSet, validate: bool):
        if self.page_size:
            k, v, table = s.paged[self.page_size]
            return self.entry(s.q, k, v, s.seqlens, block_table=table, causal=True, validate=validate,
                              config=self.config)
        return self.entry(s.q, s.k_cache, s.v_cache, s.seqlens, causal=True, validate=validate, config=self.config)

    def __call__(self, s: DecodeSet):
        return self._call(s, False)

    def checked(self, s: DecodeSet):
        return self._call(s, True)


class _Sdpa:
    """One SDPA backend on the dense copies, pinned by ``sdpa_kernel`` so torch cannot fall back to
    another; ``how`` says how it ran (GQA, mask) for the row's record."""

    def __init__(self, torch, backend: str):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        self.torch, self.F, self.name = torch, torch.nn.functional, backend
        self.pin = lambda: sdpa_kernel([getattr(SDPBackend, backend)])
        self.expand = False
        self.how: dict[str, str] = {"backend": backend}
        self._bias = None

    def _mask(self, s: DecodeSet):
        n_q, n_k = s.q_peer.shape[2], s.k_peer.shape[2]
        if n_q == 1:
            self.how["mask"] = "none (one query sees every key)"
            return None
        if self.name == "CUDNN_ATTENTION":
            self.how["mask"] = "additive (N_q, N_k) tensor (0 or -inf), bottom-right causal"
            return s.mask
        if self._bias is None:
            from torch.nn.attention.bias import causal_lower_right

            self._bias = causal_lower_right(n_q, n_k)
        self.how["mask"] = "torch.nn.attention.bias.causal_lower_right"
        return self._bias

    def __call__(self, s: DecodeSet):
        gqa = s.q_peer.shape[1] != s.k_peer.shape[1]
        k, v = s.expanded if self.expand else (s.k_peer, s.v_peer)
        self.how["gqa"] = self.how.get("gqa") or ("enable_gqa=True" if gqa else "same heads")
        with self.pin():
            return self.F.scaled_dot_product_attention(s.q_peer, k, v, attn_mask=self._mask(s),
                                                       enable_gqa=gqa and not self.expand)


class TorchDecode:
    """``read_roof``, ``make_inputs``, ``reference``, ``runner`` and ``check`` of the decode rows."""

    def __init__(self, torch):
        self.torch = torch
        self._floor = None   # the read floor's kernel, compiled at its first row

    def read_roof(self, quick: bool = False) -> dict[str, Any]:
        from .ceilings import measure_read

        return measure_read(self.torch, nbytes=(1 << 30) if quick else (2 << 30))

    def _free(self) -> int:
        return int(self.torch.cuda.mem_get_info()[0])

    def _paged(self, g, k, v, page: int) -> tuple:
        """Pools holding ``k`` and ``v`` page by page at the blocks of a shuffled block table."""
        torch = self.torch
        B, n_k, h_kv, d = k.shape
        if n_k % page:
            raise ValueError(f"N_k = {n_k} is not a whole number of {page}-token pages")
        n = n_k // page
        perm = torch.randperm(B * n, generator=g, device="cuda")
        pools = []
        for x in (k, v):
            pool = torch.empty((B * n, page, h_kv, d), device="cuda", dtype=x.dtype)
            pool[perm] = x.reshape(B * n, page, h_kv, d)   # page p of sequence b at block table[b, p]
            pools.append(pool)
        return pools[0], pools[1], perm.view(B, n).to(torch.int32)

    def _set(self, g, shape, pages, peers: bool) -> DecodeSet:
        torch = self.torch
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[shape.get("dtype", "bf16")]
        B, H, h_kv, n_q, n_k, d = (shape[k] for k in ("B", "H", "H_kv", "N_q", "N_k", "d"))
        s = DecodeSet(randn(torch, g, (B, n_q, H, d), dt), randn(torch, g, (B, n_k, h_kv, d), dt),
                      randn(torch, g, (B, n_k, h_kv, d), dt), torch.full((B,), n_k, device="cuda", dtype=torch.int32))
        s.paged = {p: self._paged(g, s.k_cache, s.v_cache, p) for p in pages}
        if peers:
            s.q_peer, s.k_peer, s.v_peer = (x.transpose(1, 2).contiguous() for x in (s.q, s.k_cache, s.v_cache))
            if n_q > 1:
                cols, rows = torch.arange(n_k, device="cuda"), torch.arange(n_q, device="cuda")
                hidden = cols[None, :] > rows[:, None] + (n_k - n_q)
                s.mask = torch.zeros((n_q, n_k), device="cuda", dtype=dt).masked_fill_(hidden, float("-inf"))
        return s

    def make_inputs(self, shape, pages, peers: bool, n_sets: int, seed: int) -> list[tuple[DecodeSet]]:
        """``n_sets`` input sets (fewer, at least 2, where the free memory holds no more), each a 1-tuple;
        the first set's pools are checked to hold its cache."""
        from .decode import decode_bytes

        per_set = decode_bytes(shape)["total"] * (1 + len(pages) + (1 if peers else 0))
        fit = int(_FREE_SHARE * self._free() // max(per_set, 1))
        if fit < 2:
            raise MemoryError(f"a decode input set needs {per_set / 2**30:.1f} GiB; "
                              f"{self._free() / 2**30:.1f} GiB free holds fewer than two")
        g = self.torch.Generator(device="cuda")
        g.manual_seed(seed)
        sets = [(self._set(g, shape, pages, peers),) for _ in range(min(n_sets, fit))]
        first = sets[0][0]
        for page, (k_pool, v_pool, table) in first.paged.items():
            idx = table.long().view(-1)
            for pool, cache in ((k_pool, first.k_cache), (v_pool, first.v_cache)):
                if not self.torch.equal(pool[idx].view(cache.shape), cache):
                    raise RuntimeError(f"the {page}-token pool gathered through its block table is not the cache")
        return sets

    def reference(self, s: DecodeSet):
        return decode_reference(self.torch, s.q, s.k_cache, s.v_cache, causal=True)

    def runner(self, kernel: str, config: Any = None, page_size: int | None = None):
        """The timed call of a row on one input set."""
        if kernel in DECODE_PEERS:
            return _Sdpa(self.torch, DECODE_PEERS[kernel])
        if kernel == DECODE_FLOOR:
            if self._floor is None:
                from .read_floor import ReadFloor

                self._floor = ReadFloor(self.torch)
            return self._floor
        import kernels

        entry = getattr(kernels, "flash_attention_with_kvcache", None)
        if entry is None:
            raise RuntimeError("kernels has no flash_attention_with_kvcache (yet)")
        return _Ours(entry, config, page_size)

    def _expand(self, fn: _Sdpa, inputs, why: BaseException) -> None:
        """Repeat the K/V heads of every input set for a peer that refused ``enable_gqa``."""
        first = inputs[0][0]
        g = first.q_peer.shape[1] // first.k_peer.shape[1]
        need = len(inputs) * 2 * first.k_peer.numel() * first.k_peer.element_size() * g
        if need > _FREE_SHARE * self._free():
            raise MemoryError(f"{short_error(why)}; repeating the K/V heads would need {need / 2**30:.1f} GiB")
        for (s,) in inputs:
            s.expanded = tuple(x.repeat_interleave(g, dim=1) for x in (s.k_peer, s.v_peer))
        fn.expand = True
        fn.how["gqa"] = f"K/V heads repeated (enable_gqa refused: {short_error(why, 400)})"

    def _peer_output(self, fn: _Sdpa, inputs):
        """The peer's first call, with the GQA fallback; its output in our layout (B, N_q, H, d)."""
        s = inputs[0][0]
        try:
            out = first_call(self.torch, fn, s)
        except Exception as first:   # noqa: BLE001 - maybe the backend refuses GQA: try repeated heads
            if s.q_peer.shape[1] == s.k_peer.shape[1]:
                raise
            self._recover()
            self._expand(fn, inputs, first)
            try:
                out = first_call(self.torch, fn, s)
            except Exception as second:   # noqa: BLE001
                raise RuntimeError(f"{short_error(first, 280)}; with K/V heads repeated: "
                                   f"{short_error(second, 280)}") from second
        return out.transpose(1, 2)

    def _recover(self) -> None:
        try:
            self.torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - a sticky error: the next call says so
            pass

    def check(self, kernel: str, fn, inputs, ref) -> tuple[float, bool]:
        """The row's call once on the first set against the reference: (max |out - ref| / max |ref|,
        whether the output is all finite).  Ours in the kernels' debug mode, with ``validate=True``."""
        torch = self.torch
        if kernel == DECODE_FLOOR:   # no attention output: its integer sum of the caches' words is exact,
            got = int(fn(inputs[0][0]).sum())   # so any byte missed or read twice shows as an error of 1
            return (0.0 if got == fn.expected(inputs[0][0]) else 1.0), True
        if isinstance(fn, _Sdpa):
            out = self._peer_output(fn, inputs)
        else:
            from kernels.runtime import debugging

            with debugging(True):
                out = fn.checked(inputs[0][0])
                torch.cuda.synchronize()
        from .reference import relative_error

        return relative_error(torch, out, ref)
