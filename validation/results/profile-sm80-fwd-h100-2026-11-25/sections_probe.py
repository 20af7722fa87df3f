"""Probe: the mma.sync forward's causal launch order. The kernel's sectioned grid (x = head within a section,
y = query tile longest first, z = section) with sections of 1 head (each head's tiles longest first, one
head after another: the order before), of two waves of resident blocks, of the launcher's rule
(`kernels.flash_sm80.causal_section_heads`: SECTION_WAVES = 1 wave), and of all heads; SDPA flash beside them, in
one interleaved group a shape (the harness's timer: 5 rounds, 0.1 s lead-in, 3 input sets; B N = 16384,
H d = 2048, bf16, causal; the model's picks 128x128 w4 s1 at d = 64 and 128x64 w4 s2 at d = 128).
Outputs checked against SDPA flash first.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm80-fwd-h100-2026-11-25/sections_probe.py"""
import sys, time, torch
import kernels.flash_sm80 as kfs
from kernels import driver
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record
from iomodel.families.flash_sm80 import FlashConfig

RULE = kfs.causal_section_heads
PICK = {64: FlashConfig(128, 128, 4, 1, 64), 128: FlashConfig(128, 64, 4, 2, 128)}
fa2 = peer_runners(torch)["sdpa_flash"][0]
timer = CudaEventTimer()
SMS = torch.cuda.get_device_properties(0).multi_processor_count


def launch(q, k, v, cfg, per_rule):
    kfs.causal_section_heads = per_rule
    try:
        p = kfs.plan(q, k, v, True, cfg)
    finally:
        kfs.causal_section_heads = RULE
    return p, (lambda q, k, v: p(q, k, v)[0])


rows, checks, t0 = [], [], time.time()
for d in (64, 128):
    for N in (1024, 2048, 4096, 8192, 16384):
        B, H = 16384 // N, 2048 // d
        g = torch.Generator(device="cuda"); g.manual_seed(N + d)
        sets = [tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
                for _ in range(3)]
        ref = fa2(*sets[0], True).float()
        def waves(w):
            return lambda heads, group, m, slots: min([p for p in range(1, heads + 1) if heads % p == 0],
                                                      key=lambda p: (abs(p - -(-w * slots // m)), p))
        variants = {"one head (before)": lambda heads, group, m, slots: 1,
                    "two waves": waves(2),
                    "rule (one wave)": RULE,
                    "all heads": lambda heads, group, m, slots: heads}
        fns, labels = [], []
        for name, rule in variants.items():
            p, f = launch(*sets[0], PICK[d], rule)
            checks.append({"d": d, "N": N, "variant": name, "grid": list(p.prepared.grid),
                           "max_abs_diff_vs_fa2": (f(*sets[0]).float() - ref).abs().max().item()})
            fns.append(f); labels.append(name)
        fns.append(lambda q, k, v: fa2(q, k, v, True)); labels.append("sdpa_flash")
        torch.cuda.synchronize()
        rows += probe_record.timed_rows(timer, fns, labels, sets, d=d, N=N, causal=True, B=B, H=H)
        print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
        del sets
probe_record.write("sections.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm80-fwd-h100-2026-11-25/sections_probe.py",
                   checks=checks, sms=SMS)
print("max diff vs FA2:", max(c["max_abs_diff_vs_fa2"] for c in checks))
names = list(dict.fromkeys(r["impl"] for r in rows))
print(f"{'shape':14} " + " ".join(f"{v[:16]:>17}" for v in names) + "   ms; grids: " )
for d in (64, 128):
    for N in (1024, 2048, 4096, 8192, 16384):
        m = {r["impl"]: r["median_ms"] for r in rows if (r["d"], r["N"]) == (d, N)}
        grids = [c["grid"] for c in checks if (c["d"], c["N"]) == (d, N)]
        print(f"d{d} N{N:<6}    " + " ".join(f"{m[v]:17.4f}" for v in names) +
              f"   FA2/ours(before) {m['sdpa_flash'] / m[names[0]]:.3f} FA2/ours(rule) {m['sdpa_flash'] / m[names[2]]:.3f}  {grids}")
