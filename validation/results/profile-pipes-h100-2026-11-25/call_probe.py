"""One attention call for Nsight Compute, after three warm-up calls (bf16, no mask): `IMPL B H N D [CONFIG]` with
IMPL one of sm80 (the mma.sync forward; CONFIG BMxBN,WARPS,STAGES), sm90 (the wgmma forward; CONFIG
BMxBN,STAGES,CONSUMERS), fa2 (SDPA flash), cudnn (SDPA cuDNN); without CONFIG the model's pick.  Run from the
repository root under ncu (run.sh beside this file has the commands):
PYTHONPATH=. python3 validation/results/profile-pipes-h100-2026-11-25/call_probe.py sm80 2 8 8192 192 128x64,8,2"""
import sys
import torch
import kernels
from validation.peers import peer_runners

impl, B, H, N, d = sys.argv[1], *map(int, sys.argv[2:6])
cfg = None
if len(sys.argv) > 6:
    bm, bn = map(int, sys.argv[6].split(",")[0].split("x"))
    a, b = map(int, sys.argv[6].split(",")[1:3])
    if impl == "sm80":
        from iomodel.families.flash_sm80 import FlashConfig
        cfg = FlashConfig(bm, bn, a, b, d)
    else:
        from iomodel.families.flash_sm90 import Sm90Config
        cfg = Sm90Config(bm, bn, a, d, b)
g = torch.Generator(device="cuda")
g.manual_seed(d + N)
q, k, v = (torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
peers = peer_runners(torch)
call = {"sm80": lambda: kernels.run("flash_sm80", q, k, v, config=cfg),
        "sm90": lambda: kernels.run("flash_sm90", q, k, v, config=cfg),
        "fa2": lambda: peers["sdpa_flash"][0](q, k, v, False),
        "cudnn": lambda: peers["sdpa_cudnn"][0](q, k, v, False)}[impl]
for _ in range(4):
    call()
torch.cuda.synchronize()
