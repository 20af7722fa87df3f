"""Probe: where a head's causal rows do not fill its last 192-row tile (N = 1024: 64 rows), that tile's one
warpgroup with rows walked every chunk of keys alone (8 at N = 1024 with 128-key chunks) while the other two
released them and waited for the next tile's Q.  The shipped build now starts a head's tiles at its last row
(tile_row0 in flash_fwd_sm90.cuh): the short tile is the first, whose rows see one chunk.  The old layout builds
with SM90_BOTTOM_SHORT.  Both beside cuDNN in one interleaved group a shape (the harness's timer, 3 input sets),
outputs checked against cuDNN first; the model's pick at each shape, and at d = 128 (no short tile at these N
with 128-row tiles) the shipped pick as a control.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm90-causal-short-h200-2026-11-28/probe.py"""
import sys, time, torch
from kernels import flash_sm90, compile as kcompile
from iomodel import chooser, families
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
peers = peer_runners(torch)
timer = CudaEventTimer()
FORMS = {"top short (shipped)": (), "bottom short": ("SM90_BOTTOM_SHORT",)}
# (d, H, N, B): N % 192 = 64, 128, 64, 40 at d = 64; d = 96 and 32 take 192-row tiles too; d = 128 control
SHAPES = [(64, 32, 1024, 16), (64, 32, 2048, 8), (64, 32, 4096, 4), (64, 32, 1000, 16), (96, 16, 1024, 16),
          (32, 32, 1024, 16), (128, 16, 1024, 16)]
GPU = "h200-sxm" if "H200" in torch.cuda.get_device_name() else "h100-sxm"


def pick(d, H, N, B):
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": True, "dtype": "bf16"}
    return chooser.choose(["flash_sm90"], GPU, shape)


kcompile.precompile([(lambda c, df: lambda: flash_sm90.module(c, "bf16", True, df))(pick(*s).config, df)
                     for s in SHAPES for df in FORMS.values()])
rows, t0 = [], time.time()
for d, H, N, B in SHAPES:
    choice = pick(d, H, N, B)
    c = choice.config
    sets = probe_record.random_sets(B, H, N, d, seed=7 * d + N)
    cudnn = ("sdpa_cudnn", lambda q, k, v: peers["sdpa_cudnn"][0](q, k, v, True))
    fns = [(lambda df: lambda q, k, v: flash_sm90.attention(q, k, v, causal=True, config=c, _defines=df))(df)
           for df in FORMS.values()]
    labels = [f"{families.get('flash_sm90').label(c)} {name}" for name in FORMS]
    got = probe_record.checked_rows(timer, fns, labels, sets, cudnn, rounds=ROUNDS, d=d, N=N, B=B, H=H, causal=True)
    for r in got:
        if r["impl"] != "sdpa_cudnn":
            r["predicted_ms"] = choice.time_s * 1e3
    rows += got
    print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)

probe_record.write("causal_short.json", rows,
                   "PYTHONPATH=. python3 validation/results/profile-sm90-causal-short-h200-2026-11-28/probe.py")
print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H"), lambda r: r["impl"] == "sdpa_cudnn")))
