"""Probe, after schedule_probe.py: the fixed list of the non-causal wgmma forward rotated, round k giving CTA i
tile k G + (i + k) mod G, so that a CTA's tiles go round the m_blocks of a head instead of
all taking one (with G = 132 a multiple of the 6, 11 or 22 tiles a head of 192 rows at N = 1024, 2048, 4096,
the CTAs holding the short last tiles idle); each round still covers G adjacent tiles, as the fixed list's.
Against the fixed list and (d <= 128) the dynamic schedule's claims, beside SDPA cuDNN in one interleaved group a
shape (the harness's timer, 7 rounds, 0.1 s lead-in, 3 input sets), outputs checked against cuDNN first.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm90-schedule-h100-2026-11-25/rotate_probe.py"""
import sys, time, torch
from kernels import flash_sm90, compile as kcompile
from iomodel import families
from iomodel.families.flash_sm90 import Sm90Config
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

peers = peer_runners(torch)
timer = CudaEventTimer()
# (run with the rotation unconditional, behind a switch SM90_ROTATE_FULL; the default build since rotates where
# a head's last tile is short, so today its "rotate" rows at d = 128 N = 1024 and d = 256 build the plain walk)
VARIANTS = {"fixed": ("SM90_UNROTATED",), "rotate": (), "dynamic": ("SM90_DYNAMIC_FULL",)}
C = lambda bm, bn, s, d: Sm90Config(block_m=bm, block_n=bn, stages=s, head_dim=d, consumers=bm // 64)
SHAPES = [  # (d, H, N, B, config): the model's picks
    (64, 32, 1024, 16, C(192, 128, 2, 64)),
    (32, 64, 1024, 16, C(192, 128, 3, 32)),
    (64, 32, 2048, 8, C(192, 128, 2, 64)),
    (64, 32, 4096, 4, C(192, 128, 2, 64)),
    (64, 32, 16384, 1, C(192, 128, 2, 64)),
    (128, 16, 1024, 16, C(128, 128, 3, 128)),
    (256, 8, 8192, 2, C(128, 80, 2, 256)),
]
variants = lambda d: {n: df for n, df in VARIANTS.items() if n != "dynamic" or d <= flash_sm90.DYNAMIC_MAX_HEAD_DIM}
kcompile.precompile([(lambda c, df: lambda: flash_sm90.module(c, "bf16", False, df))(c, df)
                     for d, *_, c in SHAPES for df in variants(d).values()])

rows, t0 = [], time.time()
for d, H, N, B, c in SHAPES:
    g = torch.Generator(device="cuda")
    g.manual_seed(7 * d + N)
    sets = [tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
            for _ in range(3)]
    cudnn = ("sdpa_cudnn", lambda q, k, v: peers["sdpa_cudnn"][0](q, k, v, False))
    fns = [(lambda df: lambda q, k, v: flash_sm90.attention(q, k, v, config=c, _defines=df))(df)
           for df in variants(d).values()]
    labels = [f"{families.get('flash_sm90').label(c)} {name}" for name in variants(d)]
    rows += probe_record.checked_rows(timer, fns, labels, sets, cudnn, rounds=7, d=d, N=N, B=B, H=H, causal=False)
    print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)

probe_record.write("rotate.json", rows,
                   "PYTHONPATH=. python3 validation/results/profile-sm90-schedule-h100-2026-11-25/rotate_probe.py")
print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H"), lambda r: r["impl"] == "sdpa_cudnn")))
