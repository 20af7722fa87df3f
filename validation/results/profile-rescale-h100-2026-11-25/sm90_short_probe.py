"""Probe: the wgmma forward's shipped d = 64 configs at B16 H32 N1024 (the sweep's one shape at parity with
cuDNN), each as shipped and with a stale row max (IOM_SM90_STALE_MAX: apply tried-sm90-stale-max.patch first),
beside SDPA cuDNN in one interleaved group a shape (the harness's timer: 5 rounds, 0.1 s lead-in, 3 input sets).
Outputs checked against cuDNN first.
Run from the repository root (patch applied): PYTHONPATH=. python3 validation/results/profile-rescale-h100-2026-11-25/sm90_short_probe.py"""
import sys, time, torch
import kernels.flash_sm90 as k90
from iomodel import families
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

cudnn = peer_runners(torch)["sdpa_cudnn"][0]
timer = CudaEventTimer()
fam = families.get("flash_sm90")
rows, t0 = [], time.time()
for causal in (False, True):
    B, H, N, d = 16, 32, 1024, 64
    g = torch.Generator(device="cuda"); g.manual_seed(64 + causal)
    sets = [tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
            for _ in range(3)]
    ref = cudnn(*sets[0], causal).float()
    fns, labels = [], []
    for cfg in [c for c in fam.shipped if c.head_dim == d]:
        for tag, defs in (("", ()), (" stale", ("IOM_SM90_STALE_MAX",))):
            f = (lambda c, df: lambda q, k, v: k90.attention(q, k, v, causal, config=c, _defines=df))(cfg, defs)
            err = (f(*sets[0]).float() - ref).abs().max().item()
            if err > 0.05:
                raise SystemExit(f"{cfg}{tag}: max abs diff {err}")
            fns.append(f); labels.append(fam.label(cfg) + tag)
    fns.append(lambda q, k, v: cudnn(q, k, v, causal)); labels.append("sdpa_cudnn")
    torch.cuda.synchronize()
    rows += probe_record.timed_rows(timer, fns, labels, sets, d=d, N=N, B=B, H=H, causal=causal, unit="us")
    print(f"causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
probe_record.write("sm90-short.json", rows, "PYTHONPATH=. python3 validation/results/profile-rescale-h100-2026-11-25/sm90_short_probe.py (tried-sm90-stale-max.patch applied)")
for causal in (False, True):
    rs = [r for r in rows if r["causal"] == causal]
    cud = [r for r in rs if r["impl"] == "sdpa_cudnn"][0]["median_us"]
    print(f"d64 N1024 {'causal' if causal else 'full'}: cuDNN {cud:.1f} us")
    for r in sorted([r for r in rs if r["impl"] != "sdpa_cudnn"], key=lambda r: r["median_us"]):
        print(f"   {r['impl']:22} {r['median_us']:7.1f} us  cuDNN/ours {cud / r['median_us']:.3f}")
