"""One attention call at d = 256 N = 8192 B2 H8 (bf16, no mask) for Nsight Compute: `ours` (the mma.sync forward,
the model's pick 128x96 w8 s1; `ours BMxBN WARPS STAGES [D]`: that config, at head dim D) or `fa2 [D]` (SDPA
flash), after three warm-up calls (B2 H8 N8192 at every head dim).  Run from the repository root:
PYTHONPATH=. ncu --launch-skip 3 --launch-count 1 -k regex:flash_fwd_kernel --section SpeedOfLight \\
  --section WarpStateStats --section MemoryWorkloadAnalysis_Tables --section InstructionStats --csv \\
  python3 validation/results/profile-sm80-d256-h100-2026-11-25/ncu_probe.py ours   (and fa2)"""
import sys
import torch
import kernels
from validation.peers import peer_runners

which = sys.argv[1]
cfg, d = None, 256
if which == "ours" and len(sys.argv) > 2:
    from iomodel.families.flash_sm80 import FlashConfig

    bm, bn = map(int, sys.argv[2].split("x"))
    d = int(sys.argv[5]) if len(sys.argv) > 5 else 256
    cfg = FlashConfig(bm, bn, int(sys.argv[3]), int(sys.argv[4]), d)
elif which == "fa2" and len(sys.argv) > 2:
    d = int(sys.argv[2])
q, k, v = (torch.randn(2, 8, 8192, d, device="cuda").to(torch.bfloat16) for _ in range(3))
fa2 = peer_runners(torch)["sdpa_flash"][0]
call = (lambda: kernels.run("flash_sm80", q, k, v, config=cfg)) if which == "ours" else (lambda: fa2(q, k, v, False))
for _ in range(4):
    call()
torch.cuda.synchronize()
