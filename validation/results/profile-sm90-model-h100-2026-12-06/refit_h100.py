"""The flash_sm90 plan (iomodel/families/flash_sm90.py, SM90_PLAN) read against the H100's rows of 2026-12-06: its
median |error| and pick regret at the plan as shipped and at points of a grid of its latencies and overlap (the
H200's refit of 2026-11-29, ../profile-sm90-model-refit-h200-2026-11-29/refit_plan.py, whose predict and score this
uses with the H100's spec).  Rows, our kernel's only: the harness's sweep, named shapes and leads runs
(../h100-sxm-2026-12-06-{sweep,shapes,leads}-run1.json), the config probes' groups
(../acceptance-h100-2026-12-06/configs-h100-run*.json) and the tile probes'
(../profile-sm90-softmax-h100-2026-12-06/tiles-*-h100-run1.json).  No GPU.  From the repository root:
PYTHONPATH=. python3 <this file> show [SL SPW SLOPE BLOCK FILL STALE]   (default: the plan as shipped)
PYTHONPATH=. python3 <this file> grid N                                  (a point a line, GRIDS[N])"""
import itertools
import json
import pathlib
import re
import sys

from iomodel.families import flash_sm90 as F
from iomodel.families.flash_sm90 import Sm90Config
from validation import probe_record

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE.parent
H200 = probe_record.load(str(RESULTS / "profile-sm90-model-refit-h200-2026-11-29/refit_plan.py"))
SHIPPED = {"step_latency_cycles": F.SM90_PLAN.step_latency_cycles,
           "step_latency_cycles_per_warp": F.SM90_PLAN.step_latency_cycles_per_warp,
           "interleave_slope": F.SM90_PLAN.interleave_slope, "block_latency_cycles": F.SM90_PLAN.block_latency_cycles,
           "fill_steps": F.SM90_PLAN.fill_steps, "stale": F.STALE_LOG2}
GRIDS = {1: {"step_latency_cycles": (100.0, 150.0, 200.0, 250.0), "step_latency_cycles_per_warp": (40.0, 55.0, 70.0),
             "interleave_slope": (0.45, 0.5, 0.55), "block_latency_cycles": (1500.0,), "fill_steps": (2.0,),
             "stale": (8.0,)}}


def _config(label: str, d: int) -> Sm90Config:
    bm, bn, c, st = map(int, re.match(r"(\d+)x(\d+) c(\d+) s(\d+)", label).groups())
    return Sm90Config(bm, bn, st, d, c)


def load() -> tuple[list, dict]:
    """Rows (source, shape, config label, measured ms) and {(label, d): config} for every config they name."""
    rows = []
    for f in ("h100-sxm-2026-12-06-sweep-run1.json", "h100-sxm-2026-12-06-shapes-run1.json",
              "h100-sxm-2026-12-06-leads-run1.json"):
        for r in json.load(open(RESULTS / f))["rows"]:
            if r["kernel"] == "flash_sm90" and r.get("ok") and "window_left" not in r["shape"]:
                s = {k: r["shape"][k] for k in ("B", "H", "H_kv", "N_q", "N_k", "d", "causal", "dtype")}
                rows.append((f, s, r["config_label"], r["measured_ms"]))
    probes = sorted((RESULTS / "acceptance-h100-2026-12-06").glob("configs-h100-run*.json"))
    probes += sorted((RESULTS / "profile-sm90-softmax-h100-2026-12-06").glob("tiles-*-h100-run1.json"))
    for f in probes:
        for r in json.load(open(f))["rows"]:
            if re.match(r"\d+x\d+ c\d s\d", r["impl"]):
                s = H200._shape(r["d"], r["N"], r["B"], r["H"], r.get("causal", False))
                rows.append((f.stem, s, r["impl"].replace(" (pick)", ""), r["median_ms"]))
    return rows, {(lab, s["d"]): _config(lab, s["d"]) for _, s, lab, _ in rows}


def evaluate(rows, configs, point):
    pred = H200.predict(rows, point, gpu="h100-sxm", configs=configs)   # (these rows name unshipped tiles too)
    return pred, *H200.score(rows, pred)


def main():
    rows, configs = load()
    print(len(rows), "rows", flush=True)
    if sys.argv[1] == "grid":
        grid = GRIDS[int(sys.argv[2])]
        for values in itertools.product(*grid.values()):
            point = dict(zip(grid, values))
            print(H200.line(point, *evaluate(rows, configs, point)[1:]), flush=True)
        return
    point = dict(zip(SHIPPED, map(float, sys.argv[2:8]))) if len(sys.argv) > 2 else SHIPPED
    pred, err, regrets = evaluate(rows, configs, point)
    print(H200.line(point, err, regrets))
    for r, (src, key) in sorted(regrets, reverse=True):
        if r > 0:
            s = json.loads(key)
            print(f"  regret {r * 100:4.1f}%  {src[:36]:36} d{s['d']} N{s['N_q']}{' causal' if s['causal'] else ''}")


if __name__ == "__main__":
    main()
