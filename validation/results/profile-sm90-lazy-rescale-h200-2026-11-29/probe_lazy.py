"""Probe: the wgmma forward's stale max (FwdTraits::kStaleLog2 = 8: a warp keeps its rows' maxima while none grows by
more than 8 in exp2's exponent, and skips alpha, the row sums' and O's multiplies) against the eager build, with
and without the causal mask, at every head dim's long shapes, with cuDNN and FlashAttention-4 (where it imports) in
the same groups.  Each build is the launcher's (its pick and schedule: clusters, lpt walk) with the switch added.
(The runs' causal stale builds took the switch; the causal kernels now never do, so their two builds are one.)
1. each build's output against the eager build's and cuDNN's (max and mean |diff|, first input set);
2. each checked against cuDNN on the first of 3 fresh input sets, then all timed in one interleaved group;
3. at N >= 16384 without a mask each run back to back for 1 s, three times in turn, under nvidia-smi.
Run from the repository root: PYTHONPATH=. python3 <this file> [rounds] [run]  -> $OUT/lazy-run<run>.json"""
import sys
import time

import torch

from iomodel import chooser, families
from kernels import sm90_schedule
from validation import probe_record

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
SHAPES = [(64, 32, 4096, 4, False), (64, 32, 4096, 4, True), (64, 32, 16384, 1, False), (64, 32, 16384, 1, True),
          (64, 32, 32768, 1, False), (96, 21, 16384, 1, False), (128, 16, 4096, 4, False), (128, 16, 4096, 4, True),
          (128, 16, 16384, 1, False), (128, 16, 16384, 1, True), (192, 10, 8192, 2, True),
          (256, 8, 8192, 2, False)]   # (d, H, N, B, causal)
# (the runs' labels: the eager build unmarked, the stale one "lazy8"; built then as SM90_LAZY_RESCALE=8 over an eager
# default, now the default, with SM90_STALE_LOG2=0 the eager build)
BUILDS = {"": ("SM90_STALE_LOG2=0",), " lazy8": ()}


def variants(d: int, H: int, N: int, B: int, causal: bool) -> list:
    """(label, config, defines): the launcher's build, then with each switch."""
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
    config = chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), shape).config
    sch = sm90_schedule.schedule(shape, config.block_m, 132, 50 << 20, 2, config=config)
    label = families.get("flash_sm90").label(config) + (" cluster" if "SM90_CLUSTER" in sch.defines else "")
    return [(label + tag, config, sch.defines + df) for tag, df in BUILDS.items()]


def call(config, defines, causal):
    """The build as the launcher would run it: the lpt walk's table where the defaults take it."""
    from kernels import flash_sm90
    persistent = "lpt" if causal and config.head_dim > flash_sm90.DYNAMIC_MAX_HEAD_DIM else None
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=config, _defines=tuple(defines),
                                                _persistent=persistent)


def main():
    t0, runners, timer, sampled = probe_record.sm90_peer_setup(SHAPES, variants)
    rows = []
    for (d, H, N, B, causal), vs, sets in probe_record.shape_sets(
            SHAPES, variants, lambda d, H, N, B, causal: 71 * N + d + causal + 1000 * RUN):
        fns = [(lab, call(c, df, causal)) for lab, c, df in vs]
        info = probe_record.output_distances(fns, sets[0],
                                             lambda q, k, v: runners["sdpa_cudnn"][0](q, k, v, causal))
        rows += probe_record.peer_group(timer, runners, fns, sets, ROUNDS,
                                        sampled if N >= 16384 and not causal else None, causal=causal, extra=info,
                                        d=d, N=N, B=B, H=H)
        print(f"d{d} N{N} causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
        print("\n".join(probe_record.distance_lines(info)), file=sys.stderr, flush=True)
    probe_record.report(f"lazy-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-lazy-"
                        f"rescale-h200-2026-11-29/probe_lazy.py {ROUNDS} {RUN}", runners, ("d", "N", "B", "causal"))


if __name__ == "__main__":
    main()
