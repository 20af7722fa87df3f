"""Hopper backward probe: variants of the consumers' tile as compile-time switches of
kernels/csrc/flash_bwd_sm90.cuh (``_defines``), against each other and SDPA cuDNN's backward, interleaved
(the harness's timer, its 0.1 s lead-in a share), every variant checked against a float32 reference first;
with `trace`, IOM_BWD90_TRACE's cycles a tile and a phase.  RUN= names the set (README.md in this folder):
each ran on the kernel of its moment, whose switches (IOM_BWD90_DQ_FIRST, IOM_BWD90_LSE_EARLY,
IOM_BWD90_D_EARLY, IOM_BWD90_EARLY_NEXT, IOM_BWD90_DQ2) became main's code or were dropped; on main only
RUN=final (RUN=poly with tried-poly-exp.patch applied, RUN=fused with tried-fused-convert.patch) builds what
it names (RUN=h2 with ../profile-bwd-sm90-h100-2026-11-25b/tried-ex2-h2.patch).
Run from the repository root: RUN=final PYTHONPATH=. python3 validation/results/profile-bwd-sm90-h100-2026-11-25/order_probe.py trace"""
import json, os, sys, time

import torch
import torch.nn.functional as F

import kernels
from kernels import flash_bwd_sm90
from iomodel.families.flash_bwd_sm90 import SHIPPED
from validation import probe_record
from validation.timing import CudaEventTimer

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
CFG = {c.head_dim: c for c in SHIPPED}
# run 1 (order-ab.json, order-trace.json): "base" is the kernel of 13754e3, where dK's product went
# before the barrier and dQ's after it; IOM_BWD90_DQ_FIRST was the switch of the order now main's, and
# IOM_BWD90_POLY_EVERY that of tried-poly-exp.patch.  Run 2 (loads-ab.json, loads-trace.json): "base" is
# main with that order; IOM_BWD90_LSE_EARLY loads the tile's LSE columns to registers before the S^T and
# dP^T products are issued, IOM_BWD90_D_EARLY its D columns too (d = 128: at d = 64 the registers spill).
# Run 3 (poly-ab.json, poly-trace.json): "base" is main with the LSE loaded early; IOM_BWD90_POLY_EVERY=k of
# tried-poly-exp.patch again, now that the exponentials' phase no longer waits on the LSE loads.
# Run 4 (early-ab.json, early-trace.json): IOM_BWD90_EARLY_NEXT waits for the next tile's slots and loads its
# LSE columns while dK's product runs (the trace's points 13 and 14 split the tile's end).
# Run 5 (dq2-ab.json, dq2-trace.json): IOM_BWD90_DQ2, two dQ staging slots at d = 128 (point 15: after
# the consumer's wait for a free slot).  RUN=final: main's kernel alone (its trace: final-trace.json).
RUN = os.environ.get("RUN", "loads")
if RUN == "order":
    VARIANTS = {
        "base": (),
        "dq_first": ("IOM_BWD90_DQ_FIRST",),
        "dq_first+poly2": ("IOM_BWD90_DQ_FIRST", "IOM_BWD90_POLY_EVERY=2"),
        "dq_first+poly3": ("IOM_BWD90_DQ_FIRST", "IOM_BWD90_POLY_EVERY=3"),
    }
elif RUN == "fused":
    VARIANTS = {"base": (), "conv_idle": ("IOM_BWD90_CONV_IDLE",), "no_count": ("IOM_BWD90_NO_COUNT",)}
elif RUN == "final":
    VARIANTS = {"base": ()}
elif RUN == "h2":   # two exponentials a MUFU op (../profile-bwd-sm90-h100-2026-11-25b/tried-ex2-h2.patch)
    VARIANTS = {"base": (), "h2exp": ("IOM_BWD90_EX2_H2",)}
