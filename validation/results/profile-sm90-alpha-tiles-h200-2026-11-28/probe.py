"""Probe: alpha first (kAlphaFirst, the row sums started at l * alpha) at d = 128 on each of its tiles, beside cuDNN
in one interleaved group a shape (the harness's timer, 3 fresh input sets, outputs checked against cuDNN first).
Session 23 kept alpha first off at d = 128 because the 128x176 tile ran 2 to 5% slower causal with it, while its
round 1 had 128x128 tiles 0.9 to 1.7% faster with it (../profile-sm90-rescale-h200-2026-11-28/README.md); and
FlashAttention-4, 2 to 3% ahead at d = 128 N = 16384, runs 128x128 with it.  Builds (flash_fwd_sm90.cuh switches):
  shipped       SM90_ALPHA_FIRST_CAUSAL_N=0: the kernel of 6547b4f (alpha first at d <= 64 and d = 256)
  alpha first   SM90_ALPHA_FIRST_MAX=128 (every d = 128 kernel)
Tiles: 128x128 s2, 128x128 s3, 128x176 s2 (the model's picks at d = 128 are among them).  Run from the repository
root (rounds, default 9) -> alpha-tiles.json:
PYTHONPATH=. python3 validation/results/profile-sm90-alpha-tiles-h200-2026-11-28/probe.py 9
The second round (argument fa4): the causal shapes only, the kernel as shipped since (alpha first in d = 128's
plain causal kernels of chunks up to 128 keys, `alpha causal`) against the one before (`before`,
SM90_ALPHA_FIRST_CAUSAL_N=0), FlashAttention-4 timed in each group too (installed as docs/validation.md says) ->
alpha-tiles-fa4.json:
PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 <this file> 9 fa4"""
import sys
import time

import torch

from iomodel import api, families
from kernels import compile as kcompile, flash_sm90
from validation import probe_record
from validation.peers import FA4, peer_runners
from validation.timing import CudaEventTimer

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 9
WITH_FA4 = sys.argv[2:3] == ["fa4"]
BUILDS = {"shipped": ("SM90_ALPHA_FIRST_CAUSAL_N=0",), "alpha first": ("SM90_ALPHA_FIRST_MAX=128",)}
if WITH_FA4:   # the kernel as shipped since this probe against the one before
    BUILDS = {"before": ("SM90_ALPHA_FIRST_CAUSAL_N=0",), "alpha causal": ()}
TILES = ((128, 128, 2), (128, 128, 3), (128, 176, 2))
SHAPES = [(128, 16, 16384, 1, False), (128, 16, 16384, 1, True), (128, 8, 16384, 2, True), (128, 16, 4096, 4, False),
          (128, 16, 4096, 4, True), (128, 16, 1024, 16, True), (128, 16, 1024, 16, False)]   # (d, H, N, B, causal)
if WITH_FA4:
    SHAPES = [s for s in SHAPES if s[4]] + [(128, 16, 8192, 2, True), (128, 32, 2048, 8, True)]


def model_shape(d, H, N, B, causal):
    return {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}


def main():
    fam, gpu = families.get("flash_sm90"), torch.cuda.get_device_name()
    cfgs = [fam.config_type(block_m=m, block_n=n, stages=st, head_dim=128, consumers=m // 64) for m, n, st in TILES]
    kcompile.precompile([(lambda c, ca, df: lambda: flash_sm90.module(c, "bf16", ca, df))(c, ca, df)
                         for c in cfgs for ca in (False, True) for df in BUILDS.values()])
    runners, timer, rows, t0 = peer_runners(torch), CudaEventTimer(), [], time.time()
    cudnn, fa4 = runners["sdpa_cudnn"][0], runners[FA4][0]
    if WITH_FA4 and fa4 is None:
        raise SystemExit(f"FlashAttention-4: {runners[FA4][1]}")
    for s in SHAPES:
        d, H, N, B, causal = s
        fns, labels, preds = [], [], []
        for cfg in cfgs:
            pred = api.predict("flash_sm90", gpu, model_shape(*s), cfg).time_s * 1e3
            for tag, df in BUILDS.items():
                fns.append((lambda c, df: lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=c,
                                                                               _defines=df))(cfg, df))
                labels.append(f"{fam.label(cfg)} {tag}")
                preds.append(pred)
        if WITH_FA4:
            fns.append(lambda q, k, v: fa4(q, k, v, causal))
            labels.append(FA4)
        got = probe_record.checked_rows(timer, fns, labels, probe_record.random_sets(B, H, N, d, seed=7 * N + causal),
                                        ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, causal)), keep_going=True,
                                        rounds=ROUNDS, d=d, N=N, B=B, H=H, causal=causal)
        pred_of = dict(zip(labels, preds))
        rows += [{**r, "predicted_ms": pred_of.get(r["impl"])} for r in got]
        print(f"d{d} N{N} B{B} causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.write("alpha-tiles-fa4.json" if WITH_FA4 else "alpha-tiles.json", rows,
                       "PYTHONPATH=." + (":/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages" if WITH_FA4 else "")
                       + f" python3 validation/results/profile-sm90-alpha-tiles-h200-2026-11-28/probe.py {ROUNDS}"
                       + (" fa4" if WITH_FA4 else ""), **({"fa4": fa4.version} if WITH_FA4 else {}))
    peer = FA4 if WITH_FA4 else "sdpa_cudnn"
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H", "causal"), lambda r: r["impl"] == peer)))


if __name__ == "__main__":
    main()
