"""Probe: the wgmma forward on small batches of short sequences (B16 x N1024, H d = 2048, bf16): every
shipped config of the head dim, and for the causal shapes the scheduling knobs (heads a causal section,
the static schedule), beside SDPA cuDNN, timed interleaved (CUDA events, calls back to back without the
queue-ahead sleep, 7 rounds, 3 input sets), each checked against cuDNN first. Run (before the sections
change: its "pick" rows then took the L2 rule's sections) from the repository root:
PYTHONPATH=. python3 validation/results/profile-small-batch-h100-2026-11-24/small_batch_probe.py"""
import sys, torch
from kernels import dispatch, flash_sm90
from iomodel.families.flash_sm90 import SHIPPED
from validation.peers import peer_runners
from validation.timing import CudaEventTimer
from validation import probe_record

timer = CudaEventTimer(max_repeats=200, target_s=0.1)
torch.manual_seed(1)


def ours(cfg, causal, defines=None, sections=None):
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=cfg, _defines=defines, _sections=sections)


_cudnn = peer_runners(torch)["sdpa_cudnn"][0]


def cudnn(causal):
    return lambda q, k, v: _cudnn(q, k, v, causal)


rows = []
for d in (64, 128):
    for causal in (False, True):
        B, N, H = 16, 1024, 2048 // d
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
        pick = dispatch.choose(["flash_sm90"], shape, 0).config
        sets = [tuple(torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(3)]
        ref = cudnn(causal)(*sets[0]).float()
        fns, labels = [], []
        for cfg in [c for c in SHIPPED if c.head_dim == d]:
            fns.append(ours(cfg, causal)); labels.append(f"{cfg.name}{' (pick)' if cfg == pick else ''}")
        if causal:
            for sec in (B * H, 8, 16, 80, 128):
                fns.append(ours(pick, causal, sections=sec)); labels.append(f"{pick.name} sections {sec}")
            fns.append(ours(pick, causal, defines=("SM90_STATIC_SCHEDULE",))); labels.append(f"{pick.name} static")
        fns.append(cudnn(causal)); labels.append("sdpa cudnn")
        errs = []
        for f in fns:
            o = f(*sets[0]).float()
            errs.append(float((o - ref).abs().max()))
        torch.cuda.synchronize()
        res = timer.time_interleaved(fns, sets, rounds=7)
        for lab, r, e in zip(labels, res, errs):
            rows.append({"d": d, "causal": causal, "shape": [B, H, N], "impl": lab, "max_abs_diff_vs_cudnn": e,
                         "median_ms": None if isinstance(r, Exception) else r.median_s * 1e3,
                         "min_ms": None if isinstance(r, Exception) else r.min_s * 1e3})
        print(f"d {d} causal {causal} done", file=sys.stderr, flush=True)
probe_record.write("small-batch.json", rows, "PYTHONPATH=. python3 validation/results/profile-small-batch-h100-2026-11-24/small_batch_probe.py")
for r in rows:
    print(f"d{r['d']} {'causal' if r['causal'] else 'full  '} {r['impl']:34} {r['median_ms']:.4f} ms  err {r['max_abs_diff_vs_cudnn']:.2e}")