elif RUN == "dq2":
    VARIANTS = {"base": (), "dq2": ("IOM_BWD90_DQ2",)}
    # the kernel's SMEM with two dQ staging slots (d = 128: one more block_m x d fp32 tile, four mbarriers);
    # every variant is given it (one CTA an SM either way)
    from iomodel.families.flash_bwd_sm90 import FlashBwdSm90Config
    _smem = FlashBwdSm90Config.smem_bytes
    FlashBwdSm90Config.smem_bytes = lambda self, e=2: _smem(self, e) + (
        self.block_m * self.head_dim * 4 + 8 * 2 * self.consumers if self.block_m <= 64 else 0)
elif RUN == "early":
    VARIANTS = {"base": (), "early_next": ("IOM_BWD90_EARLY_NEXT",)}
elif RUN == "poly":
    VARIANTS = {"base": (), "poly2": ("IOM_BWD90_POLY_EVERY=2",), "poly4": ("IOM_BWD90_POLY_EVERY=4",)}
else:
    VARIANTS = {"base": (), "lse_early": ("IOM_BWD90_LSE_EARLY",),
                "lse_early+d_early": ("IOM_BWD90_LSE_EARLY", "IOM_BWD90_D_EARLY")}
ONLY_D = {"lse_early+d_early": 128}
MODES = [a for a in sys.argv[1:] if a in ("trace", "ab")] or ["ab"]
PICK = [a for a in sys.argv[1:] if a in VARIANTS]
if PICK:
    VARIANTS = {k: v for k, v in VARIANTS.items() if k in PICK or k == "base"}
ROUNDS = int(os.environ.get("ROUNDS", "7"))


# the inputs of a shape (ours and cuDNN's autograd graph) and its FLOPs: the probe of 2026-11-24's
_bwd_probe = probe_record.load(probe_record.BWD_SM90_PROBE, "none")
make, flops = _bwd_probe.make, _bwd_probe.flops


def variants(d):
    return {k: v for k, v in VARIANTS.items() if ONLY_D.get(k, d) == d}


def check(d, causal):
    """Each variant's dq, dk, dv against float32 autograd (odd N, a key tail), as max |err| / max |ref|."""
    B, H, N = 2, 3, 1000
    g = torch.Generator(device="cuda").manual_seed(5)
    q, k, v, do = (torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(4))
    out, lse = kernels.flash_attention(q, k, v, causal=causal, return_lse=True)
    ref = [x.float().requires_grad_() for x in (q, k, v)]
    o32 = F.scaled_dot_product_attention(*ref, is_causal=causal)
    r = torch.autograd.grad(o32, ref, do.float())
    errs = {}
    for name, defs in variants(d).items():
        got = flash_bwd_sm90.backward(do, q, k, v, out, lse, causal=causal, config=CFG[d], _defines=defs)
        errs[name] = [float((a.float() - b).abs().max() / b.abs().max()) for a, b in zip(got, r)]
    return errs


def ab(timer, shape, seeds=(31, 32)):
    B, H, N, d, causal = shape
    sets = [make(B, H, N, d, causal, s) for s in seeds]
    fns = [lambda q, k, v, out, lse, do, qg, kg, vg, oc, defs=defs: flash_bwd_sm90.backward(
        do, q, k, v, out, lse, causal=causal, config=CFG[d], _defines=defs) for defs in variants(d).values()]
    fns.append(lambda q, k, v, out, lse, do, qg, kg, vg, oc: torch.autograd.grad(oc, (qg, kg, vg), do,
                                                                                 retain_graph=True))
    names = [*variants(d), "cudnn"]
    res = timer.time_interleaved(fns, sets, rounds=ROUNDS)
    f = flops(*shape)
    cud = res[-1].median_s
    base = res[0].median_s
    rows = [{"shape": list(shape), "impl": n, "ms": o.median_s * 1e3, "tflops": f / o.median_s / 1e12,
             "vs_cudnn": cud / o.median_s, "vs_base": base / o.median_s} for n, o in zip(names, res)]
    print(f"B{B} H{H} N{N} d{d} {'causal' if causal else 'full'}: " +
          "  ".join(f"{r['impl']} {r['tflops']:.0f} ({r['vs_cudnn']:.3f})" for r in rows), flush=True)
    return rows


