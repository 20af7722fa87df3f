"""Probe: the cluster build's barrier scope (SM90_CLUSTER with and without SM90_CLUSTER_CTA_SCOPE) against the plain
build, at the no-mask shapes of ../profile-sm90-lpt-small-h200-2026-11-29/probe_cluster.py (its `configs`), with
cuDNN and FlashAttention-4 (where it imports) in the same groups.  The question: is the pair's 15 to 27% loss the
cluster-scope release on the consumers' arrivals and acquire on the producer's polls?
1. the two cluster builds' outputs compared bit for bit (same arithmetic, another barrier scope), each build's
   grid recorded (the clusters resident at once);
2. each checked against cuDNN on the first of 3 fresh input sets, then all timed in one interleaved group;
3. at N = 16384 each run back to back for 1 s, three times in turn, under nvidia-smi (clock, power).
Run from the repository root: PYTHONPATH=. python3 <this file> [rounds] [run]  -> $OUT/scope-run<run>.json"""
import os
import sys
import time

import torch

from iomodel import families
from kernels import flash_sm90
from validation import probe_record

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER_PROBE = probe_record.load(os.path.join(HERE, "..", "profile-sm90-lpt-small-h200-2026-11-29",
                                                "probe_cluster.py"))
SHAPES = CLUSTER_PROBE.SHAPES
SCOPE = "SM90_CLUSTER_CTA_SCOPE"
BUILDS = {"": (), " cluster": (flash_sm90.CLUSTER,), " cluster cta": (flash_sm90.CLUSTER, SCOPE)}


def variants(d: int, H: int, N: int, B: int) -> list:
    label = families.get("flash_sm90").label
    return [(label(c) + tag, c, df) for c in CLUSTER_PROBE.configs(d, H, N, B) for tag, df in BUILDS.items()]


def facts(vs, sets) -> dict:
    """Each build's grid, and whether the two cluster builds of one config agree bit for bit."""
    q, k, v = sets[0]
    out = {lab: {"grid": flash_sm90.plan(q, k, v, config=c, _defines=df).prepared.grid[0]} for lab, c, df in vs}
    for lab, c, df in vs:
        if SCOPE in df:
            base = flash_sm90.attention(q, k, v, config=c, _defines=(flash_sm90.CLUSTER,))
            out[lab]["bitwise_vs_cluster"] = bool(torch.equal(flash_sm90.attention(q, k, v, config=c, _defines=df),
                                                              base))
    return out


def main():
    t0, runners, timer, sampled = probe_record.sm90_peer_setup(SHAPES, variants)
    rows = []
    for (d, H, N, B), vs, sets in probe_record.shape_sets(SHAPES, variants, lambda d, H, N, B: 59 * N + d + 1000 * RUN):
        info = facts(vs, sets)
        fns = [(lab, probe_record.sm90_call(c, df)) for lab, c, df in vs]
        rows += probe_record.peer_group(timer, runners, fns, sets, ROUNDS,
                                        sampled if N >= 16384 else None, extra=info, d=d, N=N, B=B, H=H)
        print(f"d{d} N{N}: {time.time() - t0:.0f} s {info}", file=sys.stderr, flush=True)
    probe_record.report(f"scope-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-cluster-"
                        f"scope-h200-2026-11-29/probe_scope.py {ROUNDS} {RUN}", runners)


if __name__ == "__main__":
    main()
