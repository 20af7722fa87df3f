"""Probe: the persistent fixed walk from a host-made tile table (`_persistent="lpt"`, kernels/sm90_schedule.py
lpt_order) against the launcher's one-CTA-a-tile grid and the static walk it replaced, causal above d = 128, with
cuDNN and FlashAttention-4 (where it imports) in the same groups.  The aim: the static walk's fewer cycles (its
CTAs overlap one tile's start with the last one's end) with the grid's DRAM bytes (sections of heads whose K and V
fit the L2), so a clock at the power cap no lower than the grid's.
1. each checked against cuDNN, then timed in one interleaved group (the harness's timer, 3 fresh input sets);
2. each run back to back for 1 s, twice in turn, while nvidia-smi samples the SM clock and power every 20 ms
   (../profile-sm90-power-h200-2026-11-28/probe_power.py's `sampled`).
Run from the repository root: PYTHONPATH=. python3 <this file> [rounds]  -> $OUT/lpt.json
With `7 tune`: the table's tile cost (a tile's key chunks and LPT_TILE_OVERHEAD_CHUNKS more: 0, 2, 4, 8) and its
sections (half and twice the grid's) against the launcher's choice, short and long sequences -> $OUT/lpt-tune.json"""
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
POWER = os.path.join(HERE, "..", "profile-sm90-power-h200-2026-11-28")
sys.path.insert(0, POWER)
import variants  # noqa: E402

from validation import probe_record  # noqa: E402
from validation.peers import peer_runners  # noqa: E402
from validation.timing import CudaEventTimer  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
power = probe_record.load(os.path.join(POWER, "probe_power.py"))
power.SECONDS = 1.0
SHAPES = [(256, 8, 8192, 2), (192, 10, 8192, 2), (256, 8, 4096, 4), (192, 10, 16384, 1), (256, 8, 16384, 1),
          (256, 8, 1024, 16), (192, 16, 2048, 8)]   # (d, H, N, B)


def lpt_variants(d: int, H: int, N: int, B: int) -> list:
    cfg = variants.pick(d, H, N, B)
    return [("shipped", variants.ours(cfg)), ("lpt", variants.ours(cfg, persistent="lpt")),
            ("static walk", variants.ours(cfg, (), True))]


TUNE = [(192, 10, 1024, 16), (192, 10, 2048, 8), (192, 10, 4096, 4), (256, 8, 1024, 16), (256, 8, 2048, 8),
        (256, 8, 8192, 2), (256, 8, 1024, 2), (192, 10, 16384, 1)]


def fixed(cfg, q, k, v, overhead: int, sections=None):
    """The lpt walk's plan made with the table's tile cost `overhead` (the plan keeps its table)."""
    from kernels import flash_sm90, sm90_schedule

    saved, sm90_schedule.LPT_TILE_OVERHEAD_CHUNKS = sm90_schedule.LPT_TILE_OVERHEAD_CHUNKS, overhead
    try:
        run = flash_sm90.plan(q, k, v, True, cfg, _persistent="lpt", _sections=sections)
    finally:
        sm90_schedule.LPT_TILE_OVERHEAD_CHUNKS = saved
    return lambda q, k, v: run(q, k, v)[0]


def tune_variants(d: int, H: int, N: int, B: int, sets) -> list:
    from kernels import sm90_schedule

    cfg = variants.pick(d, H, N, B)
    grid = sm90_schedule.grid_section_heads(B, H, H, N, d, 2, torch.cuda.get_device_properties(0).L2_cache_size)
    out = [("shipped", variants.ours(cfg))]
    out += [(f"lpt o{o}", fixed(cfg, *sets[0], o)) for o in (0, 2, 4, 8)]
    out += [(f"lpt s{x}", fixed(cfg, *sets[0], 2, x)) for x in sorted({max(1, grid // 2), min(B * H, 2 * grid)} - {grid})]
    return out


def main():
    if sys.argv[2:3] == ["tune"]:
        return run([(shape, None) for shape in TUNE], "lpt-tune.json", "tune")
    return run([(shape, lpt_variants(*shape)) for shape in SHAPES], "lpt.json", "")


def run(groups, name: str, mode: str):
    runners, timer, rows, t0 = peer_runners(torch), CudaEventTimer(), [], time.time()
    cudnn, fa4 = runners["sdpa_cudnn"][0], runners["fa4"][0]
    print(f"{variants.precompile()} builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    for (d, H, N, B), vs in groups:
        sets = probe_record.random_sets(B, H, N, d, seed=37 * N + d)
        vs = vs or tune_variants(d, H, N, B, sets)
        fns, labels = [f for _, f in vs], [lab for lab, _ in vs]
        walk, lpt = fns[-1 if mode else 2](*sets[0]), fns[1](*sets[0])
        same = bool(torch.equal(walk, lpt))
        if fa4 is not None:
            fns.append(lambda q, k, v: fa4(q, k, v, True))
            labels.append("fa4")
        timed = probe_record.checked_rows(timer, fns, labels, sets, ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, True)),
                                          keep_going=True, rounds=ROUNDS, d=d, N=N, B=B, H=H, causal=True)
        by = {r["impl"]: r for r in timed}
        by[labels[1]]["bitwise_equal_" + labels[-1 if mode else 2].replace(" ", "_")] = same
        ok = [(f, lab) for f, lab in zip(fns, labels) if "error" not in by[lab]]
        ok.append((lambda q, k, v: cudnn(q, k, v, True), "sdpa_cudnn"))
        for _ in range(2):
            for f, lab in ok:
                for key, val in power.sampled(f, sets, power.SECONDS).items():
                    by[lab].setdefault(f"{key}_runs", []).append(val)
        rows += timed
        print(f"d{d} N{N} B{B}: {time.time() - t0:.0f} s, lpt equal bitwise: {same}", file=sys.stderr,
              flush=True)
    probe_record.write(name, rows, "PYTHONPATH=. python3 validation/results/profile-sm90-lpt-h200-2026-11-29/"
                       f"probe_lpt.py {ROUNDS} {mode}".strip(), lpt_tile_overhead_chunks=__import__(
                           "kernels.sm90_schedule", fromlist=["x"]).LPT_TILE_OVERHEAD_CHUNKS, seconds=power.SECONDS)
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H"), lambda r: r["impl"] == "sdpa_cudnn")))
    print("\n".join(probe_record.sustained_lines(rows, ("d", "N", "B"))))


if __name__ == "__main__":
    main()
