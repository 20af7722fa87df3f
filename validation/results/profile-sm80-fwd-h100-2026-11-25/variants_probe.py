"""Probe: two changes to the mma.sync forward, each behind a compile-time switch, against the kernel as shipped
and SDPA flash (FlashAttention-2) in one interleaved group a shape (the harness's timer: 5 rounds, 0.1 s
lead-in, 3 input sets): IOM_TREE_SOFTMAX (a row's max and sum reduced as trees, depth log2 of the values
where the chain was as long as the row's values: Nsight Compute put 40.6% of the kernel's stalls on fixed-
latency dependencies, FA2 31%), IOM_SM80_WIDE_STORES (O written in 16-byte stores after a quad transpose,
where it was written in 4-byte pairs). Outputs checked against SDPA flash first.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm80-fwd-h100-2026-11-25/variants_probe.py"""
import sys, time, torch
import kernels.flash_sm80 as kfs
from kernels import compile, codegen
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record
from iomodel.families.flash_sm80 import FlashConfig

MAIN_MODULE = kfs.module
VARIANTS = {"shipped": (), "tree": ("IOM_TREE_SOFTMAX",), "wide": ("IOM_SM80_WIDE_STORES",),
            "tree+wide": ("IOM_TREE_SOFTMAX", "IOM_SM80_WIDE_STORES")}
PICK = {64: FlashConfig(128, 128, 4, 1, 64), 128: FlashConfig(128, 64, 4, 2, 128)}
SHAPES = [(64, 1024, False), (64, 1024, True), (64, 4096, True), (64, 16384, False),
          (128, 1024, True), (128, 4096, False), (128, 16384, False), (128, 16384, True)]
fa2 = peer_runners(torch)["sdpa_flash"][0]
timer = CudaEventTimer()


def launch(q, k, v, causal, cfg, defines):
    def module(cfg, dtype, causal, arch, varlen=False, local=False, mods=0):
        return compile.build(f'#include "{kfs.HEADER}"\n', arch,
                             names=(codegen.flash_sm80_kernel(cfg, dtype, causal, varlen, local, mods),),
                             defines=defines, label=kfs.FAMILY + "-probe", flags=compile.MMA_SYNC_FLAGS)
    kfs.module = module
    kfs.kernel.cache_clear()
    try:
        p = kfs.plan(q, k, v, causal, cfg)
    finally:
        kfs.module = MAIN_MODULE
        kfs.kernel.cache_clear()
    return lambda q, k, v: p(q, k, v)[0]


rows, checks, t0 = [], [], time.time()
for d, N, causal in SHAPES:
    B, H = 16384 // N, 2048 // d
    g = torch.Generator(device="cuda"); g.manual_seed(N + d + causal)
    sets = [tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
            for _ in range(3)]
    ref = fa2(*sets[0], causal).float()
    fns, labels = [], []
    for name, defs in VARIANTS.items():
        f = launch(*sets[0], causal, PICK[d], defs)
        checks.append({"shape": [d, N, causal], "variant": name,
                       "max_abs_diff_vs_fa2": (f(*sets[0]).float() - ref).abs().max().item()})
        fns.append(f); labels.append(name)
    fns.append(lambda q, k, v, c=causal: fa2(q, k, v, c)); labels.append("sdpa_flash")
    torch.cuda.synchronize()
    rows += probe_record.timed_rows(timer, fns, labels, sets, d=d, N=N, causal=causal, B=B, H=H)
    print(f"d{d} N{N} {'causal' if causal else ''}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    del sets
probe_record.write("variants.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm80-fwd-h100-2026-11-25/variants_probe.py",
                   checks=checks)
print("max diff vs FA2:", max(c["max_abs_diff_vs_fa2"] for c in checks))
print(f"{'shape':22} " + " ".join(f"{v:>10}" for v in VARIANTS) + "   (FA2 time / variant time)")
for d, N, causal in SHAPES:
    m = {r["impl"]: r["median_ms"] for r in rows if (r["d"], r["N"], r["causal"]) == (d, N, causal)}
    print(f"d{d} N{N} {'causal' if causal else 'full':6}      " + " ".join(f"{m['sdpa_flash'] / m[v]:10.3f}" for v in VARIANTS))
