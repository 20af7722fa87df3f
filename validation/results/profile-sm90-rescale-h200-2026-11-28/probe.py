"""Probe (round 4 of README.md): the wgmma forward's chunk-loop changes of 2026-11-28 against its parent, beside
FlashAttention-4 and cuDNN in one interleaved group a shape (the harness's timer, 3 fresh input sets, outputs
checked against cuDNN first), at the shapes FlashAttention-4 led.  Builds (flash_fwd_sm90.cuh / sm90_tiles.cuh
switches):
  parent   SM90_ALPHA_FIRST_MAX=0 SM90_EARLY_ABOVE=256 SM90_DESC_EACH_STEP SM90_KV_TOGETHER: the kernel before
  shipped  SM90_KV_TOGETHER SM90_EARLY_ABOVE=128: the kernel of the run (its default then), alpha first (d <= 64
           and above 128), O rescaled under the S product above d = 128, the descriptors from a tile's low word; the
           producer's K and V of a chunk together
  v lag    SM90_EARLY_ABOVE=128: the producer loads V one chunk behind K (not with a window); at d <= 128 and 256 the
           kernel as shipped (which keeps d = 192's O rescale after the P V product: probe_wide.py)
Each the model's pick, or the named tile.  Needs FlashAttention-4 importable (docs/validation.md).  Run from the
repository root (rounds, default 11):
PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 validation/results/profile-sm90-rescale-h200-2026-11-28/probe.py 11"""
import sys
import time

import torch

from iomodel import api, chooser, families
from kernels import compile as kcompile, flash_sm90
from validation import probe_record
from validation.peers import FA4, peer_runners
from validation.timing import CudaEventTimer

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 11
RUNNERS = peer_runners(torch)
if RUNNERS[FA4][0] is None:
    raise SystemExit(f"FlashAttention-4: {RUNNERS[FA4][1]}")
CUDNN, FA4RUN = RUNNERS["sdpa_cudnn"][0], RUNNERS[FA4][0]
BUILDS = {"parent": ("SM90_ALPHA_FIRST_MAX=0", "SM90_EARLY_ABOVE=256", "SM90_DESC_EACH_STEP", "SM90_KV_TOGETHER"),
          "shipped": ("SM90_KV_TOGETHER", "SM90_EARLY_ABOVE=128"), "v lag": ("SM90_EARLY_ABOVE=128",)}
# (d, H, N, B, causal) -> a tile (block_m, block_n, stages) or None for the model's pick
SHAPES = {(64, 32, 16384, 1, False): None, (64, 32, 32768, 1, True): None, (128, 16, 16384, 1, False): None,
          (128, 16, 16384, 1, True): None, (128, 8, 16384, 2, False): (128, 128, 2), (192, 10, 8192, 2, True): None,
          (256, 8, 8192, 2, True): None, (128, 16, 4096, 4, True): None, (64, 32, 4096, 4, False): None,
          (128, 16, 4096, 4, False): None, (256, 8, 8192, 2, False): None, (192, 10, 8192, 2, False): None}


def model_shape(d, H, N, B, causal):
    return {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}


def config_of(shape, tile):
    if tile is None:
        return chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), model_shape(*shape)).config
    m, n, st = tile
    return families.get("flash_sm90").config_type(block_m=m, block_n=n, stages=st, head_dim=shape[0], consumers=m // 64)


def main():
    fam, gpu = families.get("flash_sm90"), torch.cuda.get_device_name()
    cfgs = {s: config_of(s, t) for s, t in SHAPES.items()}
    kcompile.precompile([(lambda c, ca, df: lambda: flash_sm90.module(c, "bf16", ca, df))(cfgs[s], s[4], df)
                         for s in SHAPES for df in BUILDS.values()])
    timer, rows, t0 = CudaEventTimer(), [], time.time()
    for s, cfg in cfgs.items():
        d, H, N, B, causal = s
        fns = [(lambda df: lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=cfg, _defines=df))(df)
               for df in BUILDS.values()] + [lambda q, k, v: FA4RUN(q, k, v, causal)]
        labels = [f"{fam.label(cfg)} {tag}" for tag in BUILDS] + [FA4]
        got = probe_record.checked_rows(timer, fns, labels, probe_record.random_sets(B, H, N, d, seed=13 * d + N),
                                        ("sdpa_cudnn", lambda q, k, v: CUDNN(q, k, v, causal)), keep_going=True,
                                        rounds=ROUNDS, d=d, N=N, B=B, H=H, causal=causal)
        pred = api.predict("flash_sm90", gpu, model_shape(*s), cfg).time_s * 1e3
        rows += [{**r, "predicted_ms": pred if r["impl"] not in ("sdpa_cudnn", FA4) else None} for r in got]
        print(f"d{d} N{N} causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.write("rescale-round4.json", rows, "PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages "
                       f"python3 validation/results/profile-sm90-rescale-h200-2026-11-28/probe.py {ROUNDS}",
                       fa4=FA4RUN.version)
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H", "causal"), lambda r: r["impl"] == FA4)))


if __name__ == "__main__":
    main()
