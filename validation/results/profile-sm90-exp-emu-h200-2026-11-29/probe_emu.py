"""Probe: part of the online softmax's exponentials on the FMA pipe (SM90_EXP_EMU = k: every k-th group of a
thread's four scores in an unmasked chunk through ex2_poly, a cubic, instead of MUFU.EX2) against the shipped build,
at no-mask shapes where the MUFU is as busy as the tensor cores (d = 64: one EX2 a score against 256 flops) and
where it is not (d = 96, 128), with cuDNN and FlashAttention-4 (where it imports) in the same groups.  Each build is
the launcher's (its pick, clusters where it pairs them) with SM90_EXP_EMU_MAX = 256, so every head dim may take it.
1. each build's output against the shipped build's and cuDNN's (max and mean |diff|, first input set);
2. each checked against cuDNN on the first of 3 fresh input sets, then all timed in one interleaved group;
3. at N >= 16384 each run back to back for 1 s, three times in turn, under nvidia-smi (clock, power).
Run from the repository root: PYTHONPATH=. python3 <this file> [rounds] [run]  -> $OUT/emu-run<run>.json"""
import sys
import time

import torch

from iomodel import chooser, families
from kernels import sm90_schedule
from validation import probe_record

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
SHAPES = [(64, 32, 4096, 4), (64, 32, 16384, 1), (64, 32, 32768, 1), (96, 21, 16384, 1), (128, 16, 4096, 4),
          (128, 16, 16384, 1)]   # (d, H, N, B)
PERIODS = {64: (16, 8, 4, 2), 96: (8, 4), 128: (8, 4)}


def pick(d: int, H: int, N: int, B: int):
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": False, "dtype": "bf16"}
    config = chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), shape).config
    return config, sm90_schedule.schedule_defines(shape, None, False, config, False)


def variants(d: int, H: int, N: int, B: int) -> list:
    """(label, config, defines): the shipped build, then each emulation period."""
    config, base = pick(d, H, N, B)
    label = families.get("flash_sm90").label(config) + (" cluster" if base else "")
    out = [(label, config, base)]
    for k in PERIODS[d]:
        out.append((f"{label} emu/{k}", config, base + (f"SM90_EXP_EMU={k}", "SM90_EXP_EMU_MAX=256")))
    return out


def main():
    t0, runners, timer, sampled = probe_record.sm90_peer_setup(SHAPES, variants)
    rows = []
    for (d, H, N, B), vs, sets in probe_record.shape_sets(SHAPES, variants, lambda d, H, N, B: 67 * N + d + 1000 * RUN):
        fns = [(lab, probe_record.sm90_call(c, df)) for lab, c, df in vs]
        info = probe_record.output_distances(fns, sets[0], lambda q, k, v: runners["sdpa_cudnn"][0](q, k, v, False))
        rows += probe_record.peer_group(timer, runners, fns, sets, ROUNDS,
                                        sampled if N >= 16384 else None, extra=info, d=d, N=N, B=B, H=H)
        print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
        print("\n".join(probe_record.distance_lines(info)), file=sys.stderr, flush=True)
    probe_record.report(f"emu-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-exp-emu-"
                        f"h200-2026-11-29/probe_emu.py {ROUNDS} {RUN}", runners)


if __name__ == "__main__":
    main()
