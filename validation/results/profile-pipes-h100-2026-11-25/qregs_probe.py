"""Probe: the mma.sync forward at d = 192 N = 8192 B2 H8 (bf16, causal and not) with Q's fragments read into
registers once a tile (IOM_FWD_Q_REGS=1: a warp of one m16 tile, 48 registers; not shipped) against
Q re-read from SMEM every chunk (IOM_FWD_Q_REGS=0, shipped), each config built both ways, beside SDPA flash in
one interleaved group a shape (the harness's timer, 5 rounds), outputs checked first.  Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-pipes-h100-2026-11-25/qregs_probe.py"""
import sys, time
import torch
from iomodel.families.flash_sm80 import FlashConfig
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

BUILDS = {"Q from SMEM": ("IOM_FWD_Q_REGS=0",), "Q in registers": ("IOM_FWD_Q_REGS=1",)}
CFGS = [FlashConfig(128, 64, 8, 2, 192), FlashConfig(128, 64, 8, 1, 192), FlashConfig(64, 48, 4, 1, 192)]
fa2 = peer_runners(torch)["sdpa_flash"][0]
timer = CudaEventTimer()
t0, rows = time.time(), []
for causal in (False, True):
    B, H, N, d = 2, 8, 8192, 192
    sets = probe_record.random_sets(B, H, N, d, seed=1920 + causal)
    fns, labels = probe_record.sm80_builds(*sets[0], causal, CFGS, BUILDS)
    rows += probe_record.checked_rows(timer, fns, labels, sets, ("sdpa_flash", lambda q, k, v: fa2(q, k, v, causal)),
                                      rounds=5, B=B, H=H, N=N, d=d, causal=causal)
    print(f"causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
probe_record.write("qregs.json", rows, "PYTHONPATH=. python3 validation/results/profile-pipes-h100-2026-11-25/qregs_probe.py")
for line in probe_record.peer_table(rows, ("d", "N", "causal"), lambda r: r["impl"] == "sdpa_flash"):
    print(line)
