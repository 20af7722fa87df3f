"""Hopper backward probe: (1) CTA timelines (IOM_BWD90_CTA_TIMES): launch gaps, prologue, epilogue and the
last wave's idle SMs; (2) the causal launch order's sections against SDPA cuDNN's backward, interleaved;
(3) `timeline-persistent`, `persistent`: the persistent grid of tried-persistent.patch against one CTA a
unit (those two need the patch applied: main's backward takes no `_persistent`); (4) `tail`: the tail split
(the last wave's units in pieces) against whole units and cuDNN, interleaved, and its CTA timelines.
Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-bwd-sm90-h100-2026-11-24/bwd_probe.py [timeline] [sections] [tail]."""
import json, os, sys, time

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import kernels
from kernels import flash_bwd_sm90
from iomodel.families.flash_bwd_sm90 import SHIPPED
from validation.timing import CudaEventTimer

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
CFG = {c.head_dim: c for c in SHIPPED}
what = sys.argv[1:] or ["timeline", "sections"]


def make(B, H, N, d, causal, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, do = (torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(4))
    out, lse = kernels.flash_attention(q, k, v, causal=causal, return_lse=True)
    qg, kg, vg = (x.detach().clone().requires_grad_() for x in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        oc = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
    return (q, k, v, out, lse, do, qg, kg, vg, oc)


def flops(B, H, N, d, causal):
    return 2.5 * 4 * B * H * N * N * d / (2 if causal else 1)


def timeline(B, H, N, d, causal, sec=None, persistent=None, pieces=None):
    q, k, v, out, lse, do = make(B, H, N, d, causal, 7)[:6]
    cfg = CFG[d]
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    nblk = flash_bwd_sm90.grid_size(shape, cfg, sms, -(-N // cfg.block_m) * cfg.block_m, pieces)
    buf = torch.zeros(nblk * 16, dtype=torch.int32, device="cuda")
    kw = dict(causal=causal, config=cfg, _trace=buf, _defines=("IOM_BWD90_CTA_TIMES",), _sections=sec)
    if pieces is not None:
        kw["_pieces"] = pieces
    if persistent is not None:   # (tried-persistent.patch only)
        kw["_persistent"] = persistent
    for _ in range(3):
        flash_bwd_sm90.backward(do, q, k, v, out, lse, **kw)
    torch.cuda.synchronize()
    r = buf.view(torch.int64).view(nblk, 8).cpu().numpy().astype(np.int64)
    sm, t1, t2, t3, t4, t5 = (r[:, i] for i in range(6))
    t1 = np.where(t1 > 0, t1, t2)       # the persistent kernel records a unit from its K/V's arrival
    end = np.maximum(t4, t5)
    t0, tend = t1.min(), end.max()
    span = tend - t0
    res = {"shape": [B, H, N, d, causal], "sec": sec, "persistent": persistent, "pieces": pieces, "ctas": int(nblk),
           "span_us": span / 1e3,
           "timer_quantum_ns": int(np.min(np.diff(np.unique(np.concatenate([t1, t2, t3, t4]))))),
           "prologue_us_median": float(np.median(t2 - t1)) / 1e3, "loop_us_median": float(np.median(t3 - t2)) / 1e3,
           "epilogue_us_median": float(np.median(t4 - t3)) / 1e3,
           "writer_after_consumers_us_median": float(np.median(t5 - t4)) / 1e3}
    sms = np.unique(sm)
    gaps, tails, busy, pro, epi = [], [], 0, 0, 0
    for s in sms:
        idx = np.where(sm == s)[0]
        idx = idx[np.argsort(t1[idx])]
        gaps += list(t1[idx[1:]] - end[idx[:-1]])
        tails.append(tend - end[idx[-1]])
        busy += int((t3[idx] - t2[idx]).sum())
        pro += int((t2[idx] - t1[idx]).sum())
        epi += int((end[idx] - t3[idx]).sum())
    total = span * len(sms)
    res.update({"sms": int(len(sms)), "gap_us_median": float(np.median(gaps)) / 1e3 if gaps else 0.0,
                "share_loop": busy / total, "share_prologue": pro / total, "share_epilogue": epi / total,
                "share_gaps": float(np.sum(gaps)) / total, "share_tail_idle": float(np.sum(tails)) / total,
                "first_start_spread_us": float(np.sort(t1)[len(sms) - 1] - t0) / 1e3})
    return res


def against_cudnn(timer, shape, seeds, ours, rounds=5):
    """Time our backward's variants (name -> keyword arguments of flash_bwd_sm90.backward) and SDPA cuDNN's
    backward on the same inputs, interleaved; one row each, with its ratio to cuDNN."""
    B, H, N, d, causal = shape
    sets = [make(B, H, N, d, causal, s) for s in seeds]
    cfg = CFG[d]
    fns = [lambda q, k, v, out, lse, do, qg, kg, vg, oc, kw=kw: flash_bwd_sm90.backward(
        do, q, k, v, out, lse, causal=causal, config=cfg, **kw) for kw in ours.values()]
    fns.append(lambda q, k, v, out, lse, do, qg, kg, vg, oc: torch.autograd.grad(oc, (qg, kg, vg), do,
                                                                                 retain_graph=True))
    names = [*ours, "cudnn"]
    res = timer.time_interleaved(fns, sets, rounds=rounds)
    f = flops(B, H, N, d, causal)
    cud = getattr(res[-1], "median_s", float("nan"))
    rows = []
    for name, o in zip(names, res):
        if isinstance(o, Exception):
            rows.append({"shape": list(shape), "impl": name, "error": repr(o)[:300], "tflops": float("nan"),
                         "vs_cudnn": float("nan")})
        else:
            rows.append({"shape": list(shape), "impl": name, "ms": o.median_s * 1e3,
                         "tflops": f / o.median_s / 1e12, "vs_cudnn": cud / o.median_s})
    print(f"B{B} H{H} N{N} d{d} {'causal' if causal else 'full'}: " +
          "  ".join(f"{r['impl']} {r['tflops']:.0f} ({r['vs_cudnn']:.3f})" for r in rows), flush=True)
    return rows


def persistent_ab(shapes, rounds=5):
    """Ours on the persistent grid and on one CTA a unit, beside cuDNN (tried-persistent.patch only)."""
    timer = CudaEventTimer()
    ours = {"persistent": {"_persistent": True}, "one CTA a unit": {"_persistent": False}}
    return [r for shape in shapes for r in against_cudnn(timer, shape, (21, 22), ours, rounds)]


def sections_ab(shapes, rounds=5):
    timer = CudaEventTimer()
    return [r for (*shape, secs) in shapes
            for r in against_cudnn(timer, tuple(shape), (11, 12), {f"ours sec={s}": {"_sections": s} for s in secs},
                                   rounds)]


meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"), "cudnn": torch.backends.cudnn.version()}
if "timeline" in what:
    tl = []
    for shp in ((4, 16, 4096, 128, False, None), (8, 16, 2048, 128, True, None),
                (4, 16, 4096, 128, True, 1), (4, 16, 4096, 128, True, None),
                (4, 16, 4096, 128, True, 64), (1, 16, 16384, 128, False, None), (1, 16, 16384, 128, True, None),
                (2, 16, 8192, 128, True, 1), (2, 16, 8192, 128, True, None), (4, 32, 4096, 64, True, None)):
        r = timeline(*shp)
        tl.append(r)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
    json.dump({**meta, "rows": tl}, open(f"{OUT}/cta-timelines.json", "w"), indent=1)
if "timeline-persistent" in what:
    tl = []
    for shp in ((4, 16, 4096, 128, False), (8, 16, 2048, 128, True), (4, 16, 4096, 128, True),
                (1, 16, 16384, 128, False), (2, 16, 8192, 128, True), (4, 32, 4096, 64, True)):
        for p in (True, False):
            r = timeline(*shp, persistent=p)
            tl.append(r)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
    json.dump({**meta, "rows": tl}, open(f"{OUT}/cta-timelines-persistent.json", "w"), indent=1)
if "persistent" in what:
    shapes = [(8, 16, 2048, 128, False), (8, 16, 2048, 128, True), (4, 16, 4096, 128, False),
              (4, 16, 4096, 128, True), (2, 16, 8192, 128, False), (2, 16, 8192, 128, True),
              (1, 16, 16384, 128, False), (1, 16, 16384, 128, True), (16, 16, 1024, 128, True),
              (4, 32, 4096, 64, False), (4, 32, 4096, 64, True), (1, 32, 16384, 64, True)]
    rows = persistent_ab(shapes)
    json.dump({**meta, "rows": rows}, open(f"{OUT}/persistent-ab.json", "w"), indent=1)
if "sections" in what:
    shapes = [(8, 16, 2048, 128, True, (1, 2, 4, 8, 128)), (4, 16, 4096, 128, True, (1, 2, 4, 8, 64)),
              (2, 16, 8192, 128, True, (1, 2, 4, 32)), (1, 16, 16384, 128, True, (1, 2, 16)),
              (4, 32, 4096, 64, True, (1, 2, 4, 8, 128)), (1, 32, 16384, 64, True, (1, 2, 32)),
              (4, 16, 4096, 128, False, (1,)), (1, 16, 16384, 128, False, (1,))]
    rows = sections_ab(shapes)
    json.dump({**meta, "rows": rows}, open(f"{OUT}/sections-ab.json", "w"), indent=1)
if "tail" in what:
    # the tail split (span_of, combine_pieces): the model's pieces against one CTA a whole unit, cuDNN beside
    timer = CudaEventTimer()
    ours = {"tail split": {}, "no split": {"_pieces": 1}, "det, tail split": {"deterministic": True},
            "det, no split": {"deterministic": True, "_pieces": 1}}
    shapes = [(8, 16, 2048, 128, False), (4, 16, 4096, 128, False), (2, 16, 8192, 128, False),
              (1, 16, 16384, 128, False), (4, 32, 4096, 64, False), (1, 32, 16384, 64, False),
              (4, 16, 4096, 128, True)]
    rows = [r for shape in shapes for r in against_cudnn(timer, shape, (31, 32), ours, rounds=7)]
    tl = []
    for shp in ((4, 16, 4096, 128, False), (1, 16, 16384, 128, False), (4, 32, 4096, 64, False)):
        for p in (None, 1):
            r = timeline(*shp, pieces=p)
            tl.append(r)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
    json.dump({**meta, "rows": rows, "timelines": tl}, open(f"{OUT}/tail-split-ab.json", "w"), indent=1)
