"""Probe: the wgmma forward's masks (SM90_MASK in kernels/csrc/flash_fwd_sm90.cuh: 0 every score's column compared,
1 each row's bounds once, 2 a bit mask a row).  `check`: each build's O and LSE bit for bit the shipped build's (a
mask changes no kept score) over causal, window, key-tail and N_q != N_k shapes of every head dim.  `time`: the
launcher's picks and schedules under each build, one interleaved group a shape.
Run from the repository root: PYTHONPATH=. python3 <this file> check|time [run] -> $OUT/<mode>-run<run>.json"""
import sys

import torch

from kernels import compile as kcompile, flash_sm90
from kernels.window import Window, window as canonical_window
from validation import probe_record
from validation.timing import CudaEventTimer

MODE = sys.argv[1] if len(sys.argv) > 1 else "check"
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
BUILDS = {"mask 0 (shipped)": (), "mask 1": ("SM90_MASK=1",), "mask 2": ("SM90_MASK=2",)}
CHECKS = [  # (d, H, H_kv, B, N_q, N_k, causal, window (left, right) or None)
    (64, 4, 4, 2, 1000, 1000, True, None), (128, 4, 2, 2, 700, 1500, True, None),
    (128, 4, 4, 1, 1500, 700, True, None),
    (128, 4, 4, 2, 2000, 2000, True, (300, 0)), (96, 6, 6, 1, 1777, 1777, False, (-1, 37)),
    (32, 8, 8, 1, 1000, 1000, False, None), (256, 2, 2, 1, 1000, 1000, True, None),
    (192, 2, 2, 1, 999, 1234, True, None),
    (64, 4, 4, 1, 4096, 4096, True, (1000, 0)), (128, 4, 4, 1, 3000, 3000, False, (200, 300))]
TIMES = [  # (d, H, B, N, causal, window left or None)
    (64, 32, 16, 1024, True, None), (128, 16, 16, 1024, True, None), (128, 16, 4, 4096, True, None),
    (128, 16, 1, 16384, True, None), (128, 16, 1, 32768, True, 4096), (128, 16, 4, 8192, True, 1024),
    (128, 16, 4, 4000, False, None), (256, 8, 4, 2048, True, None)]


def calls(s, window):
    """The pick's launch under each build: (config, [(label, callable)], [module builders])."""
    cfg, base = probe_record.sm90_launch(s, window)
    builds = [(lambda df: lambda: flash_sm90.module(cfg, "bf16", s["causal"], df, local=window is not None))(
        (*base, *extra)) for extra in BUILDS.values()]
    return cfg, [(lab, (lambda df: lambda q, k, v: flash_sm90.attention(
        q, k, v, causal=s["causal"], config=cfg, window=window, return_lse=True, _defines=df))((*base, *extra)))
                 for lab, extra in BUILDS.items()], builds


def planned(shapes):
    """Each shape's calls, every build compiled first (concurrently)."""
    made = [calls(s, win) for s, win in shapes]
    kcompile.precompile([b for _, _, builds in made for b in builds])
    return [(cfg, fns) for cfg, fns, _ in made]


def check():
    rows, shapes = [], []
    for d, H, H_kv, B, N_q, N_k, causal, w in CHECKS:
        canon = canonical_window(w or (-1, -1), causal)   # as kernels.run calls the launcher
        shapes.append(({"B": B, "H": H, "H_kv": H_kv, "N_q": N_q, "N_k": N_k, "d": d, "dtype": "bf16",
                        **canon.shape_fields()}, canon if canon.local else None))
    for (d, H, H_kv, B, N_q, N_k, causal, w), (cfg, fns) in zip(CHECKS, planned(shapes)):
        g = torch.Generator(device="cuda")
        g.manual_seed(4099 * RUN + d + N_q)
        q = torch.randn(B, H, N_q, d, generator=g, device="cuda").to(torch.bfloat16)
        k, v = (torch.randn(B, H_kv, N_k, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(2))
        o0, l0 = fns[0][1](q, k, v)
        for lab, f in fns[1:]:
            o, lse = f(q, k, v)
            same = torch.equal(o, o0) and torch.equal(lse, l0)
            rows.append({"d": d, "H": H, "H_kv": H_kv, "B": B, "N_q": N_q, "N_k": N_k, "causal": causal, "window": w,
                         "config": cfg.name, "impl": lab, "bit_equal": same})
            print(f"d{d} {N_q}x{N_k} causal {causal} window {w} {cfg.name} {lab}: {'equal' if same else 'DIFFERS'}",
                  flush=True)
    probe_record.write(f"check-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-mask-"
                       f"h200-2026-11-29/probe_mask.py check {RUN}")
    if not all(r["bit_equal"] for r in rows):
        raise SystemExit("a mask build's output differs from the shipped one's")


def time_builds():
    rows, shapes = [], []
    for d, H, B, N, causal, left in TIMES:
        win = Window(left, 0) if left is not None else None
        s = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
        shapes.append(({**s, **(win.shape_fields() if win is not None else {})}, win))
    for (d, H, B, N, causal, left), (cfg, fns) in zip(TIMES, planned(shapes)):
        sets = probe_record.random_sets(B, H, N, d, seed=5903 * RUN + d + N)
        got = probe_record.timed_rows(CudaEventTimer(), [(lambda f: lambda q, k, v: f(q, k, v)[0])(f) for _, f in fns],
                                      [lab for lab, _ in fns], sets, rounds=9, d=d, H=H, B=B, N=N, causal=causal,
                                      left=left, config=cfg.name)
        base = got[0]["median_ms"]
        print(f"d{d} N{N} B{B} {'causal' if causal else 'plain'} window {left} {cfg.name}: " + "  ".join(
            f"{r['impl']} {r['median_ms']:.4f} ({r['median_ms'] / base:.3f})" for r in got), flush=True)
        rows += got
    probe_record.write(f"time-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-mask-"
                       f"h200-2026-11-29/probe_mask.py time {RUN}")


if __name__ == "__main__":
    {"check": check, "time": time_builds}[MODE]()
