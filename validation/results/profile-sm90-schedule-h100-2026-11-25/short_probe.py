"""Probe, after rotate_probe.py: on short non-causal sequences the harness still had the wgmma kernel at parity with
cuDNN (d = 64 N = 1024 B16 0.983x to 1.005x in shapes runs 5 and 6 and sweep run 8) while its minima sat 2.5 to
3.8% under cuDNN's and its medians 6 to 10% over its own minima (cuDNN's 3 to 4.4%).  A persistent CTA walks a fixed list
of tiles whatever time it starts, so a CTA that starts late (its SM still busy with the call before) ends late.
Three forms of the shipped build, beside cuDNN in one interleaved group a shape (the harness's timer, 9 rounds,
0.1 s lead-in, 3 input sets), outputs checked against cuDNN first: the rotated fixed list (shipped), the
dynamic schedule's claims (SM90_DYNAMIC_FULL: a CTA that starts late claims fewer tiles), and a grid of one CTA
a tile (not persistent: the hardware hands out the tiles).
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm90-schedule-h100-2026-11-25/short_probe.py"""
import sys, time, torch
from kernels import flash_sm90, compile as kcompile
from iomodel import chooser, families
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

peers = peer_runners(torch)
timer = CudaEventTimer()
FORMS = {"rotated (shipped)": {}, "dynamic": {"_defines": (flash_sm90.DYNAMIC_FULL,)},
         "one CTA a tile": {"_persistent": False}}
SHAPES = [(64, 32, 1024, 16), (128, 16, 1024, 16), (64, 32, 2048, 8), (128, 16, 2048, 8), (64, 32, 4096, 4),
          (128, 16, 4096, 4)]


def pick(d, H, N, B):
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": False, "dtype": "bf16"}
    return chooser.choose(["flash_sm90"], "h100-sxm", shape).config


kcompile.precompile([(lambda c, df: lambda: flash_sm90.module(c, "bf16", False, df))(pick(*s), df)
                     for s in SHAPES for df in ((), (flash_sm90.DYNAMIC_FULL,))])
rows, t0 = [], time.time()
for d, H, N, B in SHAPES:
    c = pick(d, H, N, B)
    g = torch.Generator(device="cuda")
    g.manual_seed(3 * d + N)
    sets = [tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
            for _ in range(3)]
    cudnn = ("sdpa_cudnn", lambda q, k, v: peers["sdpa_cudnn"][0](q, k, v, False))
    fns = [(lambda kw: lambda q, k, v: flash_sm90.attention(q, k, v, config=c, **kw))(kw) for kw in FORMS.values()]
    labels = [f"{families.get('flash_sm90').label(c)} {name}" for name in FORMS]
    rows += probe_record.checked_rows(timer, fns, labels, sets, cudnn, rounds=9, d=d, N=N, B=B, H=H, causal=False)
    print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)

probe_record.write("short.json", rows,
                   "PYTHONPATH=. python3 validation/results/profile-sm90-schedule-h100-2026-11-25/short_probe.py")
print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H"), lambda r: r["impl"] == "sdpa_cudnn")))
