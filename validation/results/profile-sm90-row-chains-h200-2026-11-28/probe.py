"""Probe: the online softmax's row max and row sum as independent chains (SM90_ROW_CHAINS, flash_fwd_sm90.cuh).
In the shipped build each is one chain a row: nvcc keeps the FADDs in source order (no reassociation without
fast-math), so a 128-key chunk's row sum is 32 dependent FADDs on each warpgroup's softmax, which at d = 64 runs
beside a short S product.  1, 2 and 4 chains a row beside cuDNN in one interleaved group a shape (the harness's
timer, 3 input sets, outputs checked against cuDNN first); the model's pick at each shape.
Builds SM90_ROW_CHAINS, which tried-row-chains.patch (beside this file) adds to kernels/csrc/flash_fwd_sm90.cuh:
`git apply` it first.  Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-sm90-row-chains-h200-2026-11-28/probe.py"""
import sys, time, torch
from kernels import flash_sm90, compile as kcompile
from iomodel import chooser, families
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
peers = peer_runners(torch)
timer = CudaEventTimer()
FORMS = {f"chains {c}": (f"SM90_ROW_CHAINS={c}",) for c in (1, 2, 4)}
# (d, H, N, B, causal)
SHAPES = [(64, 32, 16384, 1, False), (64, 32, 32768, 1, True), (64, 32, 1024, 16, True), (128, 16, 16384, 1, False),
          (256, 8, 8192, 2, True)]
GPU = "h200-sxm" if "H200" in torch.cuda.get_device_name() else "h100-sxm"


def pick(d, H, N, B, causal):
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
    return chooser.choose(["flash_sm90"], GPU, shape)


kcompile.precompile([(lambda c, ca, df: lambda: flash_sm90.module(c, "bf16", ca, df))(pick(*s).config, s[4], df)
                     for s in SHAPES for df in FORMS.values()])
rows, t0 = [], time.time()
for d, H, N, B, causal in SHAPES:
    c = pick(d, H, N, B, causal).config
    sets = probe_record.random_sets(B, H, N, d, seed=11 * d + N)
    cudnn = ("sdpa_cudnn", (lambda ca: lambda q, k, v: peers["sdpa_cudnn"][0](q, k, v, ca))(causal))
    fns = [(lambda df: lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=c, _defines=df))(df)
           for df in FORMS.values()]
    labels = [f"{families.get('flash_sm90').label(c)} {name}" for name in FORMS]
    rows += probe_record.checked_rows(timer, fns, labels, sets, cudnn, rounds=ROUNDS, d=d, N=N, B=B, H=H,
                                      causal=causal)
    print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)

probe_record.write("row_chains.json", rows,
                   "PYTHONPATH=. python3 validation/results/profile-sm90-row-chains-h200-2026-11-28/probe.py")
print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H", "causal"), lambda r: r["impl"] == "sdpa_cudnn")))
