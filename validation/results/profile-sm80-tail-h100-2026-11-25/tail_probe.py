"""Probe: the mma.sync forward's tail split (kernels/flash_sm80.py, _Split) against the same config's plain grid
and SDPA flash (FlashAttention-2), in one interleaved group a shape (the harness's timer: 7 rounds, 0.1 s lead-in,
3 input sets), outputs checked against SDPA flash first, at the named non-causal shapes the split changes:
d = 64 N = 32768 B1 H32 (8192 tiles over 264 slots, 31.03 waves) and d = 256 N = 8192 B2 H8 (where the model
now picks 64x64 s1 split in 5 over 128x96 w8 s1, which has no split), and d = 64 N = 1024 B16 (no split) as a
control.  Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-sm80-tail-h100-2026-11-25/tail_probe.py"""
import sys, time, torch
import kernels.flash_sm80 as kfs
from iomodel import api, families
from iomodel.families.flash_sm80 import FlashConfig
from validation.timing import CudaEventTimer
from validation.peers import peer_runners
from validation import probe_record

peers = peer_runners(torch)
timer = CudaEventTimer()
fam = families.get("flash_sm80")
SHAPES = [  # (d, H, N, B, configs)
    (64, 32, 32768, 1, [FlashConfig(128, 128, 4, 1, 64)]),
    (256, 8, 8192, 2, [FlashConfig(64, 64, 4, 1, 256), FlashConfig(128, 96, 8, 1, 256)]),
    (64, 32, 1024, 16, [FlashConfig(128, 128, 4, 1, 64)]),
]
plain_split = kfs.tail_split
rows, t0 = [], time.time()
for d, H, N, B, cfgs in SHAPES:
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": False, "dtype": "bf16"}
    g = torch.Generator(device="cuda")
    g.manual_seed(d + N)
    sets = [tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
            for _ in range(3)]
    fa2 = lambda q, k, v: peers["sdpa_flash"][0](q, k, v, False)
    ref = fa2(*sets[0]).float()
    fns, labels, extra = [], [], []
    for c in cfgs:
        for split in (True, False):
            kfs.tail_split = plain_split if split else (lambda blocks, slots, steps: 1)
            run = kfs.plan(*sets[0], False, c)
            kfs.tail_split = plain_split
            f = (lambda run: lambda q, k, v: run(q, k, v)[0])(run)
            err = (f(*sets[0]).float() - ref).abs().max().item()
            if err > 0.05:
                raise SystemExit(f"{c} split={split}: max abs diff {err}")
            pieces = run.split.pieces if run.split else 1
            fns.append(f)
            labels.append(f"{fam.label(c)} {'split ' + str(pieces) if pieces > 1 else 'plain'}")
            extra.append({"pieces": pieces, "max_abs_diff_vs_fa2": err,
                          "predicted_ms": api.predict("flash_sm80", "h100-sxm", shape, c).time_s * 1e3 if split else None})
    fns.append(fa2)
    labels.append("sdpa_flash")
    extra.append({})
    timed = probe_record.timed_rows(timer, fns, labels, sets, rounds=7, d=d, N=N, B=B, H=H, causal=False)
    rows += [{**r, **e} for r, e in zip(timed, extra)]
    print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)

probe_record.write("tail.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm80-tail-h100-2026-11-25/tail_probe.py")
print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H"), lambda r: r["impl"] == "sdpa_flash")))
