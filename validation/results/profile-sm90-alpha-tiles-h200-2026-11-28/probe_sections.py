"""Probe: the causal schedule's sections (query heads whose tiles go longest first together; kernels/flash_sm90.py,
heads_per_section) at long sequences, where ncu_causal.sh found our d = 128 N = 16384 causal kernel reading 4x the
DRAM bytes FlashAttention-4 reads (L2 hit rate 79% against 96%): its one section of all 16 heads holds 128 MB of
K and V, more than the L2.  Each shape's model pick under sections of several sizes (the shipped rule's first),
FlashAttention-4 and cuDNN in one interleaved group (the harness's timer, 3 fresh input sets, outputs checked
against cuDNN first).  Needs FlashAttention-4 importable (docs/validation.md).  Run from the repository root:
PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 <this file> 7   (rounds) -> sections.json
With `7 wide`: d = 192 and 256 (the static schedule's sections) -> sections-wide.json."""
import sys
import time

import torch

from iomodel import chooser, families
from kernels import flash_sm90
from validation import probe_record
from validation.peers import FA4, peer_runners
from validation.timing import CudaEventTimer

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
# (d, H, N, B) causal -> section sizes in heads, None = the shipped rule's
SHAPES = {(128, 16, 16384, 1): (None, 8, 4, 2), (128, 16, 8192, 2): (None, 8, 4), (64, 32, 16384, 1): (None, 8, 4, 2),
          (64, 32, 32768, 1): (None, 8, 4, 2), (128, 32, 32768, 1): (None, 8, 4, 2, 1)}
if sys.argv[2:3] == ["wide"]:   # d = 192 and 256: the static schedule, whose L2 rule gives one section of all heads here
    SHAPES = {(256, 8, 8192, 2): (None, 4, 2, 1), (192, 10, 8192, 2): (None, 5, 4, 2), (256, 16, 16384, 1): (None, 4, 2, 1)}


def main():
    runners, timer, rows, t0 = peer_runners(torch), CudaEventTimer(), [], time.time()
    cudnn, fa4 = runners["sdpa_cudnn"][0], runners[FA4][0]
    if fa4 is None:
        raise SystemExit(f"FlashAttention-4: {runners[FA4][1]}")
    fam, gpu = families.get("flash_sm90"), torch.cuda.get_device_name()
    for (d, H, N, B), secs in SHAPES.items():
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": True, "dtype": "bf16"}
        cfg = chooser.choose(["flash_sm90"], gpu, shape).config
        fns = [(lambda s: lambda q, k, v: flash_sm90.attention(q, k, v, causal=True, config=cfg, _sections=s))(s)
               for s in secs] + [lambda q, k, v: fa4(q, k, v, True)]
        labels = [f"{fam.label(cfg)} sections {s or 'rule'}" for s in secs] + [FA4]
        rows += probe_record.checked_rows(timer, fns, labels, probe_record.random_sets(B, H, N, d, seed=11 * N + d),
                                          ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, True)), keep_going=True,
                                          rounds=ROUNDS, d=d, N=N, B=B, H=H, causal=True)
        print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.write("sections-wide.json" if sys.argv[2:3] == ["wide"] else "sections.json", rows, "PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 "
                       f"validation/results/profile-sm90-alpha-tiles-h200-2026-11-28/probe_sections.py {' '.join(sys.argv[1:])}",
                       fa4=fa4.version)
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H", "causal"), lambda r: r["impl"] == FA4)))


if __name__ == "__main__":
    main()
