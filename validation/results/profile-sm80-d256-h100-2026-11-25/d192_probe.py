"""Probe: the mma.sync forward at d = 192 N = 8192 B2 H8 (bf16, causal and not), where the model's pick moved from
128x64 w8 s2 to 64x48 w4 s1 once it counts a further warp of the same block as a share (block_warp_overlap) of
another block's, beside SDPA flash in one interleaved group a shape (the harness's timer, 7 rounds), outputs
checked first.  Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-sm80-d256-h100-2026-11-25/d192_probe.py"""
import torch
import kernels
from iomodel import families
from iomodel.families.flash_sm80 import FlashConfig
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

peers = peer_runners(torch)
timer = CudaEventTimer()
fam = families.get("flash_sm80")
CFGS = [FlashConfig(64, 48, 4, 1, 192), FlashConfig(128, 64, 8, 2, 192), FlashConfig(64, 32, 4, 1, 192)]
rows = []
for causal in (False, True):
    g = torch.Generator(device="cuda")
    g.manual_seed(192 + causal)
    sets = [tuple(torch.randn(2, 8, 8192, 192, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
            for _ in range(3)]
    fns = [(lambda c: lambda q, k, v: kernels.run("flash_sm80", q, k, v, causal=causal, config=c))(c) for c in CFGS]
    fa2 = ("sdpa_flash", lambda q, k, v: peers["sdpa_flash"][0](q, k, v, causal))
    rows += probe_record.checked_rows(timer, fns, [fam.label(c) for c in CFGS], sets, fa2, rounds=7, d=192,
                                      N=8192, causal=causal)
probe_record.write("d192.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm80-d256-h100-2026-11-25/d192_probe.py")
for causal in (False, True):
    rs = [r for r in rows if r["causal"] == causal]
    peer = rs[-1]
    for r in rs:
        print(f"causal={causal} {r['impl']:16} {r['median_ms']:.4f} ms (min {r['min_ms']:.4f})  FA2/this {peer['median_ms'] / r['median_ms']:.3f}")
