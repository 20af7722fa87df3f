"""Probe: the mma.sync forward with its K fragments loaded in the B^T order (each n8 tile's two registers adjacent,
warp_tiles.cuh bt_delta; shipped) against the A order it had (IOM_BT_A_ORDER: ptxas pairs the registers with two
moves an n8 tile), the model's pick at each shape (and d = 256's 64x64 w4 s1), beside SDPA flash in one interleaved
group a shape (the harness's timer: 5 rounds, 0.1 s lead-in, 3 input sets), outputs checked first.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-pipes-h100-2026-11-25/bt_order_probe.py"""
import sys, time
import torch
from iomodel.families.flash_sm80 import FlashConfig
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

BUILDS = {"B^T order": (), "A order": ("IOM_BT_A_ORDER",)}
# (B, H, N, d, causal, extra configs)
SHAPES = [(4, 32, 4096, 64, False, ()), (1, 32, 16384, 64, False, ()), (16, 32, 1024, 64, False, ()),
          (4, 16, 4096, 128, False, ()), (1, 16, 16384, 128, False, ()), (16, 16, 1024, 128, False, ()),
          (4, 16, 4096, 128, True, ()), (2, 8, 8192, 192, False, ()),
          (2, 8, 8192, 256, False, (FlashConfig(64, 64, 4, 1, 256),))]
fa2 = peer_runners(torch)["sdpa_flash"][0]
timer = CudaEventTimer()
t0, rows = time.time(), []
for B, H, N, d, causal, extra in SHAPES:
    sets = probe_record.random_sets(B, H, N, d, seed=1000 * d + N + causal)
    fns, labels = probe_record.sm80_builds(*sets[0], causal, [None, *extra], BUILDS)
    rows += probe_record.checked_rows(timer, fns, labels, sets, ("sdpa_flash", lambda q, k, v: fa2(q, k, v, causal)),
                                      rounds=5, B=B, H=H, N=N, d=d, causal=causal)
    print(f"d{d} N{N} causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
probe_record.write("bt-order.json", rows, "PYTHONPATH=. python3 validation/results/profile-pipes-h100-2026-11-25/bt_order_probe.py")
for line in probe_record.peer_table(rows, ("d", "N", "causal"), lambda r: r["impl"] == "sdpa_flash"):
    print(line)
