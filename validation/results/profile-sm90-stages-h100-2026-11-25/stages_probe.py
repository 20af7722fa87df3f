"""Probe: deeper K/V rings for the wgmma forward at d = 64, where the model ranks 192x128 c3 s4 first at
B16 H32 N1024 (0.321 ms against the shipped pick s2's 0.334) but only s2 was shipped: 192x128 c3 with 2, 3
and 4 stages, 128x128 c2 with 2 and 4 (the unshipped ones build without spills for sm_90a), beside SDPA
cuDNN, in one interleaved group a shape (the harness's timer: 5 rounds, 0.1 s lead-in, 3 input sets), each
checked against cuDNN's output first; N = 1024 with and without the causal mask and N = 4096 without.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm90-stages-h100-2026-11-25/stages_probe.py"""
import sys, time, torch
from iomodel.families.flash_sm90 import Sm90Config
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

peers = peer_runners(torch)
timer = CudaEventTimer()
CONFIGS = [Sm90Config(192, 128, s, 64, 3) for s in (2, 3, 4)] + [Sm90Config(128, 128, s, 64, 2) for s in (2, 4)]
rows, t0 = [], time.time()
for B, H, N, causal in ((16, 32, 1024, False), (16, 32, 1024, True), (4, 32, 4096, False)):
    d = 64
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
    g = torch.Generator(device="cuda"); g.manual_seed(N + causal)
    sets = [tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
            for _ in range(3)]
    cudnn = ("sdpa_cudnn", lambda q, k, v: peers["sdpa_cudnn"][0](q, k, v, causal))
    rows += probe_record.config_rows(timer, "flash_sm90", CONFIGS, shape, sets, cudnn, d=d, N=N, B=B, H=H,
                                     causal=causal)
    print(f"N{N} causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
probe_record.write("stages.json", rows,
                   "PYTHONPATH=. python3 validation/results/profile-sm90-stages-h100-2026-11-25/stages_probe.py")
for B, H, N, causal in ((16, 32, 1024, False), (16, 32, 1024, True), (4, 32, 4096, False)):
    rs = [r for r in rows if r["N"] == N and r["causal"] == causal]
    cud = [r for r in rs if r["impl"] == "sdpa_cudnn"][0]["median_ms"]
    print(f"d64 N{N} {'causal' if causal else 'full'}: cuDNN {cud * 1e3:.1f} us")
    for r in sorted([r for r in rs if r["predicted_ms"]], key=lambda r: r["median_ms"]):
        print(f"   {r['impl']:16} {r['median_ms'] * 1e3:7.1f} us  cuDNN/ours {cud / r['median_ms']:.3f}  predicted {r['predicted_ms'] * 1e3:7.1f}")
