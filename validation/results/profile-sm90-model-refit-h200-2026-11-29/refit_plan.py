"""The refit of the flash_sm90 plan (iomodel/families/flash_sm90.py, SM90_PLAN) on the H200, 2026-11-29: the model's
time of every flash_sm90 row measured on the kernel as shipped since f10b083 (the stale row max), against a grid of
the plan's latencies and overlap, with and without the stale max drawn (the diagram's ``stale_max`` where the kernel
keeps one: no mask).  Rows: this folder's configs-run*.json (every config at 20 shapes), picks-run*.json (windows,
a softcap, d = 96 causal at N = 32768; the grids ran with run 1's window rows, which the window kernel's stale max
replaced the same day by run 2's: `show` reads run 2's), the d = 96 / 64 configs of
../profile-sm90-lazy-rescale-h200-2026-11-29/configs-run1.json and the harness's h200-sxm-2026-11-29-sweep-run6 and
shapes-run4 (flash_sm90 rows).  Scores: median and mean |error|, the mean and worst pick regret (the pick's measured
time over the fastest's) over shapes with >= 3 configs the launcher offers (no variant that spills).  No GPU.
From the repository root:
PYTHONPATH=. python3 <this file> grid N          every point of GRIDS[N], a line each
PYTHONPATH=. python3 <this file> show SL SPW SLOPE BLOCK FILL STALE   each shape's rows at one point"""
import dataclasses
import itertools
import json
import pathlib
import sys

import numpy as np

from iomodel import api, families
from iomodel.families import flash_sm90 as F
from iomodel.problems import check_shape

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE.parent
FAM = families.get("flash_sm90")
BASE_DIAGRAM = F._diagram
#: grid 1 (grid1.txt) and, about its best points, grids 2 and 3 (grid2.txt, grid3.txt): `grid N`; grid 4 (grid4.txt)
#: after probe_picks.py's rows joined (a window's pick moved to a tile 4% slower), grid 5 (grid5.txt) about its best
#: point that keeps the window's pick
GRIDS = {1: {"step_latency_cycles": (100.0, 200.0), "step_latency_cycles_per_warp": (40.0, 55.0, 70.0),
             "interleave_slope": (0.5, 0.6), "block_latency_cycles": (0.0, 1500.0, 3000.0), "fill_steps": (2.0, 3.0),
             "stale": (0, 8)},
         2: {"step_latency_cycles": (50.0, 100.0, 150.0), "step_latency_cycles_per_warp": (50.0, 55.0, 60.0),
             "interleave_slope": (0.45, 0.5, 0.55), "block_latency_cycles": (1000.0, 1500.0, 2000.0, 2500.0),
             "fill_steps": (1.5, 2.0, 2.5), "stale": (0, 8)},
         3: {"step_latency_cycles": (25.0, 50.0, 75.0), "step_latency_cycles_per_warp": (50.0, 55.0, 60.0),
             "interleave_slope": (0.4, 0.45), "block_latency_cycles": (500.0, 1000.0, 1500.0), "fill_steps": (2.0,),
             "stale": (8,)},
         4: {"step_latency_cycles": (75.0, 100.0, 150.0, 200.0), "step_latency_cycles_per_warp": (40.0, 55.0),
             "interleave_slope": (0.4, 0.45, 0.5), "block_latency_cycles": (500.0, 1000.0, 1500.0),
             "fill_steps": (2.0,), "stale": (8,)},
         5: {"step_latency_cycles": (125.0, 150.0, 175.0, 200.0), "step_latency_cycles_per_warp": (50.0, 55.0, 60.0),
             "interleave_slope": (0.5, 0.55), "block_latency_cycles": (1000.0, 1500.0, 2000.0), "fill_steps": (2.0,),
             "stale": (8,)}}


