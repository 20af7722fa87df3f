"""Probe: why FlashAttention-4 leads d = 192 / 256 causal at N = 8192 on the H200 at its 700 W cap though ours takes
fewer cycles at one clock (../profile-sm90-tail-split-h200-2026-11-28/ncu-fa4.csv), and whether a schedule that reads
fewer DRAM bytes wins it back.  Every schedule of variants.py with cuDNN and FlashAttention-4 (where it imports):
1. checked against cuDNN, then timed in one interleaved group (the harness's timer, 3 fresh input sets);
2. each run back to back for SECONDS s, twice in turn, while nvidia-smi samples the SM clock and the power every
   20 ms: the clock and power each holds at the cap, and its time a call there.
Run from the repository root: PYTHONPATH=. python3 <this file> [rounds]  -> $OUT/power.json
With `7 verify`: the launcher's choice against the one-CTA-a-tile grid with FlashAttention-4's sections (and half and
twice as many heads) at d = 192 / 256, N = 1024 to 16384, B N = 16384, H d = 2048, 1 s each -> $OUT/verify.json
With `7 ab`, after the launcher took the grid rule: its choice against the static walk it replaced -> $OUT/ab.json"""
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import variants  # noqa: E402

from validation import probe_record  # noqa: E402
from validation.peers import peer_runners  # noqa: E402
from validation.timing import CudaEventTimer  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
SECONDS = 2.0
QUERY = "clocks.sm,power.draw,temperature.gpu"


def sampled(fn, sets, seconds: float) -> dict:
    """Run `fn` back to back for `seconds` under nvidia-smi's 20 ms samples: the time a call and the median clock
    and power of the samples after the first quarter (the ramp)."""
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-lms", "20"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(0.2)
    torch.cuda.synchronize()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for s in sets:
            fn(*s)
        calls += len(sets)
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    smi.terminate()
    lines = [x.split(",") for x in smi.communicate()[0].splitlines() if x.count(",") == 2]
    samples = [(float(c), float(p), float(t)) for c, p, t in lines if c.strip().replace(".", "").isdigit()]
    kept = samples[len(samples) // 4:] or samples
    med = lambda i: sorted(x[i] for x in kept)[len(kept) // 2] if kept else None  # noqa: E731
    return {"sustained_ms": wall / calls * 1e3, "calls": calls, "sm_mhz": med(0), "power_w": med(1),
            "temp_c": med(2), "samples": len(kept)}


VERIFY = [(d, 2048 // d, N, 16384 // N) for d in (192, 256) for N in (1024, 2048, 4096, 8192, 16384)]


def verify_variants(d: int, H: int, N: int, B: int) -> list:
    """The launcher's choice and the one-CTA-a-tile grid with FlashAttention-4's sections, half and twice them."""
    cfg, s = variants.pick(d, H, N, B), variants.fa4_sections(N, d, B * H)
    out = [("shipped", variants.ours(cfg))]
    for x in sorted({max(1, s // 2), s, min(B * H, 2 * s)}):
        out.append((f"np s{x}" + (" (fa4 rule)" if x == s else ""), variants.ours(cfg, persistent=False, sections=x)))
    return out


def ab_variants(d: int, H: int, N: int, B: int) -> list:
    """After the launcher took the grid rule (kernels/sm90_schedule.py): its choice against the persistent static
    walk it replaced."""
    cfg = variants.pick(d, H, N, B)
    return [("shipped", variants.ours(cfg)), ("static walk", variants.ours(cfg, (), True))]


def main():
    if sys.argv[2:3] == ["ab"]:
        global SECONDS
        SECONDS = 1.0
        return run([(shape, ab_variants(*shape)) for shape in variants.SHAPES], "ab.json", "ab")
    if sys.argv[2:3] == ["verify"]:
        SECONDS = 1.0
        return run([(shape, verify_variants(*shape)) for shape in VERIFY], "verify.json", "verify")
    return run([(shape, variants.variants(*shape)) for shape in variants.SHAPES], "power.json", "")


def run(groups, name: str, mode: str):
    runners, timer, rows, t0 = peer_runners(torch), CudaEventTimer(), [], time.time()
    cudnn, fa4 = runners["sdpa_cudnn"][0], runners["fa4"][0]
    print(f"{variants.precompile()} builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    for (d, H, N, B), vs in groups:
        sets = probe_record.random_sets(B, H, N, d, seed=31 * N + d)
        fns, labels = [f for _, f in vs], [lab for lab, _ in vs]
        if fa4 is not None:
            fns.append(lambda q, k, v: fa4(q, k, v, True))
            labels.append("fa4")
        timed = probe_record.checked_rows(timer, fns, labels, sets, ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, True)),
                                          keep_going=True, rounds=ROUNDS, d=d, N=N, B=B, H=H, causal=True)
        by = {r["impl"]: r for r in timed}
        ok = [(f, lab) for f, lab in zip(fns, labels) if "error" not in by[lab]]
        ok.append((lambda q, k, v: cudnn(q, k, v, True), "sdpa_cudnn"))
        for turn in range(2):
            for f, lab in ok:
                s = sampled(f, sets, SECONDS)
                for key, val in s.items():
                    by[lab].setdefault(f"{key}_runs", []).append(val)
        rows += timed
        print(f"d{d} N{N} B{B}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
        for r in timed:
            if "sm_mhz_runs" in r:
                print(f"   {r['impl']:16} {r['median_ms']:.4f} ms  sustained {r['sustained_ms_runs']}  "
                      f"MHz {r['sm_mhz_runs']}  W {r['power_w_runs']}", file=sys.stderr, flush=True)
    probe_record.write(name, rows, "PYTHONPATH=. python3 validation/results/"
                       f"profile-sm90-power-h200-2026-11-28/probe_power.py {ROUNDS} {mode}".strip(),
                       fa4_sections_rule="50 MiB", seconds=SECONDS)
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H"), lambda r: r["impl"] == "sdpa_cudnn")))
    print("\n".join(probe_record.sustained_lines(rows)))


if __name__ == "__main__":
    main()
