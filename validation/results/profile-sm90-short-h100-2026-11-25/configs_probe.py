"""Probe: every shipped wgmma forward config of the head dim at the sweep's short shapes (B16 N1024, d 64
H32 and d 128 H16, causal and not) beside SDPA cuDNN, in one interleaved group a shape (the harness's timer:
5 rounds, 0.1 s lead-in, 3 input sets), with the model's prediction of each config: where the sweep, which
times only the model's pick at N = 1024, has the pick at parity with cuDNN.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm90-short-h100-2026-11-25/configs_probe.py"""
import sys, time, torch
from iomodel import families
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

peers = peer_runners(torch)
timer = CudaEventTimer()
fam = families.get("flash_sm90")
rows, t0 = [], time.time()
for d, H in ((64, 32), (128, 16)):
    for causal in (False, True):
        B, N = 16, 1024
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
        g = torch.Generator(device="cuda"); g.manual_seed(d + causal)
        sets = [tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
                for _ in range(3)]
        cudnn = ("sdpa_cudnn", lambda q, k, v: peers["sdpa_cudnn"][0](q, k, v, causal))
        rows += probe_record.config_rows(timer, "flash_sm90", [c for c in fam.shipped if c.head_dim == d], shape,
                                         sets, cudnn, d=d, N=N, B=B, H=H, causal=causal)
        print(f"d{d} causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
probe_record.write("configs.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-short-h100-2026-11-25/configs_probe.py")
for d in (64, 128):
    for causal in (False, True):
        rs = [r for r in rows if r["d"] == d and r["causal"] == causal]
        cud = [r for r in rs if r["impl"] == "sdpa_cudnn"][0]["median_ms"]
        print(f"d{d} N1024 {'causal' if causal else 'full'}: cuDNN {cud * 1e3:.1f} us")
        for r in sorted([r for r in rs if r["predicted_ms"]], key=lambda r: r["median_ms"]):
            print(f"   {r['impl']:16} {r['median_ms'] * 1e3:7.1f} us  cuDNN/ours {cud / r['median_ms']:.3f}  predicted {r['predicted_ms'] * 1e3:7.1f}")
