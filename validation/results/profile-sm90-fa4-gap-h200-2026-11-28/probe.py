"""Probe: where FlashAttention-4's Hopper forward leads ours (H200 harness runs of 2026-11-28: d = 192 / 256 causal at
N = 8192 by 3.5 / 5.7%, d = 64 and 128 at N >= 16384 by 1.6 to 5.7%).  Three parts, FlashAttention-4 and cuDNN
timed beside ours in one interleaved group a shape (the harness's timer, 3 fresh input sets, outputs checked against
cuDNN first):
  schedule  d = 192 / 256 causal: the shipped build against the scheduling features that are off above d = 128 or
            192 (the dynamic claims, own-chunk skipping, wgmma turns: SM90_DYN_MAX / OWN_MAX / TURN_MAX) and a grid
            of one CTA a tile (FlashAttention-4's: no persistence, the hardware hands out tiles);
  configs   d = 64 / 128 at N = 16384: the model's pick against the other tiles near it;
  dump      FlashAttention-4's PTX and cubin at the probed shapes (CUTE_DSL_KEEP, under $OUT/fa4dump) for a SASS
            comparison off the GPU.
Needs FlashAttention-4 importable (docs/validation.md).  Run from the repository root:
PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 validation/results/profile-sm90-fa4-gap-h200-2026-11-28/probe.py"""
import os
import sys
import time

os.environ.setdefault("CUTE_DSL_KEEP", "ptx,cubin")      # before FlashAttention-4 imports the DSL
os.environ.setdefault("CUTE_DSL_DUMP_DIR", os.path.join(os.environ.get("OUT", "/tmp"), "fa4dump"))
os.makedirs(os.environ["CUTE_DSL_DUMP_DIR"], exist_ok=True)

import torch  # noqa: E402

from iomodel import api, chooser, families  # noqa: E402
from kernels import compile as kcompile, flash_sm90  # noqa: E402
from validation import probe_record  # noqa: E402
from validation.peers import FA4, peer_runners  # noqa: E402
from validation.timing import CudaEventTimer  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
RUNNERS = peer_runners(torch)
if RUNNERS[FA4][0] is None:
    raise SystemExit(f"FlashAttention-4: {RUNNERS[FA4][1]}")
CUDNN, FA4RUN = RUNNERS["sdpa_cudnn"][0], RUNNERS[FA4][0]
DYN, OWN, TURN = "SM90_DYN_MAX=256", "SM90_OWN_MAX=256", "SM90_TURN_MAX=256"
# tag -> (defines, persistent)
SCHEDULES = {"shipped": ((), True), "dyn": ((DYN,), True), "own": ((OWN,), True), "turn": ((TURN,), True),
             "own+turn": ((OWN, TURN), True), "all": ((DYN, OWN, TURN), True), "grid=tiles": ((), False),
             "own+turn grid=tiles": ((OWN, TURN), False)}
SCHEDULE_SHAPES = [(192, 10, 8192, 2, True), (256, 8, 8192, 2, True)]   # (d, H, N, B, causal)
CONFIG_SHAPES = {(128, 16, 16384, 1, False): [(128, 128, 2), (128, 128, 3), (128, 160, 2), (128, 176, 2)],
                 (64, 32, 16384, 1, False): [(192, 128, 2), (192, 96, 2), (192, 112, 2), (128, 192, 2)]}


def model_shape(d, H, N, B, causal):
    return {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}


def config(d, block_m, block_n, stages):
    return families.get("flash_sm90").config_type(block_m=block_m, block_n=block_n, stages=stages, head_dim=d,
                                                  consumers=block_m // 64)


def ours(cfg, causal, defines=(), persistent=True):
    dyn = DYN in defines

    def run(q, k, v):
        flash_sm90.DYNAMIC_MAX_HEAD_DIM = 256 if dyn else 128   # the launcher's side of SM90_DYN_MAX
        return flash_sm90.attention(q, k, v, causal=causal, config=cfg, _defines=defines, _persistent=persistent)
    return run


def group(timer, shape, fns, labels, pred):
    d, H, N, B, causal = shape
    sets = probe_record.random_sets(B, H, N, d, seed=7 * d + N)
    fns = fns + [lambda q, k, v: FA4RUN(q, k, v, causal)]
    labels = labels + [FA4]
    rows = probe_record.checked_rows(timer, fns, labels, sets, ("sdpa_cudnn", lambda q, k, v: CUDNN(q, k, v, causal)),
                                     keep_going=True, rounds=ROUNDS, d=d, N=N, B=B, H=H, causal=causal)
    return [{**r, "predicted_ms": pred.get(r["impl"])} for r in rows]


def main():
    gpu, fam = torch.cuda.get_device_name(), families.get("flash_sm90")
    picks = {s: chooser.choose(["flash_sm90"], gpu, model_shape(*s)).config for s in SCHEDULE_SHAPES}
    builds = {(picks[s], s[4], df) for s in SCHEDULE_SHAPES for df, _ in SCHEDULES.values()}
    builds |= {(config(s[0], *t), s[4], ()) for s, tiles in CONFIG_SHAPES.items() for t in tiles}
    kcompile.precompile([(lambda c, ca, df: lambda: flash_sm90.module(c, "bf16", ca, df))(*b) for b in builds])
    timer, rows, t0 = CudaEventTimer(), [], time.time()
    for s in SCHEDULE_SHAPES:
        cfg = picks[s]
        fns = [ours(cfg, s[4], df, p) for df, p in SCHEDULES.values()]
        rows += group(timer, s, fns, [f"{fam.label(cfg)} {tag}" for tag in SCHEDULES], {})
        print(f"schedule d{s[0]}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    for s, tiles in CONFIG_SHAPES.items():
        d = s[0]
        cfgs = [config(d, *t) for t in tiles]
        pick = chooser.choose(["flash_sm90"], gpu, model_shape(*s)).config
        labels = [fam.label(c) + (" (pick)" if c == pick else "") for c in cfgs]
        pred = {lab: api.predict("flash_sm90", gpu, model_shape(*s), c).time_s * 1e3 for lab, c in zip(labels, cfgs)}
        rows += group(timer, s, [ours(c, s[4]) for c in cfgs], labels, pred)
        print(f"configs d{d}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.write("fa4_gap.json", rows, "PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 "
                       "validation/results/profile-sm90-fa4-gap-h200-2026-11-28/probe.py", fa4=FA4RUN.version)
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H", "causal"),
                                            lambda r: r["impl"] == "sdpa_cudnn")))


if __name__ == "__main__":
    main()
