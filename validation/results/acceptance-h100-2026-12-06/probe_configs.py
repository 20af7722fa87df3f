"""Probe: the shapes where FlashAttention-4 led the H100 acceptance runs (h100-sxm-2026-12-06-sweep-run1.json,
-shapes-run1.json): the model's five best wgmma configs of each shape, FlashAttention-4 and cuDNN in one interleaved
group (7 rounds, 3 input sets), each checked against cuDNN first, so the pick's place among our tiles and the peer's
lead are read in one group.
Run from the repository root with FlashAttention-4 staged (docs/validation.md):
PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 <this file> RUN
 -> $OUT/configs-<h100|h200>-run<RUN>.json"""
import sys
import time

import torch

from iomodel import chooser, families
from kernels import flash_sm90
from kernels.sm90_schedule import schedule
from validation import probe_record
from validation.plan import make_shape

RUN = int(sys.argv[1]) if len(sys.argv) > 1 else 1
HERE = "validation/results/acceptance-h100-2026-12-06/probe_configs.py"
SHAPES = [(32, 64, 4096, 4, False), (128, 16, 16384, 1, True), (64, 32, 32768, 1, False), (64, 32, 16384, 1, True),
          (128, 16, 4096, 4, False)]   # (d, H, N, B, causal)
TOP = 5


def variants(d, H, N, B, causal):
    """(label, config, defines) of the model's TOP configs of the shape (its pick first)."""
    s = make_shape(N, d, causal, tokens=B * N)   # (H = 2048 / d, as SHAPES has it)
    fam, props = families.get("flash_sm90"), torch.cuda.get_device_properties(0)
    ranked = chooser.rank_configs("flash_sm90", torch.cuda.get_device_name(), s, fam.shipped_for(s))
    pick, cfgs = ranked[0].config, [p.config for p in ranked[:TOP]]
    return [(fam.label(c) + (" (pick)" if c == pick else ""), c,
             tuple(schedule(s, c.block_m, props.multi_processor_count, props.L2_cache_size, 2, config=c).defines))
            for c in cfgs]


def main():
    t0, runners, timer, _ = probe_record.sm90_peer_setup(SHAPES, variants)
    rows = []
    for shape, vs, sets in probe_record.shape_sets(SHAPES, variants, lambda d, H, N, B, c: 7001 * RUN + d + N + c):
        d, H, N, B, causal = shape
        fns = [(lab, (lambda c: lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=c))(cfg))
               for lab, cfg, _ in vs]
        rows += probe_record.peer_group(timer, runners, fns, sets, 7, causal=causal, d=d, N=N, B=B, H=H)
        print(f"d{d} N{N} B{B}{' causal' if causal else ''}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    gpu = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
    probe_record.report(f"configs-{gpu}-run{RUN}.json", rows, f"PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/"
                        f"dsl_packages python3 {HERE} {RUN}", runners, keys=("d", "N", "B", "causal"))


if __name__ == "__main__":
    main()
