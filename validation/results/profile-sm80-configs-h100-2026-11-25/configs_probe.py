"""Probe: every shipped mma.sync forward config of the head dim (stale-max softmax, 2026-11-25) at the non-causal
named shapes where the model's pick ran under FlashAttention-2 in the harness (d = 256 N = 8192 B2 H8: 0.967x
and 0.968x, d = 64 N = 32768 B1 H32: 0.980x and 0.993x, d = 64 N = 1024 B16 H32: 0.990x in one of two runs;
`h100-sxm-2026-11-25-shapes-run3.json`, `-run4.json`), SDPA flash beside them, in one interleaved group a shape
(the harness's timer: 5 rounds, 0.1 s lead-in, 3 input sets), with the model's prediction of each config.
Outputs checked against SDPA flash first.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm80-configs-h100-2026-11-25/configs_probe.py"""
import sys, time, torch
import kernels.flash_sm80 as kfs
from kernels import compile, driver
from iomodel import families
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

fa2 = peer_runners(torch)["sdpa_flash"][0]
timer = CudaEventTimer()
fam = families.get("flash_sm80")
SHAPES = [(256, 8192, 2, 8), (64, 32768, 1, 32), (64, 1024, 16, 32)]   # d, N, B, H; not causal
arch = compile.nvrtc_arch(driver.capability(0))
compile.precompile([(lambda c: lambda: kfs.module(c, "bf16", False, arch))(c)
                    for c in fam.shipped if c.head_dim in {s[0] for s in SHAPES}])
rows, t0 = [], time.time()
for d, N, B, H in SHAPES:
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": False, "dtype": "bf16"}
    g = torch.Generator(device="cuda"); g.manual_seed(d + N)
    sets = [tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
            for _ in range(3)]
    rows += probe_record.config_rows(timer, "flash_sm80", [c for c in fam.shipped if c.head_dim == d], shape, sets,
                                     ("sdpa_flash", lambda q, k, v: fa2(q, k, v, False)), d=d, N=N, B=B, H=H,
                                     causal=False)
    print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    del sets
probe_record.write("configs.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm80-configs-h100-2026-11-25/configs_probe.py")
for d, N, B, H in SHAPES:
    rs = [r for r in rows if r["d"] == d and r["N"] == N]
    fa = [r for r in rs if r["impl"] == "sdpa_flash"][0]["median_ms"]
    print(f"d{d} N{N} B{B} H{H}: FA2 {fa:.3f} ms")
    for r in sorted([r for r in rs if r["predicted_ms"]], key=lambda r: r["median_ms"]):
        print(f"   {r['impl']:16} {r['median_ms']:8.3f} ms  FA2/ours {fa / r['median_ms']:.3f}  predicted {r['predicted_ms']:8.3f}")
