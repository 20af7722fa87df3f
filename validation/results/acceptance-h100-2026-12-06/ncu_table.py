"""The ncu CSVs of a directory side by side (the window record's table, with the pipes' shares too).
Usage: python3 ncu_table.py DIR"""
import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "profile-sm90-window-slope-h200-2026-11-29"))
from ncu_table import METRICS, metrics  # noqa: E402


def main(d: str) -> None:
    got = {os.path.basename(p)[:-4]: metrics(p) for p in sorted(glob.glob(os.path.join(d, "*.csv")))}
    print("metric".ljust(40) + "".join(k[:20].rjust(22) for k in got))
    prefixes = ("smsp__average_warps", "sm__pipe", "sm__inst")
    extra = sorted({m for v in got.values() for m in v if m.startswith(prefixes)})
    for m in (*METRICS, *extra):
        short = m.replace("smsp__average_warps_issue_stalled_", "stall ").replace("_per_issue_active.ratio", "")
        short = short.replace("sm__inst_executed_pipe_", "pipe ").replace(".avg.pct_of_peak_sustained_active", " %")
        print(short[:40].ljust(40) + "".join(v.get(m, "-")[:20].rjust(22) for v in got.values()))


if __name__ == "__main__":
    main(sys.argv[1])
