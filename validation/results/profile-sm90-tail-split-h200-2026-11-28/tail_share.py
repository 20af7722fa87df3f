"""Probe: how much of a no-mask launch its last round leaves idle, unsplit (IOM_FWD90_TILE_TIMES timelines: per SM,
the time from its last tile's end to the launch's), then the split's A/B again over more rounds.  Run from the
repository root: PYTHONPATH=. python3 <this file> 15  (rounds) -> tail-share.json, split-rounds.json"""
import json
import os
import sys
import time

import numpy as np
import torch

from iomodel import chooser, families
from kernels import flash_sm90
from validation import probe_record
from validation.peers import peer_runners
from validation.timing import CudaEventTimer

SHAPES = {(128, 16, 16384, 1): (1, 3, 5), (64, 32, 32768, 1): (1, 2, 3)}


def timeline(B, H, N, d, cfg):
    """Share of SM-time idle after each SM's last tile, and the last round's span over the launch's."""
    g = torch.Generator(device="cuda").manual_seed(5)
    q, k, v = (torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
    for _ in range(3):
        _, L = flash_sm90.attention(q, k, v, config=cfg, return_lse=True, _defines=("IOM_FWD90_TILE_TIMES",), _pieces=1)
    torch.cuda.synchronize()
    raw = L.view(torch.int64).view(-1).cpu().numpy()
    num_m = -(-N // cfg.block_m)
    idx = np.array([(bh * N + m * cfg.block_m) // 2 for bh in range(B * H) for m in range(num_m)])
    sm, t1, t5 = raw[idx], raw[idx + 1], raw[idx + 5]
    t0, tend = t1.min(), t5.max()
    ends = np.array([t5[sm == s].max() for s in np.unique(sm)])
    tile_us = np.median(np.diff(np.sort(t5[sm == sm[0]]))) / 1e3
    return {"d": d, "N": N, "B": B, "H": H, "config": cfg.name, "span_us": (tend - t0) / 1e3, "tile_us": float(tile_us),
            "idle_share": float(np.sum(tend - ends) / ((tend - t0) * len(ends))),
            "sms_done_early": int(np.sum(tend - ends > 0.5 * tile_us * 1e3)),
            "last_tiles_us": float(np.median(t5[t1 >= np.sort(t1)[-(len(t1) % 132 or 132)]] -
                                             t1[t1 >= np.sort(t1)[-(len(t1) % 132 or 132)]]) / 1e3)}


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    gpu, fam = torch.cuda.get_device_name(), families.get("flash_sm90")
    runners, timer, rows, lines = peer_runners(torch), CudaEventTimer(), [], []
    cudnn = runners["sdpa_cudnn"][0]
    for (d, H, N, B), counts in SHAPES.items():
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": False, "dtype": "bf16"}
        cfg = chooser.choose(["flash_sm90"], gpu, shape).config
        lines.append(timeline(B, H, N, d, cfg))
        print(lines[-1], flush=True)
        fns = [(lambda p: lambda q, k, v: flash_sm90.attention(q, k, v, config=cfg, _pieces=p))(p) for p in counts]
        rows += probe_record.checked_rows(timer, fns, [f"{fam.label(cfg)} p{p}" for p in counts],
                                          probe_record.random_sets(B, H, N, d, seed=17 * N + d),
                                          ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, False)), keep_going=True,
                                          rounds=rounds, d=d, N=N, B=B, H=H, causal=False)
    out = os.environ.get("OUT", "/tmp")
    json.dump({"device": gpu, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"), "rows": lines},
              open(f"{out}/tail-share.json", "w"), indent=1)
    probe_record.write("split-rounds.json", rows, "PYTHONPATH=. python3 validation/results/"
                       f"profile-sm90-tail-split-h200-2026-11-28/tail_share.py {rounds}")
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H"), lambda r: r["impl"] == "sdpa_cudnn")))


if __name__ == "__main__":
    main()
