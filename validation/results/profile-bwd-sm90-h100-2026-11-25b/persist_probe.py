"""The Hopper backward's persistent schedule (one CTA an SM fetching work items from a counter) against one
CTA a work item (`_ctas` = the items: main's schedule) and SDPA cuDNN's backward; needs
tried-persistent-dynamic.patch applied (main's backward takes no `_ctas`).
Run from the repository root: PYTHONPATH=. python3 <this file> [check] [ab] [timeline]; writes $OUT/*.json.
check: both schedules' dQ, dK, dV against a float32 reference (odd lengths, causal, GQA, N_q != N_k, the tail
split forced); ab: interleaved timing (the harness's timer) beside cuDNN; timeline: CTA timelines."""
import json, os, sys

import torch

from kernels import flash_bwd_sm90
from iomodel.families.flash_bwd_sm90 import SHIPPED
from validation import probe_record
from validation.timing import CudaEventTimer

what = sys.argv[1:] or ["check", "ab"]
bp = probe_record.load(probe_record.BWD_SM90_PROBE, "none")
CFG = {c.head_dim: c for c in SHIPPED}
ONE_EACH = {"_ctas": 1 << 30}   # as many CTAs as items: each CTA one item


def reference(q, k, v, do, causal):
    qf, kf, vf = (x.float().requires_grad_() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    ke, ve = (x.repeat_interleave(g, 1) for x in (kf, vf))
    s = qf @ ke.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        nq, nk = q.shape[2], k.shape[2]
        mask = torch.ones(nq, nk, device=q.device, dtype=torch.bool).tril(nk - nq)
        s = s.masked_fill(~mask, float("-inf"))
    o = torch.softmax(s, -1) @ ve
    dq, dk, dv = torch.autograd.grad(o, (qf, kf, vf), do.float())
    return dq, dk, dv


def check():
    import kernels
    rows = []
    for (B, H, Hk, Nq, Nk, d, causal, pieces) in ((2, 4, 4, 1000, 1000, 128, False, None), (2, 4, 2, 777, 1029, 64, True, None),
                                                  (1, 8, 8, 2048, 2048, 128, False, 4), (3, 6, 3, 300, 513, 128, True, None), (2, 4, 4, 700, 333, 64, False, None),
                                                  (1, 4, 4, 4096, 4096, 64, False, 3), (2, 2, 1, 1536, 1536, 128, True, None)):
        g = torch.Generator(device="cuda").manual_seed(B * 1000 + Nq)
        q = torch.randn(B, H, Nq, d, generator=g, device="cuda").bfloat16()
        k, v = (torch.randn(B, Hk, Nk, d, generator=g, device="cuda").bfloat16() for _ in range(2))
        do = torch.randn(B, H, Nq, d, generator=g, device="cuda").bfloat16()
        out, lse = kernels.flash_attention(q, k, v, causal=causal, return_lse=True)
        ref = reference(q, k, v, do, causal)
        kw = {} if pieces is None else {"_pieces": pieces}
        for name, extra in (("persistent", {}), ("one CTA an item", ONE_EACH)):
            got = flash_bwd_sm90.backward(do, q, k, v, out, lse, causal=causal, config=CFG[d], **kw, **extra)
            err = [float((a.float() - r).abs().max() / r.abs().max()) for a, r in zip(got, ref)]
            rows.append({"shape": [B, H, Hk, Nq, Nk, d, causal, pieces], "impl": name, "rel_err_dq_dk_dv": err})
            print(rows[-1], flush=True)
    return rows


def ab():
    timer = CudaEventTimer()
    ours = {"persistent": {}, "one CTA an item": ONE_EACH}
    rows = []
    for shape in ((4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (2, 16, 8192, 128, False),
                  (8, 16, 2048, 128, True), (4, 32, 4096, 64, False)):
        rows += bp.against_cudnn(timer, shape, (21, 22), ours, rounds=7)
    return rows


if "check" in what:
    probe_record.write("persist-check.json", check(), "persist_probe.py check")
if "ab" in what:
    probe_record.write("persist-ab.json", ab(), "persist_probe.py ab")
if "timeline" in what:
    tl = [bp.timeline(4, 16, 4096, 128, False), bp.timeline(4, 16, 4096, 128, True)]
    for r in tl:
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
    probe_record.write("persist-timelines.json", tl, "persist_probe.py timeline")
