"""Probe: the mma.sync forward with two groups of warps taking turns at the tensor cores (IOM_FWD_PINGPONG: 8 warps,
3 slots; the switch comes with tried-one-sync-pingpong.patch, README.md) against the shipped loop (two barriers a chunk) and SDPA flash.  First every pingpong
build is checked against a float32 reference at short and odd lengths (N = 33, 80, 1000, causal and not); then each
shape's configs are checked against SDPA flash and timed beside it in one interleaved group (the harness's timer,
5 rounds).  Builds are compiled concurrently first.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm80-pingpong-h200-2026-11-28/pingpong_probe.py"""
import sys, time
import torch
from iomodel.families.flash_sm80 import FlashConfig as F
from validation import probe_record

BASE, PP = {"base": ()}, {"pingpong": ("IOM_FWD_PINGPONG",)}
# (d, N, B, H, causal flags, [(config, builds)]): pingpong builds, then the shipped loop's
PLAN = [
    (192, 8192, 2, 8, (False, True), [(F(128, 64, 8, 3, 192, 1), PP), (F(128, 64, 8, 3, 192), PP),
                                      (F(128, 48, 8, 3, 192, 1), PP), (F(128, 64, 8, 2, 192, 1), BASE),
                                      (F(64, 48, 4, 1, 192, 1), BASE)]),
    (256, 8192, 2, 8, (False, True), [(F(128, 48, 8, 3, 256), PP), (F(128, 32, 8, 3, 256), PP),
                                      (F(64, 64, 4, 1, 256), BASE), (F(128, 96, 8, 1, 256), BASE)]),
    (128, 4096, 4, 16, (False, True), [(F(128, 64, 8, 3, 128), PP), (F(128, 128, 8, 3, 128), PP),
                                       (F(128, 64, 4, 2, 128), BASE)]),
    (64, 4096, 4, 32, (False, True), [(F(128, 64, 8, 3, 64), PP), (F(128, 128, 8, 3, 64), PP),
                                      (F(256, 64, 8, 3, 64), PP), (F(128, 128, 4, 2, 64), BASE),
                                      (F(128, 128, 4, 1, 64), BASE)]),
]


def reference(q, k, v, causal):
    s = torch.einsum("bhnd,bhmd->bhnm", q.float(), k.float()) / q.shape[-1] ** 0.5
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.einsum("bhnm,bhmd->bhnd", s.softmax(-1), v.float())


t0 = time.time()
probe_record.sm80_precompile((cfg, causal, PP["pingpong"]) for d, N, B, H, causals, cfgs in PLAN for causal in (False, True)
                             for cfg, builds in cfgs if builds is PP)
checks, bad = [], 0
for d, _, _, _, _, cfgs in PLAN:
    for N in (33, 80, 1000):
        for causal in (False, True):
            q, k, v = probe_record.random_sets(2, 3, N, d, seed=N * 7 + d + causal, sets=1)[0]
            ref = reference(q, k, v, causal)
            for cfg in (c for c, builds in cfgs if builds is PP):
                fn, _ = probe_record.sm80_build(q, k, v, causal, cfg, PP["pingpong"])
                err = (fn(q, k, v).float() - ref).abs().max().item()
                ok = err < 0.02
                bad += not ok
                checks.append(dict(d=d, N=N, causal=causal, config=str(cfg), max_abs_err=err, ok=ok))
print(f"correctness: {len(checks) - bad} of {len(checks)} pingpong checks passed "
      f"(worst {max(c['max_abs_err'] for c in checks):.4f}): {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
for c in checks:
    if not c["ok"]:
        print("FAILED", c, file=sys.stderr, flush=True)

rows = probe_record.sm80_build_groups(PLAN, seed=2812)
probe_record.write("pingpong.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm80-pingpong-h200-2026-11-28/"
                   "pingpong_probe.py", checks=checks)
for line in probe_record.peer_table([r for r in rows if "error" not in r], ("d", "N", "causal"),
                                    lambda r: r["impl"] == "sdpa_flash"):
    print(line)
