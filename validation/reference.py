"""The float32 attention every correctness check compares against (torch, imported by the caller).

Causal masks are bottom-right aligned (query i sees keys j <= i + N_k - N_q), K/V heads are shared by
H / H_kv query heads, and rows that see no key give O = 0 and LSE = -inf, as our kernels define them.
Query rows are processed in chunks so the fp32 scores stay under `max_scores_bytes`.
"""
from __future__ import annotations


def attention_reference(q, k, v, causal: bool = False, scale: float | None = None,
                        max_scores_bytes: int = 512 << 20, window_size=(-1, -1), softcap: float = 0.0,
                        alibi_slopes=None):
    """(O, LSE) in float32 for q (B, H, N_q, d), k and v (B, H_kv, N_k, d).  FlashAttention's features:
    `window_size` (left, right; -1 unbounded; causal sets right = 0), `softcap` (logits cap * tanh(logit /
    cap)) and `alibi_slopes` ((H,) or (B, H): logits minus slope * |i + N_k - N_q - j|, after the cap)."""
    import torch
    B, H, n_q, d = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    scale = d ** -0.5 if scale is None else scale
    kf, vf = k.float(), v.float()
    if H != h_kv:
        kf = kf.repeat_interleave(H // h_kv, dim=1)
        vf = vf.repeat_interleave(H // h_kv, dim=1)
    out = torch.empty((B, H, n_q, d), device=q.device, dtype=torch.float32)
    lse = torch.empty((B, H, n_q), device=q.device, dtype=torch.float32)
    rows = max(1, min(n_q, max_scores_bytes // (4 * B * H * n_k)))
    cols = torch.arange(n_k, device=q.device)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # a true fp32 reference
    try:
        for r0 in range(0, n_q, rows):
            r1 = min(n_q, r0 + rows)
            s = torch.matmul(q[:, :, r0:r1].float(), kf.transpose(-1, -2)) * scale
            diag = torch.arange(r0, r1, device=q.device)[:, None] + (n_k - n_q)   # each row's diagonal key
            if softcap > 0:
                s = softcap * torch.tanh(s / softcap)
            if alibi_slopes is not None:
                sl = alibi_slopes.float().reshape(-1, H)[:, :, None, None]
                s -= sl * (diag - cols[None, :]).abs().float()
            left, right = window_size
            right = 0 if causal else right
            if right >= 0:
                s.masked_fill_(cols[None, :] > diag + right, float("-inf"))
            if left >= 0:
                s.masked_fill_(cols[None, :] < diag - left, float("-inf"))
            lse[:, :, r0:r1] = torch.logsumexp(s, dim=-1)
            out[:, :, r0:r1] = torch.matmul(torch.softmax(s, dim=-1).nan_to_num(0.0), vf)
            del s
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return out, lse


def relative_error(torch, out, ref) -> tuple[float, bool]:
    """(max |out - ref| / max |ref|, whether `out` is all finite); `out` may be a tuple led by the output.
    A shape other than the reference's raises ValueError."""
    if isinstance(out, (tuple, list)):
        out = out[0]
    if tuple(out.shape) != tuple(ref.shape):
        raise ValueError(f"output shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    o = out.float()
    if not bool(torch.isfinite(o).all()):
        return float("nan"), False
    return float((o - ref).abs().max()) / max(float(ref.abs().max()), 1e-30), True
