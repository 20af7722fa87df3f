"""Probe: the mma.sync forward at d = 256 N = 8192 B2 H8 (no mask; the model's pick, 128x96 w8 s1) against SDPA flash
(FlashAttention-2) in groups of different company, the harness's timer (0.1 s lead-in, 3 input sets): the pair
alone (7 rounds, either order), each alone, and the harness's group (ours, the wgmma kernel, SDPA flash, cuDNN,
efficient; 5 rounds), three times over.  Our median sat at 3.526-3.529 ms in every record of 2026-11-25 while
FlashAttention-2's moved from 3.41 (the harness) to 3.53 ms (the tail probe): whose time moves with the company?
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm80-d256-h100-2026-11-25/neighbours_probe.py"""
import sys, time, torch
import kernels
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

peers = peer_runners(torch)
timer = CudaEventTimer()
B, H, N, d = 2, 8, 8192, 256
g = torch.Generator(device="cuda")
g.manual_seed(256)
sets = [tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3)) for _ in range(3)]
fn = {
    "flash_sm80": lambda q, k, v: kernels.run("flash_sm80", q, k, v),
    "flash_sm90": lambda q, k, v: kernels.run("flash_sm90", q, k, v),
    "sdpa_flash": lambda q, k, v: peers["sdpa_flash"][0](q, k, v, False),
    "sdpa_cudnn": lambda q, k, v: peers["sdpa_cudnn"][0](q, k, v, False),
    "sdpa_efficient": lambda q, k, v: peers["sdpa_efficient"][0](q, k, v, False),
}
ref = fn["sdpa_flash"](*sets[0]).float()
for name, f in fn.items():
    err = (f(*sets[0]).float() - ref).abs().max().item()
    if err > 0.05:
        raise SystemExit(f"{name}: max abs diff {err}")
GROUPS = [("pair", ["flash_sm80", "sdpa_flash"], 7), ("pair reversed", ["sdpa_flash", "flash_sm80"], 7),
          ("ours alone", ["flash_sm80"], 7), ("FA2 alone", ["sdpa_flash"], 7),
          ("harness group", ["flash_sm80", "flash_sm90", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient"], 5)]
rows, t0 = [], time.time()
for rep in range(3):
    for label, names, rounds in GROUPS:
        rows += probe_record.timed_rows(timer, [fn[n] for n in names], names, sets, rounds=rounds, group=label, rep=rep)
    print(f"repeat {rep}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
probe_record.write("neighbours.json", rows,
                   "PYTHONPATH=. python3 validation/results/profile-sm80-d256-h100-2026-11-25/neighbours_probe.py")
print(f"{'group':16} rep  flash_sm80 ms (min)      sdpa_flash ms (min)")
for label, names, _ in GROUPS:
    for rep in range(3):
        rs = {r["impl"]: r for r in rows if r["group"] == label and r["rep"] == rep}
        cell = lambda n: f"{rs[n]['median_ms']:.4f} ({rs[n]['min_ms']:.4f})" if n in rs else " " * 17
        print(f"{label:16} {rep}    {cell('flash_sm80')}   {cell('sdpa_flash')}")
