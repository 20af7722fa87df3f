"""The lines of probe_slope.py's runs: per head dim and callable, ms = a + b * window over the windowed rows (numpy
only).  Run from anywhere: python3 <this file> RUN  (reads slope-run<RUN>.json beside it)."""
import json
import os
import sys

import numpy as np


def fit_lines(rows) -> list[str]:
    """Per head dim and callable (its label: a config that every window timed): ms = a + b * window, fitted over
    the windowed rows."""
    lines = []
    for d in sorted({r["d"] for r in rows}, reverse=True):
        for imp in dict.fromkeys(r["impl"] for r in rows if r["d"] == d):
            pts = [(r["left"], r["median_ms"]) for r in rows
                   if r["d"] == d and r["left"] is not None and r["impl"] == imp]
            if len(pts) >= 3:
                x, y = np.array(pts, dtype=float).T
                b, a = np.polyfit(x, y, 1)
                lines.append(f"d{d} {imp:26s} ms = {a:.4f} + {b * 1024:.4f} per 1024 keys of band over {len(pts)} "
                             f"windows (max residual {np.abs(y - (a + b * x)).max():.4f})")
    return lines


if __name__ == "__main__":
    run = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"slope-run{run}.json")) as f:
        print("\n".join(fit_lines(json.load(f)["rows"])))
