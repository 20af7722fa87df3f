"""The ncu CSVs (`ncu --csv --page details`) of a directory side by side: a few metrics a launch.
Usage: python3 ncu_table.py DIR"""
import csv
import glob
import os
import sys

METRICS = ("Duration", "SM Frequency", "Elapsed Cycles", "Executed Instructions", "Issue Slots Busy",
           "Warp Cycles Per Issued Instruction", "Compute (SM) Throughput", "Memory Throughput", "L2 Hit Rate",
           "DRAM Throughput", "L1/TEX Hit Rate", "Grid Size", "Registers Per Thread")


def metrics(path: str) -> dict:
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    head = next((i for i, r in enumerate(rows) if "Metric Name" in r), None)
    if head is None:
        return {}
    cols = rows[head]
    name, unit, value = (cols.index(c) for c in ("Metric Name", "Metric Unit", "Metric Value"))
    return {r[name]: f"{r[value]} {r[unit]}".strip() for r in rows[head + 1:] if len(r) > value}


def main(d: str) -> None:
    got = {os.path.basename(p)[:-4]: metrics(p) for p in sorted(glob.glob(os.path.join(d, "*.csv")))}
    print("metric".ljust(36) + "".join(k[:20].rjust(22) for k in got))
    extra = sorted({m for v in got.values() for m in v if m.startswith(("smsp__average_warps", "sm__pipe_tensor"))})
    for m in (*METRICS, *extra):
        short = m.replace("smsp__average_warps_issue_stalled_", "stall ").replace("_per_issue_active.ratio", "")
        print(short[:36].ljust(36) + "".join(v.get(m, "-")[:20].rjust(22) for v in got.values()))


if __name__ == "__main__":
    main(sys.argv[1])
