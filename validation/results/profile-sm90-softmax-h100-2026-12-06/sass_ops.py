"""The SASS pages ncu_source.sh exported (ncu/*_sass.csv): each kernel's executed warp instructions and warp stall
samples by opcode (the leading opcode, predicates dropped), the top rows, and the mbarrier waits (SYNCS) executed
most.  No GPU.  From the repository root: python3 <this file> [DIR]  (DIR: ncu/ here)"""
import collections
import csv
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def rows(path: str) -> list[dict]:
    with open(path) as f:
        lines = list(csv.reader(f))
    head = lines[1]   # (line 0 names the kernel)
    return [dict(zip(head, r)) for r in lines[2:]]


def count(r: dict, key: str) -> int:
    return int(r[key].replace(",", "") or 0)


def opcode(source: str) -> str:
    m = re.match(r"\s*(@!?U?P\w+\s+)?([A-Z0-9_]+)", source)
    return m.group(2) if m else source.strip()[:12]


def report(path: str, top: int = 16) -> list[str]:
    rs = rows(path)
    inst, samples = collections.Counter(), collections.Counter()
    for r in rs:
        op = opcode(r["Source"])
        inst[op] += count(r, "Instructions Executed")
        samples[op] += count(r, "Warp Stall Sampling (All Samples)")
    ti, ts = sum(inst.values()), sum(samples.values())
    out = [f"{os.path.basename(path)}: {ti / 1e6:.1f} M warp instructions, {ts} stall samples"]
    out += [f"  {op:10} {n / 1e6:7.1f} M  {100 * n / ti:5.2f}% of instructions  "
            f"{100 * samples[op] / ts:5.2f}% of samples" for op, n in inst.most_common(top)]
    waits = sorted(((count(r, "Instructions Executed"), r["Source"].strip()) for r in rs if "SYNCS" in r["Source"]),
                   reverse=True)[:4]
    out += [f"  SYNCS {n / 1e6:5.2f} M  {src}" for n, src in waits]
    return out


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "ncu")
    for name in sorted(os.listdir(folder)):
        if name.endswith("_sass.csv"):
            print("\n".join(report(os.path.join(folder, name))))


if __name__ == "__main__":
    main()
