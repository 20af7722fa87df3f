"""Probe: where a small cache's decode time goes. The shipped decode kernel beside variants of its header cut
at run time (not kept): "no compute" drops each chunk's products and softmax (the ring's waits, barriers and
copies stay), "no merge" drops everything after the loop (the warps' merge, the partial rows, the parts'
merge), "loads only" both. Timed interleaved with cuDNN and the read floor (CUDA events, each share queued
behind a GPU sleep), B1 N_k 8192 and 32768, GQA 32:8, N_q 1, d 128, bf16. Outputs of the cut variants are
meaningless; the shipped one is checked against cuDNN. Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-decode-small-h100-2026-11-24/small_probe.py"""
import os, sys, torch
import kernels.flash_decode_sm80 as kfd
from kernels import compile
from kernels.kvcache import _plan
from validation.timing import CudaEventTimer
from validation import probe_record
from validation.decode_torch import TorchDecode
from iomodel.families.flash_decode_sm80 import DecodeConfig

HEADER = open(os.path.join(os.path.dirname(kfd.__file__), "csrc", kfd.HEADER)).read()
a = HEADER.index("        const u32 sK = sRing + ((j - c0) % STAGES)")
b = HEADER.index("mma_rb<T, MT, KW, HEAD_DIM, ROW_BYTES>(acc, pa, sK + CHUNK_BYTES, 0, xo);\n") + len(
    "mma_rb<T, MT, KW, HEAD_DIM, ROW_BYTES>(acc, pa, sK + CHUNK_BYTES, 0, xo);\n")
c = HEADER.index("    // ---- merge the warps")
e = HEADER.index("o_sb, o_sn, o_sh, sM);\n", c) + len("o_sb, o_sn, o_sh, sM);\n")
SINK = "    if (acc[0][0][0] == 12345.f && tid == 999) reinterpret_cast<unsigned short*>(o)[0] = 1;   // keep the loop\n"
VARIANTS = {
    "shipped": None,
    "no compute": HEADER[:a] + HEADER[b:],
    "no merge": HEADER[:c] + SINK + HEADER[e:],
    "loads only": HEADER[:a] + HEADER[b:c] + SINK + HEADER[e:],
}
td = TorchDecode(torch)
timer = CudaEventTimer(max_repeats=400, target_s=0.05)


def plan(x, c, text):
    main = kfd.module
    if text is not None:
        kfd.module = lambda cfg, rows, dtype, causal, paged, arch: compile.build(
            text, arch, names=kfd.kernel_names(cfg, rows, dtype, causal, paged), label=kfd.FAMILY + "-cut",
            flags=compile.MMA_SYNC_FLAGS)
        kfd._kernels.cache_clear()
    try:
        p = _plan(x.q, x.k_cache, x.v_cache, x.seqlens, None, None, None, True, None, 0, c)
    finally:
        kfd.module = main
        kfd._kernels.cache_clear()
    return lambda s: p(s.q, s.k_cache, s.v_cache, s.seqlens, None)[0]


rows = []
for Nk in (8192, 32768):
    shape = {"B": 1, "H": 32, "H_kv": 8, "N_q": 1, "N_k": Nk, "d": 128, "causal": True, "dtype": "bf16"}
    sets = td.make_inputs(shape, (), True, 5, 13)
    x = sets[0][0]
    fns, labels = [], []
    for bn, w, st, p in ((64, 4, 4, 8), (64, 4, 4, 16), (64, 4, 3, 16), (64, 4, 4, 4)):
        for name, text in VARIANTS.items():
            f = plan(x, DecodeConfig(bn, w, st, p, 128), text)
            f(x)
            fns.append(f); labels.append(f"{bn} w{w} s{st} p{p} {name}")
    for peer in ("sdpa_cudnn_decode", "read_floor_decode"):
        f = td.runner(peer); f(x); fns.append(f); labels.append(peer)
    ours = fns[0](x).float().transpose(1, 2)
    ref = td.runner("sdpa_cudnn_decode")(x).float()
    err = float((ours - ref.reshape(ours.shape)).abs().max()) if ours.numel() == ref.numel() else None
    torch.cuda.synchronize()
    res = timer.time_interleaved(fns, sets, rounds=7, queue_ahead=True)
    for lab, r in zip(labels, res):
        rows.append({"N_k": Nk, "impl": lab, "median_us": None if isinstance(r, Exception) else r.median_s * 1e6,
                     "min_us": None if isinstance(r, Exception) else r.min_s * 1e6})
    rows.append({"N_k": Nk, "check": "shipped p8 against cuDNN, max abs difference", "value": err})
    print(f"N_k {Nk} done", file=sys.stderr, flush=True)
probe_record.write("small-cache-cuts.json", rows, "PYTHONPATH=. python3 validation/results/profile-decode-small-h100-2026-11-24/small_probe.py")
for r in rows:
    print(r)
