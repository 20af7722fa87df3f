"""Probe: the decode kernel with its block table read a window ahead of the copies (main) against the kernel
before (main at 2aae871: the block table read where each chunk's copies are issued), on
contiguous and paged caches over parts and ring depth, one interleaved group a shape; and the 32 MiB
cache's parts and rings beside cuDNN and the read floor. Outputs of the two kernels compared bit for bit
first. Run from the repository root: PYTHONPATH=. python3 validation/results/profile-paged-h100-2026-11-24/table_probe.py"""
import os, sys, time, torch
import kernels.flash_decode_sm80 as kfd
from kernels import compile
from kernels.kvcache import _plan
from validation.timing import CudaEventTimer
from validation import probe_record
from validation.decode_torch import TorchDecode
from iomodel.families.flash_decode_sm80 import DecodeConfig

HERE = os.path.dirname(os.path.abspath(__file__))
# the header to compare with: the file PROBE_BEFORE names, else the kernel before the windowed block table
# (main at 2aae871; the GPU machine gets no .git, so write it out first where it has none:
# git show 2aae871:kernels/csrc/flash_decode_sm80.cuh > validation/results/profile-paged-h100-2026-11-24/before.cuh)
if os.environ.get("PROBE_BEFORE"):
    BEFORE = open(os.path.join(HERE, os.environ["PROBE_BEFORE"])).read()
else:
    import subprocess
    BEFORE = subprocess.run(["git", "show", "2aae871:kernels/csrc/flash_decode_sm80.cuh"], capture_output=True,
                            text=True, check=True).stdout
td = TorchDecode(torch)
timer = CudaEventTimer(max_repeats=200, target_s=0.05)


def before_module(cfg, rows, dtype, causal, paged, arch):
    return compile.build(BEFORE, arch, names=kfd.kernel_names(cfg, rows, dtype, causal, paged),
                         label=kfd.FAMILY + "-before", flags=compile.MMA_SYNC_FLAGS)


def plan(x, c, page, before):
    k, v, t = x.paged[page] if page else (x.k_cache, x.v_cache, None)
    main = kfd.module
    if before:
        kfd.module = before_module
        kfd._kernels.cache_clear()
    try:
        p = _plan(x.q, k, v, x.seqlens, t, None, None, True, None, 0, c)
    finally:
        kfd.module = main
        kfd._kernels.cache_clear()

    def call(s):
        k, v, t = s.paged[page] if page else (s.k_cache, s.v_cache, None)
        return p(s.q, k, v, s.seqlens, t)[0]
    return call


def shp(B, Nk):
    return {"B": B, "H": 32, "H_kv": 8, "N_q": 1, "N_k": Nk, "d": 128, "causal": True, "dtype": "bf16"}


GROUPS = {
    "B8 N_k 32768 (1 GiB)": (shp(8, 32768), (16, 256),
                             [(64, 4, s, p) for s in (3, 4) for p in (1, 2, 4, 8)], False),
    "B1 N_k 131072 (512 MiB)": (shp(1, 131072), (16, 256),
                                [(64, 4, s, p) for s in (3, 4) for p in (8, 16, 32)], False),
    "B1 N_k 8192 (32 MiB)": (shp(1, 8192), (16, 256),
                             [(64, 4, s, p) for s in (3, 4) for p in (4, 8, 16, 32)] + [(128, 4, 2, 8), (128, 4, 2, 16)], True),
}
rows, checks = [], []
t0 = time.time()
for name, (s, pages, cfgs, peers) in GROUPS.items():
    sets = td.make_inputs(s, pages, peers, 3, 11)
    x = sets[0][0]
    fns, labels = [], []
    for bn, w, st, p in cfgs:
        c = DecodeConfig(bn, w, st, p, 128)
        for page in (None,) + pages:
            variants = [("main", False), ("before", True)] if page else [("main", False)]
            outs = {}
            for tag, before in variants:
                f = plan(x, c, page, before)
                outs[tag] = f(x)
                fns.append(f)
                labels.append(f"{bn} w{w} s{st} p{p} {'page ' + str(page) if page else 'contiguous'} {tag}")
            if len(outs) == 2:
                checks.append({"group": name, "config": f"{bn} w{w} s{st} p{p}", "page": page,
                               "bitwise_equal": bool(torch.equal(outs["main"], outs["before"]))})
    if peers:
        for peer in ("sdpa_cudnn_decode", "sdpa_flash_decode"):
            f = td.runner(peer)
            f(x)
            fns.append(f); labels.append(peer)
        f = td.runner("read_floor_decode")
        f(x); fns.append(f); labels.append("read_floor_decode")
    torch.cuda.synchronize()
    res = timer.time_interleaved(fns, sets, rounds=5, queue_ahead=True)
    for lab, r in zip(labels, res):
        rows.append({"group": name, "impl": lab,
                     "median_us": None if isinstance(r, Exception) else r.median_s * 1e6,
                     "min_us": None if isinstance(r, Exception) else r.min_s * 1e6})
    print(f"{name}: {len(fns)} rows, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    del sets, x
    torch.cuda.empty_cache()
probe_record.write("table-prefetch-ab.json", rows, "PYTHONPATH=. python3 validation/results/profile-paged-h100-2026-11-24/table_probe.py", checks=checks)
print("bitwise equal:", all(c["bitwise_equal"] for c in checks), len(checks))
for r in rows:
    m = r["median_us"]
    print(f"{r['group'][:14]:14} {r['impl']:40} {m if m is None else round(m, 1)}")
