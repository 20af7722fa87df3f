"""mma.sync forward: O in 16-byte stores (quad::transpose) against the 4-byte stores (IOM_SM80_O_STORE4),
beside SDPA flash, interleaved.  It ran on main plus tried-sm80-epilogue.patch (the 16-byte epilogue, not
kept, with main's 4-byte stores under IOM_SM80_O_STORE4): on main both rows time the 4-byte stores.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-tiles-h100-2026-11-24/sm80_probe.py"""
import json, os, time
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import kernels.flash_sm80 as f80
from kernels import compile
from validation.timing import CudaEventTimer

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
FLAG = [False]
_build = compile.build


def build(source, arch, names=(), defines=(), label="kernels", flags=()):
    extra = ("IOM_SM80_O_STORE4",) if FLAG[0] else ()
    return _build(source, arch, names=names, defines=tuple(defines) + extra, label=label, flags=flags)


compile.build = build
_kernel = f80.kernel.__wrapped__
_cache = {}


def kernel(*a, **kw):
    key = (FLAG[0], a, tuple(sorted(kw.items())))
    if key not in _cache:
        _cache[key] = _kernel(*a, **kw)
    return _cache[key]


f80.kernel = kernel


def ours(old):
    def run(q, k, v, causal):
        FLAG[0] = old
        try:
            return f80.attention(q, k, v, causal=causal)
        finally:
            FLAG[0] = False
    return run


def flash(q, k, v, causal):
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


timer = CudaEventTimer()
rows = []
for (B, H, N, d) in ((16, 16, 1024, 128), (16, 32, 1024, 64), (4, 16, 4096, 128), (2, 21, 8192, 96),
                     (2, 10, 8192, 192), (1, 16, 16384, 128)):
    for causal in (False, True):
        sets = []
        for s in range(2):
            g = torch.Generator(device="cuda").manual_seed(40 + s)
            q, k, v = (torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
            sets.append((q, k, v, causal))
        a, b = ours(False)(*sets[0]), ours(True)(*sets[0])
        same = bool(torch.equal(a, b))
        names = ["16-byte stores", "4-byte stores", "sdpa flash"]
        res = timer.time_interleaved([ours(False), ours(True), flash], sets, rounds=5)
        fl = 4 * B * H * N * N * d / (2 if causal else 1)
        line = []
        for nm, o in zip(names, res):
            r = {"shape": [B, H, N, d, causal], "impl": nm, "same_output": same}
            if isinstance(o, Exception):
                r["error"] = repr(o)[:300]
            else:
                r.update(ms=o.median_s * 1e3, tflops=fl / o.median_s / 1e12)
            rows.append(r)
            line.append(f"{nm} {r.get('tflops', float('nan')):.0f}")
        print(f"B{B} H{H} N{N} d{d} {'causal' if causal else 'full'} (same {same}): " + "  ".join(line), flush=True)
json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "rows": rows}, open(f"{OUT}/sm80-epilogue-ab.json", "w"), indent=1)
