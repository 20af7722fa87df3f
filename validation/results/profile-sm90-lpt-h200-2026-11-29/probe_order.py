"""Probe: does a kernel's time in an interleaved group depend on the kernel run just before it?  The harness's
rounds (validation/timing.py, round_order) run the callables forward in even rounds and backward in odd ones, one
share of ~25 ms each, so FlashAttention-4 (the last row of a shape) always follows SDPA's memory-efficient
backend (the slowest, lowest-power kernel) in even rounds, and ours (the first) follows the round's synchronize or
SDPA's flash backend.  Here each target (ours, FlashAttention-4, cuDNN) runs one share right after a share of each
predecessor (or after 20 ms idle), TRIALS times in a shuffled order, each call timed by CUDA events: the median a
call by (target, predecessor).  Run from the repository root: PYTHONPATH=. python3 <this file>  -> $OUT/order.json"""
import random
import statistics
import sys
import time

import torch

from kernels import flash_sm90
from validation import probe_record
from validation.peers import peer_runners

SHAPES = [(256, 8, 8192, 2, True), (128, 16, 16384, 1, False), (192, 10, 16384, 1, True)]   # (d, H, N, B, causal)
SHARE_S = 0.025
TRIALS = 10


def share(fn, sets, calls: int, timed: bool) -> list[float]:
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)] if timed else []
    for i in range(calls):
        if timed:
            evs[i][0].record()
        fn(*sets[i % len(sets)])
        if timed:
            evs[i][1].record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in evs]


def main():
    runners, rows, t0 = peer_runners(torch), [], time.time()
    for d, H, N, B, causal in SHAPES:
        sets = probe_record.random_sets(B, H, N, d, seed=41 * N + d)
        fns = {"ours": lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal)}
        for name in ("fa4", "sdpa_cudnn", "sdpa_flash", "sdpa_efficient"):
            run = runners[name][0]
            if run is not None:
                fns[name] = (lambda r: lambda q, k, v: r(q, k, v, causal))(run)
        calls = {}
        for name, fn in fns.items():
            share(fn, sets, 5, False)
            calls[name] = max(1, round(SHARE_S * 1e3 / statistics.median(share(fn, sets, 5, True))))
        targets = [t for t in ("ours", "fa4", "sdpa_cudnn") if t in fns]
        plan = [(t, p) for t in targets for p in ["idle", *fns] for _ in range(TRIALS)]
        random.Random(N + d).shuffle(plan)
        got = {}
        for t, p in plan:
            if p == "idle":
                time.sleep(0.02)
            else:
                share(fns[p], sets, calls[p], False)
            got.setdefault((t, p), []).append(statistics.median(share(fns[t], sets, calls[t], True)))
        for (t, p), xs in sorted(got.items()):
            rows.append({"d": d, "N": N, "B": B, "H": H, "causal": causal, "target": t, "after": p,
                         "median_ms": statistics.median(xs), "trials": xs})
        print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.write("order.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-lpt-h200-2026-11-29/"
                       "probe_order.py", share_s=SHARE_S, trials=TRIALS)
    for r in rows:
        print(f"d{r['d']} N{r['N']} {'causal' if r['causal'] else 'full'} {r['target']:11} after {r['after']:15} "
              f"{r['median_ms']:.4f}")


if __name__ == "__main__":
    main()
