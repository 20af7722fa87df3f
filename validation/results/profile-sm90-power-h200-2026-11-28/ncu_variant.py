"""Five launches of one schedule of variants.py (or "fa4", FlashAttention-4's), for ncu_variants.sh:
python3 ncu_variant.py d H N B label"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import variants  # noqa: E402

from validation import probe_record  # noqa: E402
from validation.peers import peer_runners  # noqa: E402

d, H, N, B = (int(x) for x in sys.argv[1:5])
label = sys.argv[5]
if label == "fa4":
    fa4 = peer_runners(torch)["fa4"][0]
    fn = lambda q, k, v: fa4(q, k, v, True)  # noqa: E731
else:
    fn = dict(variants.variants(d, H, N, B))[label]
q, k, v = probe_record.random_sets(B, H, N, d, seed=5, sets=1)[0]
for _ in range(5):
    fn(q, k, v)
torch.cuda.synchronize()
