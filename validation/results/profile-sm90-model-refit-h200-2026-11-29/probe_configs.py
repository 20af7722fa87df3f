"""Probe: every shipped wgmma-forward config of a head dim at short, mid and long sequences, causal and not, on the
kernel as shipped (stale row max, tail split, clusters where the launcher pairs), for a refit of the model's plan
(refit_plan.py beside this).  Each shape: every config checked against cuDNN on the first of 3 fresh input sets, then
all of them and cuDNN timed in one interleaved group, each row with the model's prediction for this GPU.
Run from the repository root: PYTHONPATH=. python3 <this file> [rounds] [run]  -> $OUT/configs-run<run>.json"""
import sys
import time

import torch

from iomodel import api, families
from iomodel.families.flash_sm90 import SHIPPED
from kernels import flash_sm90
from kernels.sm90_schedule import schedule
from validation import probe_record
from validation.peers import peer_runners
from validation.timing import CudaEventTimer

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
HEADS = {64: 32, 96: 21, 128: 16, 192: 10, 256: 8}   # about 2048 channels a token, as the sweep's
#: (d, N, B, causal): N = 4096 B4 at d = 64 / 128 / 192 is in the harness sweeps (sweep-run6, shapes-run4)
SHAPES = [(64, 1024, 16, False), (64, 1024, 16, True), (64, 16384, 1, False), (64, 16384, 1, True),
          (96, 1024, 16, False), (96, 1024, 16, True), (96, 4096, 4, False), (96, 4096, 4, True),
          (96, 16384, 1, True),
          (128, 1024, 16, False), (128, 1024, 16, True), (128, 16384, 1, False), (128, 16384, 1, True),
          (192, 1024, 16, False), (192, 1024, 16, True), (192, 16384, 1, False), (192, 16384, 1, True),
          (192, 4096, 4, True), (256, 4096, 4, False), (256, 4096, 4, True)]


def model_shape(d, N, B, causal):
    return {"B": B, "H": HEADS[d], "H_kv": HEADS[d], "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}


def builds():
    """Every (config, causal, defines) the launcher will run, its defines from the launcher's own schedule."""
    props = torch.cuda.get_device_properties(0)
    out = set()
    for d, N, B, causal in SHAPES:
        s = model_shape(d, N, B, causal)
        for c in (c for c in SHIPPED if c.head_dim == d):
            sch = schedule(s, c.block_m, props.multi_processor_count, props.L2_cache_size, 2, config=c)
            out.add((c, causal, sch.defines))
    return sorted(out, key=str)


def main():
    t0 = time.time()
    probe_record.sm90_precompile(builds())
    print(f"builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    gpu = torch.cuda.get_device_name()
    cudnn, timer, rows, label = peer_runners(torch)["sdpa_cudnn"][0], CudaEventTimer(), [], families.get(
        "flash_sm90").label
    for i, (d, N, B, causal) in enumerate(SHAPES):
        shape, H = model_shape(d, N, B, causal), HEADS[d]
        configs = [c for c in SHIPPED if c.head_dim == d]
        fns = [(lambda c: lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=c))(c) for c in configs]
        sets = probe_record.random_sets(B, H, N, d, seed=7919 * i + 1000 * RUN + d)
        got = probe_record.checked_rows(timer, fns, [label(c) for c in configs], sets,
                                        ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, causal)), keep_going=True,
                                        rounds=ROUNDS, d=d, N=N, B=B, H=H, causal=causal)
        preds = {label(c): api.predict("flash_sm90", gpu, shape, c).time_s * 1e3 for c in configs}
        rows += [{**r, "predicted_ms": preds.get(r["impl"])} for r in got]
        print(f"d{d} N{N} causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
        probe_record.write(f"configs-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-"
                           f"model-refit-h200-2026-11-29/probe_configs.py {ROUNDS} {RUN}")
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "causal"), lambda r: r["impl"] == "sdpa_cudnn")))


if __name__ == "__main__":
    main()
