"""Probe: with the stale max shipped (no mask), the model moved its d = 96 pick at N >= 8192 from 192x112 c3 s3 to
128x192 c2 s2.  Every shipped config of the head dims here, as the launcher runs it (its default schedule: clusters
where it pairs), checked against cuDNN on the first of 3 fresh input sets, then timed beside it in one interleaved
group a shape, each row with the model's prediction for this GPU.
Run from the repository root: PYTHONPATH=. python3 <this file> [rounds] [run]  -> $OUT/configs-run<run>.json"""
import sys
import time

import torch

from iomodel import api, families
from iomodel.families.flash_sm90 import SHIPPED
from kernels import flash_sm90
from validation import probe_record
from validation.peers import peer_runners
from validation.timing import CudaEventTimer

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
SHAPES = [(96, 21, 8192, 2), (96, 21, 16384, 1), (96, 21, 32768, 1), (64, 32, 32768, 1)]   # (d, H, N, B)


def main():
    t0 = time.time()
    gpu = torch.cuda.get_device_name()
    probe_record.sm90_precompile([(c, False, df) for c in SHIPPED if c.head_dim in {s[0] for s in SHAPES}
                                  for df in ((), (flash_sm90.CLUSTER,))])
    print(f"builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    cudnn, timer, rows, label = peer_runners(torch)["sdpa_cudnn"][0], CudaEventTimer(), [], families.get(
        "flash_sm90").label
    for d, H, N, B in SHAPES:
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": False, "dtype": "bf16"}
        configs = [c for c in SHIPPED if c.head_dim == d]
        fns = [(lambda c: lambda q, k, v: flash_sm90.attention(q, k, v, config=c))(c) for c in configs]
        sets = probe_record.random_sets(B, H, N, d, seed=73 * N + d + 1000 * RUN)
        got = probe_record.checked_rows(timer, fns, [label(c) for c in configs], sets,
                                        ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, False)), keep_going=True,
                                        rounds=ROUNDS, d=d, N=N, B=B, H=H)
        preds = {label(c): api.predict("flash_sm90", gpu, shape, c).time_s * 1e3 for c in configs}
        rows += [{**r, "predicted_ms": preds.get(r["impl"])} for r in got]
        print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.write(f"configs-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-lazy-"
                       f"rescale-h200-2026-11-29/probe_configs.py {ROUNDS} {RUN}")
    print("\n".join(probe_record.peer_table(rows, ("d", "N"), lambda r: r["impl"] == "sdpa_cudnn")))


if __name__ == "__main__":
    main()
