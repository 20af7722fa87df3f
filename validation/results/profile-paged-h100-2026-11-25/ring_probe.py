"""Probe: the decode kernel's ring depth and parts on contiguous and paged caches (pages of 16 and 256), the
shapes where a page of 256 costs most over the contiguous cache. Rings of 5 and 6 slots are not shipped: the
probe widens the family's STAGES for its own configs. One interleaved group a shape, 5 rounds, 3 input sets;
outputs of every row checked against the contiguous cache's at the shipped (64, 4, 4) first.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-paged-h100-2026-11-25/ring_probe.py"""
import sys, time, torch
import iomodel.families.flash_decode_sm80 as fam
from validation.timing import CudaEventTimer
from validation import probe_record
from validation.decode_torch import TorchDecode
from iomodel.families.flash_decode_sm80 import DecodeConfig

fam.STAGES = (2, 3, 4, 5, 6)          # the probe's deeper rings (SMEM: (16 + 2 s 64) 256 B: 200,704 at s = 6)
td = TorchDecode(torch)
timer = CudaEventTimer(max_repeats=200, target_s=0.05)


def shp(B, Nk):
    return {"B": B, "H": 32, "H_kv": 8, "N_q": 1, "N_k": Nk, "d": 128, "causal": True, "dtype": "bf16"}


GROUPS = {
    "B8 N_k 32768 (1 GiB)": (shp(8, 32768), [(64, 4, s, p) for s in (4, 5, 6) for p in (1, 2, 3, 4)]),
    "B8 N_k 8192 (256 MiB)": (shp(8, 8192), [(64, 4, s, p) for s in (4, 5, 6) for p in (1, 2, 3)]),
    "B1 N_k 131072 (512 MiB)": (shp(1, 131072), [(64, 4, s, p) for s in (4, 5, 6) for p in (8, 16, 24)]),
}
PAGES = (16, 256)
rows, checks = [], []
t0 = time.time()
for name, (s, cfgs) in GROUPS.items():
    sets = td.make_inputs(s, PAGES, False, 3, 17)
    x = sets[0][0]
    ref = td.runner("flash_decode_sm80", DecodeConfig(64, 4, 4, 1, 128))(x).float()
    fns, labels = [], []
    for bn, w, st, p in cfgs:
        c = DecodeConfig(bn, w, st, p, 128)
        for page in (None,) + PAGES:
            f = td.runner("flash_decode_sm80", c, page)
            err = (f(x).float() - ref).abs().max().item()
            checks.append({"group": name, "config": f"{bn} w{w} s{st} p{p}", "page": page, "max_abs_diff": err})
            fns.append(f)
            labels.append(f"{bn} w{w} s{st} p{p} {'page ' + str(page) if page else 'contiguous'}")
    f = td.runner("read_floor_decode")
    f(x); fns.append(f); labels.append("read_floor_decode")
    torch.cuda.synchronize()
    rows += probe_record.timed_rows(timer, fns, labels, sets, queue_ahead=True, unit="us", group=name)
    print(f"{name}: {len(fns)} rows, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    del sets, x
    torch.cuda.empty_cache()
probe_record.write("ring-depth.json", rows, "PYTHONPATH=. python3 validation/results/profile-paged-h100-2026-11-25/ring_probe.py",
                   checks=checks)
print("max diff vs contiguous s4 p1:", max(c["max_abs_diff"] for c in checks))
for g in GROUPS:
    base = {r["impl"]: r["median_us"] for r in rows if r["group"] == g}
    print(g)
    for cfg in sorted({k.rsplit(" ", 2)[0] if "page" in k else k.rsplit(" ", 1)[0] for k in base if "floor" not in k}):
        c = base.get(cfg + " contiguous"); p16 = base.get(cfg + " page 16"); p256 = base.get(cfg + " page 256")
        print(f"  {cfg:16} contig {c:7.1f}  p16 {p16:7.1f} ({p16 / c - 1:+.1%})  p256 {p256:7.1f} ({p256 / c - 1:+.1%})")
    print(f"  floor {base['read_floor_decode']:.1f}")