def trace(shape):
    """IOM_BWD90_TRACE: clock64 at the kernel's 13 points of CTA 0's first 32 query tiles, each consumer
    warpgroup; per variant the median cycles a tile (tiles 4 to 31) and of each phase (point to point)."""
    B, H, N, d, causal = shape
    q, k, v, out, lse, do = make(B, H, N, d, causal, 7)[:6]
    res = {}
    for name, defs in variants(d).items():
        buf = torch.zeros(2 * 32 * 16, dtype=torch.int64, device="cuda")
        for _ in range(3):
            buf.zero_()
            flash_bwd_sm90.backward(do, q, k, v, out, lse, causal=causal, config=CFG[d], _trace=buf,
                                    _defines=(*defs, "IOM_BWD90_TRACE"))
        torch.cuda.synchronize()
        t = buf.view(2, 32, 16).cpu().numpy()
        tile = [float(x) for x in sorted((t[w, i + 1, 0] - t[w, i, 0]) for w in range(2) for i in range(4, 31))]
        phases = [float(sorted(t[w, i, p + 1] - t[w, i, p] for w in range(2) for i in range(4, 31))[27])
                  for p in range(12)]
        med = lambda a, b: float(sorted(t[w, i, b] - t[w, i, a] for w in range(2) for i in range(4, 31))[27])
        res[name] = {"tile_cycles_median": tile[len(tile) // 2], "phase_cycles_median": phases}
        if RUN not in ("order", "loads", "poly"):   # points 13 and 14: after the dQ slice's staging, before wait<0>
            res[name]["stage_dq"], res[name]["before_wait_dk"], res[name]["wait_dk"] = med(11, 13), med(13, 14), med(14, 12)
        if RUN not in ("order", "loads", "poly", "early"):   # point 15: after the wait for the dQ slot
            res[name]["wait_dq_slot"], res[name]["store_dq"] = med(11, 15), med(15, 13)
        if RUN in ("final", "h2"):   # main's kernel: no point 14
            res[name]["wait_dk"] = med(13, 12)
            del res[name]["before_wait_dk"]
        print(shape, name, res[name], flush=True)
    return {"shape": list(shape), **res}


meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
        "cudnn": torch.backends.cudnn.version(), "variants": {k: list(v) for k, v in VARIANTS.items()},
        "rounds": ROUNDS, "run": RUN, "script": "order_probe.py"}
if "trace" in MODES:
    tr = [trace(s) for s in ((4, 16, 4096, 128, False), (4, 32, 4096, 64, False), (4, 16, 4096, 128, True))]
    json.dump({**meta, "traces": tr}, open(f"{OUT}/{RUN}-trace.json", "w"), indent=1)
    if "ab" not in MODES:
        sys.exit(0)
checks = {f"d{d} {'causal' if c else 'full'}": check(d, c) for d in (64, 128) for c in (False, True)}
print(json.dumps(checks), flush=True)
timer = CudaEventTimer()
shapes = [(4, 16, 4096, 128, False), (1, 16, 16384, 128, False), (4, 16, 4096, 128, True),
          (2, 16, 8192, 128, False), (4, 32, 4096, 64, False), (1, 32, 16384, 64, False), (4, 32, 4096, 64, True)]
rows = [r for s in shapes for r in ab(timer, s)]
json.dump({**meta, "checks": checks, "rows": rows}, open(f"{OUT}/{RUN}-ab.json", "w"), indent=1)
print()
for s in shapes:
    rs = [r for r in rows if r["shape"] == list(s)]
    print(f"{str(s):28}" + "  ".join(f"{r['impl']} {r['tflops']:.0f} {r['vs_cudnn']:.3f} {r['vs_base']:.3f}" for r in rs))
