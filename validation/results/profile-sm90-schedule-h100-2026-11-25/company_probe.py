"""Probe, after short_probe.py: at d = 64 and 128, N = 1024, B16, no mask, the wgmma kernel ran 1.05x to 1.08x cuDNN
in groups of its own variants and cuDNN (short.json, rotate.json) and 0.98x to 1.02x in the harness's groups
(shapes runs 5 and 6, sweep run 8), where it is timed beside the mma.sync kernel, SDPA flash and efficient
attention too.  The harness's timer (0.1 s lead-in, 3 input sets, 5 rounds), the model's picks, three repeats of:
ours with cuDNN alone; the harness's group of five.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm90-schedule-h100-2026-11-25/company_probe.py"""
import sys, time, torch
import kernels
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

peers = peer_runners(torch)
timer = CudaEventTimer()
rows, t0 = [], time.time()
for d, H in ((64, 32), (128, 16)):
    B, N = 16, 1024
    g = torch.Generator(device="cuda")
    g.manual_seed(d)
    sets = [tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
            for _ in range(3)]
    fn = {"flash_sm90": lambda q, k, v: kernels.run("flash_sm90", q, k, v),
          "flash_sm80": lambda q, k, v: kernels.run("flash_sm80", q, k, v),
          **{p: (lambda p: lambda q, k, v: peers[p][0](q, k, v, False))(p)
             for p in ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient")}}
    ref = fn["sdpa_cudnn"](*sets[0]).float()
    for name, f in fn.items():
        if (f(*sets[0]).float() - ref).abs().max().item() > 0.05:
            raise SystemExit(f"{name} d{d}: output differs from cuDNN's")
    for rep in range(3):
        for label, names in (("pair", ["flash_sm90", "sdpa_cudnn"]),
                             ("harness group", ["flash_sm80", "flash_sm90", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient"])):
            rows += probe_record.timed_rows(timer, [fn[n] for n in names], names, sets, d=d, N=N, B=B, H=H,
                                            group=label, rep=rep)
    print(f"d{d}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
probe_record.write("company.json", rows,
                   "PYTHONPATH=. python3 validation/results/profile-sm90-schedule-h100-2026-11-25/company_probe.py")
for d in (64, 128):
    for label in ("pair", "harness group"):
        for rep in range(3):
            rs = {r["impl"]: r for r in rows if (r["d"], r["group"], r["rep"]) == (d, label, rep)}
            o, c = rs["flash_sm90"], rs["sdpa_cudnn"]
            print(f"d{d} {label:14} {rep}: ours {o['median_ms']:.4f} (min {o['min_ms']:.4f})  cuDNN {c['median_ms']:.4f} "
                  f"(min {c['min_ms']:.4f})  cuDNN/ours {c['median_ms'] / o['median_ms']:.3f}")
