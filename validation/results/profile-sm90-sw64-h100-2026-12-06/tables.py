"""This record's tables from its JSON: each run's 64-byte-row build's median time over its 128-byte-row build's (the
same tile), FlashAttention-4's time over each 64-byte-row build's, the power run's sustained calls, clocks and
power, and the turns set's builds without turns over with them.  Usage: python3 tables.py (from anywhere)"""
import glob
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def ratios() -> None:
    print("run  shape                  tile                 row64/row128   fa4/row64")
    for path in sorted(glob.glob(os.path.join(HERE, "sw64-*.json"))):
        run = path.rsplit("run", 1)[1][:-5]
        rows = json.load(open(path))["rows"]
        by = {(r["d"], r["N"], r["B"], r["causal"], r["impl"]): r.get("median_ms") for r in rows}
        for (d, N, B, causal, impl), ms in by.items():
            if impl.endswith("row128") or impl in ("fa4", "sdpa_cudnn") or ms is None:
                continue
            old, fa4 = by.get((d, N, B, causal, impl + " row128")), by.get((d, N, B, causal, "fa4"))
            shape = f"d{d} N{N} B{B}{' causal' if causal else ''}"
            print(f"{run:4} {shape:22} {impl:20} {ms / old:12.3f} {fa4 / ms if fa4 else float('nan'):11.3f}")


def power() -> None:
    print("\npower run: N, build, sustained ms, SM MHz, W (three runs of a second)")
    for path in sorted(glob.glob(os.path.join(HERE, "power-*.json"))):
        for r in json.load(open(path))["rows"]:
            if "sm_mhz_runs" in r:
                ms = "/".join(f"{x:.3f}" for x in r["sustained_ms_runs"])
                mhz = "/".join(f"{x:.0f}" for x in r["sm_mhz_runs"])
                w = "/".join(f"{x:.0f}" for x in r["power_w_runs"])
                print(f"N{r['N']:<6} {r['impl']:26} {ms:20} {mhz:16} {w}")


def turns() -> None:
    print("\nturns set: run, shape, tile, without turns / with them (median)")
    for path in sorted(glob.glob(os.path.join(HERE, "turns-*.json"))):
        run = path.rsplit("run", 1)[1][:-5]
        by = {(r["N"], r["B"], r["causal"], r["impl"]): r.get("median_ms") for r in json.load(open(path))["rows"]}
        for (N, B, causal, impl), ms in by.items():
            if not impl.endswith("noturn") and impl != "sdpa_cudnn" and ms:
                shape = f"d32 N{N} B{B}{' causal' if causal else ''}"
                print(f"{run:4} {shape:22} {impl:20} {by[(N, B, causal, impl + ' noturn')] / ms:8.3f}")


if __name__ == "__main__":
    ratios()
    power()
    turns()
