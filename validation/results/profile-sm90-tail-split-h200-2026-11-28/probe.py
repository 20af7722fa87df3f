"""Probe: the wgmma forward's tail split (kernels/flash_sm90.py tail_split; split_item and merge_pieces in
csrc/flash_fwd_sm90.cuh).  `check`: grids whose last round holds a few tiles, split into the model's pieces and
into forced counts, against float32 (O and LSE) and against the same call unsplit; the split twice, bit for bit.
`time R`: each shape's builds and pieces in one interleaved group beside cuDNN (the harness's timer, 3 fresh
input sets, R rounds, outputs checked against cuDNN first); `old` is the kernel built without the split
(SM90_NO_SPLIT), `p1` the new one unsplit.  Run from the repository root:
PYTHONPATH=. python3 <this file> check time 5   -> check.json, split.json"""
import math
import sys
import time

import torch

from iomodel import chooser, families
from iomodel.families.flash_sm90 import Sm90Config
from kernels import compile as kcompile
from kernels import flash_sm90
from validation import probe_record
from validation.peers import peer_runners
from validation.reference import attention_reference
from validation.timing import CudaEventTimer

# (cfg, N_q, N_k, H, group, dtype, pieces): heads so that the tiles fill the SMs once and a few more
CHECKS = [(Sm90Config(128, 176, 2, 128, 2), 4096, 4096, None, 1, torch.bfloat16, (None, 2, 3, 8)),
          (Sm90Config(192, 128, 2, 64, 3), 1000, 3000, None, 4, torch.float16, (None, 5)),   # short tile, key tail, GQA
          (Sm90Config(128, 128, 2, 32, 2), 2048, 2100, None, 1, torch.bfloat16, (None, 4)),
          (Sm90Config(192, 112, 3, 96, 3), 1500, 2048, None, 2, torch.bfloat16, (None, 3)),
          (Sm90Config(128, 112, 2, 192, 2), 2048, 4096, None, 1, torch.bfloat16, (None, 4)),
          (Sm90Config(128, 80, 2, 256, 2), 1024, 2000, None, 1, torch.float16, (None, 5)),
          (Sm90Config(192, 128, 2, 64, 3), 1000, 300, 3, 1, torch.bfloat16, (8,)),   # every tile split, 3 chunks
          ]
# (d, H, N, B) without a mask -> pieces (None: the model's)
TIMES = {(128, 16, 16384, 1): (1, None, 3, 8), (64, 32, 32768, 1): (1, None, 3, 4), (64, 16, 4096, 8): (1, None, 2),
         (128, 16, 8192, 2): (1, None, 3), (256, 8, 8192, 2): (1, None, 3), (192, 10, 8192, 2): (1, None, 2),
         (64, 32, 16384, 1): (1, 4)}
OLD = ("SM90_NO_SPLIT",)


def heads(cfg, N_q, group):
    m = math.ceil(N_q / cfg.block_m)
    return (torch.cuda.get_device_properties(0).multi_processor_count // m // group + 1) * group


def check() -> list[dict]:
    rows = []
    for cfg, N_q, N_k, H, group, dtype, counts in CHECKS:
        H = H or heads(cfg, N_q, group)
        g = torch.Generator(device="cuda")
        g.manual_seed(N_q * 7 + cfg.head_dim)
        q = torch.randn(1, H, N_q, cfg.head_dim, generator=g, device="cuda").to(dtype)
        k, v = (torch.randn(1, H // group, N_k, cfg.head_dim, generator=g, device="cuda").to(dtype) for _ in range(2))
        ref, ref_lse = attention_reference(q, k, v, False, 1 / math.sqrt(cfg.head_dim))
        o1, lse1 = flash_sm90.attention(q, k, v, config=cfg, return_lse=True, _pieces=1)
        for p in counts:
            run = flash_sm90.plan(q, k, v, config=cfg, _pieces=p)
            o, lse = run(q, k, v, True)
            o2, lse2 = run(q, k, v, True)
            row = {"cfg": families.get("flash_sm90").label(cfg), "d": cfg.head_dim, "N_q": N_q, "N_k": N_k, "H": H,
                   "group": group, "dtype": str(dtype), "pieces_asked": p, "pieces": run.pieces,
                   "grid": run.prepared.grid[0], "nan": bool(torch.isnan(o).any() or torch.isnan(lse).any()),
                   "rel_err": ((o.float() - ref).norm() / ref.norm()).item(),
                   "lse_err": (lse - ref_lse).abs().max().item(),
                   "vs_unsplit": (o.float() - o1.float()).abs().max().item(),
                   "lse_vs_unsplit": (lse - lse1).abs().max().item(),
                   "repeat_equal": bool(torch.equal(o, o2) and torch.equal(lse, lse2))}
            rows.append(row)
            print(row, flush=True)
    return rows


def timing(rounds: int) -> list[dict]:
    runners, timer, rows, t0 = peer_runners(torch), CudaEventTimer(), [], time.time()
    cudnn, fam, gpu = runners["sdpa_cudnn"][0], families.get("flash_sm90"), torch.cuda.get_device_name()
    for (d, H, N, B), counts in TIMES.items():
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": False, "dtype": "bf16"}
        cfg = chooser.choose(["flash_sm90"], gpu, shape).config
        fns = [lambda q, k, v: flash_sm90.attention(q, k, v, config=cfg, _defines=OLD)]
        fns += [(lambda p: lambda q, k, v: flash_sm90.attention(q, k, v, config=cfg, _pieces=p))(p) for p in counts]
        sets = probe_record.random_sets(B, H, N, d, seed=13 * N + d)
        model = flash_sm90.plan(*sets[0], config=cfg).pieces
        labels = [f"{fam.label(cfg)} old"] + [f"{fam.label(cfg)} p{p or model}{' model' if p is None else ''}"
                                              for p in counts]
        rows += probe_record.checked_rows(timer, fns, labels, sets, ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, False)),
                                          keep_going=True, rounds=rounds, d=d, N=N, B=B, H=H, causal=False)
        print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return rows


def precompile(args) -> None:
    """Every build the probe launches, 16 at a time."""
    jobs = []
    if "check" in args:
        jobs += [(c, "bf16" if dt == torch.bfloat16 else "fp16", ()) for c, *_, dt, _ in CHECKS]
    if "time" in args:
        gpu = torch.cuda.get_device_name()
        for d, H, N, B in TIMES:
            shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": False, "dtype": "bf16"}
            cfg = chooser.choose(["flash_sm90"], gpu, shape).config
            jobs += [(cfg, "bf16", ()), (cfg, "bf16", OLD)]
    kcompile.precompile([(lambda j: lambda: flash_sm90.module(j[0], j[1], False, j[2]))(j) for j in set(jobs)])


def main():
    args = sys.argv[1:]
    precompile(args)
    cmd = "PYTHONPATH=. python3 validation/results/profile-sm90-tail-split-h200-2026-11-28/probe.py " + " ".join(args)
    if "check" in args:
        probe_record.write("check.json", check(), cmd)
    if "time" in args:
        rows = timing(int(args[args.index("time") + 1]))
        probe_record.write("split.json", rows, cmd)
        print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H"), lambda r: r["impl"] == "sdpa_cudnn")))


if __name__ == "__main__":
    main()
