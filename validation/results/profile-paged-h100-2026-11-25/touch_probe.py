"""Probe: touching the next page's first row (K and V) as a paged stream enters a page, so its address
translation runs ahead of the ring's copies: prefetch.global.L2 (mode 1), a load through L2 whose value is
never used (mode 2), prefetch.global.L1 (mode 3), one or two pages ahead; against the kernel without (mode 0)
and the contiguous cache, pages of 256 (and 64: one page per chunk-run of the ring too). The modes are the
IOM_DECODE_TOUCH switch of tried-touch-ahead.patch (not on main: `git apply` it first). One interleaved group a shape, 5 rounds, 3 sets.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-paged-h100-2026-11-25/touch_probe.py"""
import sys, time, torch
import kernels.flash_decode_sm80 as kfd
from kernels import compile
from kernels.kvcache import _plan
from validation.timing import CudaEventTimer
from validation import probe_record
from validation.decode_torch import TorchDecode
from iomodel.families.flash_decode_sm80 import DecodeConfig

td = TorchDecode(torch)
timer = CudaEventTimer(max_repeats=200, target_s=0.05)
MAIN_MODULE = kfd.module
MODES = [(0, 1), (1, 1), (2, 1), (3, 1), (1, 2), (2, 2)]


def plan(x, c, page, mode):
    k, v, t = x.paged[page] if page else (x.k_cache, x.v_cache, None)
    defines = (f"IOM_DECODE_TOUCH={mode[0]}", f"IOM_DECODE_TOUCH_AHEAD={mode[1]}")

    def module(cfg, rows, dtype, causal, paged, arch):
        return compile.build(f'#include "{kfd.HEADER}"\n', arch, names=kfd.kernel_names(cfg, rows, dtype, causal, paged),
                             defines=defines, label=kfd.FAMILY + "-touch", flags=compile.MMA_SYNC_FLAGS)
    kfd.module = module
    kfd._kernels.cache_clear()
    try:
        p = _plan(x.q, k, v, x.seqlens, t, None, None, True, None, 0, c)
    finally:
        kfd.module = MAIN_MODULE
        kfd._kernels.cache_clear()

    def call(s):
        k, v, t = s.paged[page] if page else (s.k_cache, s.v_cache, None)
        return p(s.q, k, v, s.seqlens, t)[0]
    return call


def shp(B, Nk):
    return {"B": B, "H": 32, "H_kv": 8, "N_q": 1, "N_k": Nk, "d": 128, "causal": True, "dtype": "bf16"}


GROUPS = {
    "B8 N_k 32768 (1 GiB)": (shp(8, 32768), [(64, 4, 4, 1), (64, 4, 4, 2)]),
    "B8 N_k 8192 (256 MiB)": (shp(8, 8192), [(64, 4, 4, 1), (64, 4, 4, 2)]),
    "B1 N_k 131072 (512 MiB)": (shp(1, 131072), [(64, 4, 4, 8), (64, 4, 4, 16)]),
}
PAGES = (64, 256)
rows, checks = [], []
t0 = time.time()
for name, (s, cfgs) in GROUPS.items():
    sets = td.make_inputs(s, PAGES, False, 3, 23)
    x = sets[0][0]
    fns, labels = [], []
    for bn, w, st, p in cfgs:
        c = DecodeConfig(bn, w, st, p, 128)
        f = plan(x, c, None, (0, 1))
        ref = f(x)
        fns.append(f); labels.append(f"{bn} w{w} s{st} p{p} contiguous")
        for page in PAGES:
            for mode in MODES:
                f = plan(x, c, page, mode)
                checks.append({"group": name, "config": f"{bn} w{w} s{st} p{p}", "page": page, "mode": mode,
                               "bitwise_equal_contiguous": bool(torch.equal(f(x), ref))})
                fns.append(f); labels.append(f"{bn} w{w} s{st} p{p} page {page} touch {mode[0]} ahead {mode[1]}")
    f = td.runner("read_floor_decode")
    f(x); fns.append(f); labels.append("read_floor_decode")
    torch.cuda.synchronize()
    rows += probe_record.timed_rows(timer, fns, labels, sets, queue_ahead=True, unit="us", group=name)
    print(f"{name}: {len(fns)} rows, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    del sets, x
    torch.cuda.empty_cache()
probe_record.write("touch-ahead.json", rows, "PYTHONPATH=. python3 validation/results/profile-paged-h100-2026-11-25/touch_probe.py",
                   checks=checks)
print("bitwise equal to the contiguous cache:", all(c["bitwise_equal_contiguous"] for c in checks), len(checks))
for g in GROUPS:
    base = {r["impl"]: r["median_us"] for r in rows if r["group"] == g}
    print(g, f"floor {base['read_floor_decode']:.1f}")
    for k, v in base.items():
        if "contiguous" in k:
            cfg = k.replace(" contiguous", ""); print(f"  {k:44} {v:7.1f}")
        elif "floor" not in k:
            print(f"  {k:44} {v:7.1f} ({v / base[cfg + ' contiguous'] - 1:+.1%})")