def _shape(d, N, B, H, causal):
    return {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": bool(causal), "dtype": "bf16"}


def load():
    """Rows (source, shape, config label, measured ms), our kernel's only."""
    rows = []
    lazy = RESULTS / "profile-sm90-lazy-rescale-h200-2026-11-29/configs-run1.json"
    for f in sorted(HERE.glob("configs-run*.json")) + [lazy]:
        for r in json.load(open(f))["rows"]:
            if r.get("predicted_ms") and r.get("median_ms"):
                s = _shape(r["d"], r["N"], r["B"], r["H"], r.get("causal", False))
                rows.append((f.stem, s, r["impl"], r["median_ms"]))
    for f in sorted(HERE.glob("picks-run*.json")):   # windows, a softcap, d = 96 causal (probe_picks.py)
        for r in json.load(open(f))["rows"]:
            # run 1's windows ran the eager window kernel, replaced the same day by run 2's (the stale max)
            if r.get("predicted_ms") and not (f.stem == "picks-run1" and r["shape"] == "window"):
                s = _shape(r["d"], r["N"], r["B"], r["H"], r["shape"] != "softcap")
                s.update({"window_left": 4096, "window_right": 0} if r["shape"] == "window" else {})
                s.update({"softcap": 30.0} if r["shape"] == "softcap" else {})
                rows.append((f.stem + " " + r["shape"], s, r["impl"], r["median_ms"]))
    for f in ("h200-sxm-2026-11-29-sweep-run6.json", "h200-sxm-2026-11-29-shapes-run4.json"):
        for r in json.load(open(RESULTS / f))["rows"]:
            if r["kernel"] == "flash_sm90" and r.get("ok"):
                s = {k: r["shape"][k] for k in ("B", "H", "H_kv", "N_q", "N_k", "d", "causal", "dtype")}
                rows.append((f, s, r["config_label"], r["measured_ms"]))
    return rows


def _configs():
    return {(FAM.label(c), c.head_dim): c for c in FAM.shipped}


def predict(rows, point, gpu: str = "h200-sxm", configs=None):
    """The model's ms for every row on `gpu` with the plan's fields of `point` and the stale max drawn at `stale`;
    `configs` ({(label, d): config}) names the rows' configs (default: the shipped ones)."""
    stale = point["stale"]
    plan = dataclasses.replace(F.SM90_PLAN, **{k: v for k, v in point.items() if k != "stale"},
                               interleave_max=1 + 2 * point["interleave_slope"])
    object.__setattr__(FAM, "plan", plan)
    object.__setattr__(FAM, "build", lambda causal, gqa: _stale_diagram(causal, gqa, stale))
    api.family_model.cache_clear()
    by_shape, configs = {}, configs or _configs()
    for i, (_, s, label, _) in enumerate(rows):
        by_shape.setdefault(json.dumps(s, sort_keys=True), []).append((i, label))
    out = np.zeros(len(rows))
    for key, items in by_shape.items():
        s = json.loads(key)
        preds = api.rank_configs("flash_sm90", gpu, s, [configs[lab, s["d"]] for _, lab in items],
                                 include_infeasible=True)
        ms = {FAM.label(p.config): p.time_s * 1e3 for p in preds}
        for i, lab in items:
            out[i] = ms[lab]
    return out


def _stale_diagram(causal, gqa, stale):
    """The family's diagram with the stale max drawn at `stale` where the kernel keeps one (no causal mask)."""
    return BASE_DIAGRAM(causal, gqa).with_stale_max(0.0 if causal else stale)


def score(rows, pred):
    meas = np.array([r[3] for r in rows])
    err = pred / meas - 1
    groups = {}
    for i, (src, s, _, _) in enumerate(rows):
        groups.setdefault((src, json.dumps(s, sort_keys=True)), []).append(i)
    regrets = []
    for key, idx in groups.items():
        offered = {FAM.label(c) for c in FAM.shipped_for(check_shape(FAM, json.loads(key[1])))}
        idx = [i for i in idx if rows[i][2] in offered]   # the launcher's candidates (no spilling variant)
        if len(idx) >= 3:
            pick = min(idx, key=lambda i: pred[i])
            regrets.append((meas[pick] / min(meas[i] for i in idx) - 1, key))
    return err, regrets


def line(point, err, regrets):
    worst = max(regrets)
    s = json.loads(worst[1][1])
    return (" ".join(f"{k} {v:g}" for k, v in point.items()) + f": median {np.median(abs(err)) * 100:.2f}% mean "
            f"{np.mean(abs(err)) * 100:.2f}% signed {np.mean(err) * 100:+.2f}% regret mean "
            f"{np.mean([r for r, _ in regrets]) * 100:.2f}% max {worst[0] * 100:.1f}% (d{s['d']} N{s['N_q']}"
            f"{' causal' if s['causal'] else ''})")


def main():
    rows = load()
    print(len(rows), "rows", flush=True)
    if sys.argv[1] == "grid":
        grid = GRIDS[int(sys.argv[2])]
        for values in itertools.product(*grid.values()):
            point = dict(zip(grid, values))
            print(line(point, *score(rows, predict(rows, point))), flush=True)
    else:
        point = dict(zip(GRIDS[1], map(float, sys.argv[2:8])))
        pred = predict(rows, point)
        err, regrets = score(rows, pred)
        print(line(point, err, regrets))
        for r, (src, key) in sorted(regrets, reverse=True):
            if r > 0:
                s = json.loads(key)
                mask = " causal" if s["causal"] else ""
                print(f"  regret {r * 100:4.1f}%  {src[:26]:26} d{s['d']} N{s['N_q']}{mask}")
        for i, (src, s, label, ms) in enumerate(rows):
            print(f"{src[:26]:26} d{s['d']:<3} N{s['N_q']:<5} B{s['B']:<2} {'causal' if s['causal'] else '      '} "
                  f"{label:14} meas {ms:8.4f} pred {pred[i]:8.4f} {err[i] * 100:+6.1f}%")


if __name__ == "__main__":
    main()
