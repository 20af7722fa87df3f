"""The tail split's piece count at d = 128 without a mask (N = 4096: the model picks 3; 8192: 5), from the CTA
timelines (bwd_probe.timeline: %globaltimer spans, the idle tail's share) of each count in turn, 4 rounds,
the median span a count.  Run from the repository root with PYTHONPATH=.; writes $OUT/pieces.json."""
import json, os, statistics, time

import torch

from validation import probe_record

probe = probe_record.load(probe_record.BWD_SM90_PROBE, "none")   # it runs its modes at import: none of them

OUT = os.environ.get("OUT", "/tmp/out")
rows = []
for shape in ((4, 16, 4096, 128, False), (2, 16, 8192, 128, False)):
    counts = (1, 2, 3, 4, 5, 6, 8)
    spans = {p: [] for p in counts}
    tails = {p: [] for p in counts}
    for rnd in range(4):
        for p in counts:
            r = probe.timeline(*shape, pieces=p)
            spans[p].append(r["span_us"])
            tails[p].append(r["share_tail_idle"])
    for p in counts:
        row = {"shape": list(shape), "pieces": p, "span_us": spans[p], "span_us_median": statistics.median(spans[p]),
               "tail_idle_median": statistics.median(tails[p])}
        rows.append(row)
        print(shape[2], p, f"{row['span_us_median']:.1f} us", f"tail {row['tail_idle_median']:.4f}", flush=True)
json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "script": "pieces_probe.py", "rows": rows}, open(f"{OUT}/pieces.json", "w"), indent=1)
