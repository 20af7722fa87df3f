"""What the decode and varlen rows' device sides share (validation/decode_torch.py,
validation/varlen_torch.py): standard normal inputs drawn a slice at a time, and a peer's first call
with torch's reasons for refusing a backend folded into its error.  torch is passed in."""
from __future__ import annotations

import warnings

__all__ = ["randn", "reasons", "first_call"]

_DRAW_ELEMENTS = 1 << 26    # float32 elements drawn at a time (256 MiB) before the cast


def randn(torch, g, size: tuple, dt):
    """Standard normal values drawn in float32 and cast to ``dt``, a slice at a time: a whole float32
    draw of a large cache or packed batch would need twice its memory again."""
    out = torch.empty(size, device="cuda", dtype=dt)
    flat = out.view(-1)
    for i in range(0, flat.numel(), _DRAW_ELEMENTS):
        n = min(_DRAW_ELEMENTS, flat.numel() - i)
        flat[i:i + n] = torch.randn(n, generator=g, device="cuda", dtype=torch.float32)
    return out


def reasons(seen, limit: int = 300) -> str:
    """torch's reasons for not using a backend, from the warnings it gave: without the headers ("... not
    used because:") and the backends the pinning disabled, each once."""
    out = []
    for w in seen:
        text = str(w.message).split(" (Triggered")[0].strip()
        if text and not text.endswith("because:") and "runtime disabled" not in text and text not in out:
            out.append(text)
    return "; ".join(out)[:limit]


def first_call(torch, fn, s):
    """``fn(s)``, synchronized, with torch's warnings on why a backend was not used kept out of the log:
    an exception carries them (its message alone says only "No available kernel")."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            out = fn(s)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            why = reasons(seen)
            if not why:
                raise
            head = str(exc).splitlines()[0] if str(exc) else ""
            kind = "" if head and isinstance(exc, RuntimeError) else type(exc).__name__ + (": " if head else "")
            raise RuntimeError(f"{kind}{head} (torch: {why})") from exc
    return out
