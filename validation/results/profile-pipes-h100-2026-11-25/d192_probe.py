"""Probe: the mma.sync forward at d = 192 N = 8192 B2 H8 (bf16, causal and not) after the K fragments' B^T order:
the shipped 128-row configs and FlashAttention-2's tile (128x64 w8 s1, not shipped at d = 192) beside SDPA flash
in one interleaved group a shape (the harness's timer, 5 rounds), outputs checked first, with the model's
prediction of each.  Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-pipes-h100-2026-11-25/d192_probe.py"""
import torch
from iomodel.families.flash_sm80 import FlashConfig
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

fa2 = peer_runners(torch)["sdpa_flash"][0]
timer = CudaEventTimer()
CFGS = [FlashConfig(128, 64, 8, 1, 192), FlashConfig(128, 64, 8, 2, 192), FlashConfig(128, 48, 8, 2, 192),
        FlashConfig(64, 48, 4, 1, 192)]
rows = []
for causal in (False, True):
    B, H, N, d = 2, 8, 8192, 192
    sets = probe_record.random_sets(B, H, N, d, seed=192 + causal)
    shape = dict(B=B, H=H, H_kv=H, N_q=N, N_k=N, d=d, causal=causal, dtype="bf16")
    rows += probe_record.config_rows(timer, "flash_sm80", CFGS, shape, sets,
                                     ("sdpa_flash", lambda q, k, v: fa2(q, k, v, causal)), rounds=5, d=d, N=N,
                                     causal=causal)
probe_record.write("d192.json", rows, "PYTHONPATH=. python3 validation/results/profile-pipes-h100-2026-11-25/d192_probe.py")
for line in probe_record.peer_table(rows, ("d", "N", "causal"), lambda r: r["impl"] == "sdpa_flash"):
    print(line)
