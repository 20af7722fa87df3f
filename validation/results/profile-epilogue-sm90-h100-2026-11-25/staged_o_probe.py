"""Probe: the wgmma forward's O stored through an SMEM staging tile by TMA (the default where the tile fits,
flash_fwd_sm90.cuh kStoreO) against O stored from registers (-DSM90_NO_O_STAGE), per config, on the shapes
where per-tile costs weigh (B16 N1024 causal and not, d 128 and 64; B4 N4096 causal; B1 H16 N32768 with a
(4096, 0) window and its causal attention), beside SDPA cuDNN; every variant checked against the float32
reference first; timed interleaved (CUDA events, shares queued behind a GPU sleep, 7 rounds, 3 input sets).
Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-epilogue-sm90-h100-2026-11-25/staged_o_probe.py"""
import sys

import torch

from iomodel.families.flash_sm90 import SHIPPED
from kernels import compile, dispatch, flash_sm90
from kernels.window import Window
from validation import probe_record
from validation.peers import peer_runners
from validation.reference import attention_reference
from validation.timing import CudaEventTimer

timer = CudaEventTimer(max_repeats=200, target_s=0.1)
NO_STAGE = ("SM90_NO_O_STAGE",)
_cudnn = peer_runners(torch)["sdpa_cudnn"][0]
# (label, B, H, N, d, causal, window left or None, configs: their block_n, stages at this d)
SHAPES = [("B16 N1024 d128 causal", 16, 16, 1024, 128, True, None, [(64, 4), (64, 2), (96, 3), (128, 2), (128, 3)]),
          ("B16 N1024 d128", 16, 16, 1024, 128, False, None, [(128, 3), (128, 2), (96, 3), (160, 2)]),
          ("B16 N1024 d64 causal", 16, 32, 1024, 64, True, None, [(128, 2)]),
          ("B16 N1024 d64", 16, 32, 1024, 64, False, None, [(128, 2)]),
          ("B4 N4096 d128 causal", 4, 16, 4096, 128, True, None, [(128, 3), (160, 2), (128, 2)]),
          ("B1 N32768 d128 window 4096", 1, 16, 32768, 128, True, 4096, [(128, 3), (160, 2), (128, 2), (96, 3)]),
          ("B1 N32768 d128 causal", 1, 16, 32768, 128, True, None, [(176, 2), (160, 2)])]


def config(d, block_n, stages):
    found = [c for c in SHIPPED if c.head_dim == d and c.block_n == block_n and c.stages == stages]
    return found[0]


def ours(cfg, causal, win, defines):
    window = Window(win, 0) if win is not None else None
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=cfg, window=window, _defines=defines)


def main():
    # build every variant first, concurrently
    jobs = []
    for _, B, H, N, d, causal, win, cfgs in SHAPES:
        for bn, st in cfgs:
            for defines in ((), NO_STAGE):
                cfg = config(d, bn, st)
                jobs.append(lambda cfg=cfg, causal=causal, win=win, defines=defines: flash_sm90.module(
                    cfg, "bf16", causal, defines, local=win is not None))
    compile.precompile(jobs)
    print(f"{len(jobs)} builds done", file=sys.stderr, flush=True)
    rows = []
    for label, B, H, N, d, causal, win, cfgs in SHAPES:
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
        if win is not None:
            shape.update(window_left=win, window_right=0)
        pick = dispatch.choose(["flash_sm90"], shape, 0).config
        sets = [tuple(torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(3)]
        ref = None if win is not None else attention_reference(*sets[0], causal, d ** -0.5)[0]
        fns, labels = [], []
        for bn, st in cfgs:
            cfg = config(d, bn, st)
            for defines in ((), NO_STAGE):
                fns.append(ours(cfg, causal, win, defines))
                labels.append((cfg.name, cfg.stages_o() and not defines, cfg == pick))
        if win is None:
            fns.append(lambda q, k, v: _cudnn(q, k, v, causal))
            labels.append(("sdpa cudnn", False, False))
        base = fns[1](*sets[0]).float() if ref is None else ref   # the window: against the register-store kernel
        errs = [float((f(*sets[0]).float() - base).abs().max()) for f in fns]
        torch.cuda.synchronize()
        res = timer.time_interleaved(fns, sets, rounds=7, queue_ahead=True)
        for (name, staged, picked), r, e in zip(labels, res, errs):
            rows.append({"shape": label, "impl": name, "staged_o": staged, "model_pick": picked, "max_abs_err": e,
                         "median_ms": r.median_s * 1e3, "min_ms": r.min_s * 1e3})
        print(f"{label} done", file=sys.stderr, flush=True)
    probe_record.write("staged-o.json", rows,
                       "PYTHONPATH=. python3 validation/results/profile-epilogue-sm90-h100-2026-11-25/staged_o_probe.py",
                       error_against="the float32 reference (the window: the register-store kernel)")
    for r in rows:
        print(f"{r['shape']:28} {r['impl']:18} staged {int(r['staged_o'])} pick {int(r['model_pick'])} "
              f"{r['median_ms']:.4f} ms  err {r['max_abs_err']:.1e}")


if __name__ == "__main__":
    main()
