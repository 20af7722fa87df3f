"""Per-tile timelines of the Hopper forward (IOM_FWD90_TILE_TIMES): where a tile's time goes.
Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-tiles-h100-2026-11-24/fwd_tiles.py"""
import json, os, time
import numpy as np
import torch
from kernels import flash_sm90
from kernels.window import Window

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)


def tiles(B, H, N, d, causal, window=None, config=None):
    g = torch.Generator(device="cuda").manual_seed(5)
    q, k, v = (torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
    kw = dict(causal=causal, return_lse=True, _defines=("IOM_FWD90_TILE_TIMES",), config=config)
    if window is not None:
        kw["window"] = window
    for _ in range(3):
        out, L = flash_sm90.attention(q, k, v, **kw)
    torch.cuda.synchronize()
    from kernels.dispatch import prepare
    call = prepare(flash_sm90.FAMILY, q, k, v, causal, config, None, window, None)
    bm = call.config.block_m
    raw = L.view(torch.int64).view(-1).cpu().numpy()
    num_m = -(-N // bm)
    idx = np.array([(bh * N + m * bm) // 2 for bh in range(B * H) for m in range(num_m)])
    rec = np.stack([raw[idx + i] for i in range(8)], axis=1)
    sm, t1, t2, t3, t4, t5, nb, own = (rec[:, i] for i in range(8))
    ok = t5 > 0
    sm, t1, t2, t3, t4, t5, nb, own = (x[ok] for x in (sm, t1, t2, t3, t4, t5, nb, own))
    t0, tend = t1.min(), t5.max()
    span = tend - t0
    gaps = []
    for s_ in np.unique(sm):
        i = np.where(sm == s_)[0]
        i = i[np.argsort(t1[i])]
        gaps += list(t1[i[1:]] - t5[i[:-1]])
    nsm = len(np.unique(sm))
    tot = span * nsm
    body_chunks = np.maximum(own - 1, 1)
    r = {"shape": [B, H, N, d, causal, None if window is None else [window.left, window.right]],
         "config": call.config.name if hasattr(call.config, "name") else str(call.config), "tiles": int(ok.sum()),
         "span_us": span / 1e3, "chunks_mean": float(nb.mean()), "own_mean": float(own.mean()),
         "q_wait_us": float(np.median(t2 - t1)) / 1e3, "first_chunk_us": float(np.median(t3 - t2)) / 1e3,
         "body_us_per_chunk": float(np.median((t4 - t3) / body_chunks)) / 1e3,
         "epilogue_us": float(np.median(t5 - t4)) / 1e3, "gap_us": float(np.median(gaps)) / 1e3 if gaps else 0,
         "share_q_wait": float((t2 - t1).sum()) / tot, "share_first": float((t3 - t2).sum()) / tot,
         "share_body": float((t4 - t3).sum()) / tot, "share_epilogue": float((t5 - t4).sum()) / tot,
         "share_gaps": float(np.sum(gaps)) / tot, "share_tail": float(sum(tend - t5[sm == s_].max()
                                                                            for s_ in np.unique(sm))) / tot}
    print(json.dumps({k_: (round(v_, 4) if isinstance(v_, float) else v_) for k_, v_ in r.items()}), flush=True)
    return r


rows = [tiles(16, 16, 1024, 128, True), tiles(16, 32, 1024, 64, True), tiles(1, 16, 32768, 128, True),
        tiles(1, 16, 32768, 128, True, Window(4096, 0)), tiles(4, 16, 4096, 128, False),
        tiles(4, 16, 4096, 128, True)]
json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "rows": rows}, open(f"{OUT}/fwd-tile-timelines.json", "w"), indent=1)
