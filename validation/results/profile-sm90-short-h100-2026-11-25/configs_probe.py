"""Probe: every shipped wgmma forward config of the head dim at the sweep's short shapes (B16 N1024, d 64
H32 and d 128 H16, causal and not) beside SDPA cuDNN, in one interleaved group a shape (the harness's timer:
5 rounds, 0.1 s lead-in, 3 input sets), with the model's prediction of each config: where the sweep, which
times only the model's pick at N = 1024, has the pick at parity with cuDNN.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm90-short-h100-2026-11-25/configs_probe.py"""
import sys, time, torch
import kernels
from iomodel import api, families
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
        ref = peers["sdpa_cudnn"][0](*sets[0], causal).float()
        fns, labels, preds = [], [], []
        for cfg in [c for c in fam.shipped if c.head_dim == d]:
            f = (lambda c: lambda q, k, v: kernels.run("flash_sm90", q, k, v, causal=causal, config=c))(cfg)
            err = (f(*sets[0]).float() - ref).abs().max().item()
            if err > 0.05:
                raise SystemExit(f"{cfg}: max abs diff {err}")
            fns.append(f); labels.append(fam.label(cfg))
            preds.append(api.predict("flash_sm90", "h100-sxm", shape, cfg).time_s * 1e3)
        fns.append(lambda q, k, v: peers["sdpa_cudnn"][0](q, k, v, causal)); labels.append("sdpa_cudnn"); preds.append(None)
        torch.cuda.synchronize()
        timed = probe_record.timed_rows(timer, fns, labels, sets, d=d, N=N, B=B, H=H, causal=causal)
        rows += [{**r, "predicted_ms": p} for r, p in zip(timed, preds)]
        print(f"d{d} causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
probe_record.write("configs.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-short-h100-2026-11-25/configs_probe.py")
for d in (64, 128):
    for causal in (False, True):
        rs = [r for r in rows if r["d"] == d and r["causal"] == causal]
        cud = [r for r in rs if r["impl"] == "sdpa_cudnn"][0]["median_ms"]
        print(f"d{d} N1024 {'causal' if causal else 'full'}: cuDNN {cud * 1e3:.1f} us")
        for r in sorted([r for r in rs if r["predicted_ms"]], key=lambda r: r["median_ms"]):
            print(f"   {r['impl']:16} {r['median_ms'] * 1e3:7.1f} us  cuDNN/ours {cud / r['median_ms']:.3f}  predicted {r['predicted_ms'] * 1e3:7.1f}")
