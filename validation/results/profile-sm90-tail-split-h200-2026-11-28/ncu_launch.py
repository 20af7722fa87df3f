"""Five launches of the wgmma forward without a mask at one shape and tail split, for ncu_split.sh:
python3 ncu_launch.py d N H pieces [B]   (B = 1 by default, bf16, the model's tile)."""
import sys

import torch

from iomodel import chooser
from kernels import flash_sm90

d, N, H, pieces = (int(x) for x in sys.argv[1:5])
B = int(sys.argv[5]) if len(sys.argv) > 5 else 1
shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": False, "dtype": "bf16"}
cfg = chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), shape).config
q, k, v = (torch.randn(B, H, N, d, device="cuda").to(torch.bfloat16) for _ in range(3))
for _ in range(5):
    flash_sm90.attention(q, k, v, config=cfg, _pieces=pieces)
torch.cuda.synchronize()
