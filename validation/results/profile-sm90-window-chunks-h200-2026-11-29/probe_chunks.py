"""Probe: why the (4096, 0) window's chunks run slower than other launches' chunks of the same config (d = 128,
128x128 c2 s3; ../profile-tiles-h100-2026-11-24/ found 1.605 us a chunk against 1.436 without a mask on the H100).
`tiles`: per-tile timelines (IOM_FWD90_TILE_TIMES, the third launch of each, three passes over the launches) of
the window at N = 32768 (its static walk and the claims), the same tiles' config causal, without a mask (no
clusters) and as a window that cuts nothing (the window kernel at N = 4096, B8), and full causal at N = 32768.
`times`: the window's launch with its walk's sections of 1 to 16 heads and the claims, timed in one interleaved
group beside full causal at the same config.
`peers`: the launcher's window pick at d = 128, 96 and 64 (N = 32768), its static walk (shipped), the claims and
the static walk in sections of 1 and 8 heads, checked against float32, timed in one interleaved group a head dim
beside FlashAttention-4 (where it imports).
`loop`: d = 128 windows (128x128 s3, the launcher's schedule) built as shipped (the stale max, alpha late), with the
causal kernel's loop (eager, alpha first: SM90_STALE_LOCAL=0 SM90_ALPHA_LOCAL=1) and eager alone, one interleaved
group a window (each checked against float32).
`power`: windows at d = 128 and 64, the launcher's schedule (from run 1 on, its sections of two heads), the old one
section of all heads and FlashAttention-4, timed in one interleaved group a window and then each run back to back
for 1 s three times under nvidia-smi (the power probe's `sampled`: SM clock and power).
`sections`: the launcher's window pick at several windows, its static walk in sections of 1 head to all of them and
the claims, timed in one interleaved group a shape (each output bit for bit the shipped one's, which is checked
against float32 first); `sections wide` the same above d = 128 (the static walk without the switch, the claims
with WIDE_DYNAMIC).  "shipped" is the launcher's schedule at the time of the run: one section of all heads in runs
1 and 2, WINDOW_SECTION_KV_HEADS' from run 3 on.
Run from the repository root: PYTHONPATH=. python3 <this file> [tiles|times] [run]  -> $OUT/<mode>-run<run>.json"""
import sys
import time

import numpy as np
import torch

from iomodel.families.flash_sm90 import Sm90Config
from kernels import compile as kcompile, flash_sm90
from kernels.sm90_schedule import STATIC_SCHEDULE
from kernels.window import Window
from validation import probe_record
from validation.plan import make_shape
from validation.timing import CudaEventTimer

MODE = sys.argv[1] if len(sys.argv) > 1 else "tiles"
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
CFG = Sm90Config(128, 128, 3, 128, 2)
TT = "IOM_FWD90_TILE_TIMES"
W = Window(4096, 0)
# label: (B, H, N, causal, window, defines (None: the launcher's), sections)
LAUNCHES = {
    "window N32768 static": (1, 16, 32768, True, W, (STATIC_SCHEDULE,), None),
    "window N32768 claims": (1, 16, 32768, True, W, (), None),
    "window N4096 (cuts nothing)": (8, 16, 4096, True, W, (), None),
    "causal N4096": (8, 16, 4096, True, None, (), None),
    "plain N4096 (no cluster)": (8, 16, 4096, False, None, (), None),
    "causal N32768": (1, 16, 32768, True, None, (), None),
}


def window_shape(d, H, B, N, left) -> dict:
    """The model's causal shape of B*N tokens and H*d width with a (left, 0) window's fields."""
    return {**make_shape(N, d, True, tokens=B * N, hidden=H * d), **Window(left, 0).shape_fields()}


def call(B, H, N, causal, window, defines, sections, extra=()):
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=CFG, window=window, return_lse=True,
                                                _defines=tuple(defines) + tuple(extra), _sections=sections)


def precompile(extra):
    jobs = {(ca, w is not None, tuple(df) + tuple(extra)) for (_, _, _, ca, w, df, _) in LAUNCHES.values()}
    kcompile.precompile([(lambda ca, lo, df: lambda: flash_sm90.module(CFG, "bf16", ca, df, local=lo))(*j)
                         for j in jobs])


def timeline(L, B, H, N) -> dict:
    """The tiles' phases from the LSE buffer the tile-times build writes (8 int64 a tile at its first row)."""
    raw = L.view(torch.int64).view(-1).cpu().numpy()
    num_m = -(-N // CFG.block_m)
    idx = np.array([(bh * N + m * CFG.block_m) // 2 for bh in range(B * H) for m in range(num_m)])
    sm, t1, t2, t3, t4, t5, nb, own = np.stack([raw[idx + i] for i in range(8)], axis=1).T
    ok = (t5 > 0) & (own > 1)
    sm, t1, t2, t3, t4, t5, nb, own = (x[ok] for x in (sm, t1, t2, t3, t4, t5, nb, own))
    span = t5.max() - t1.min()
    gaps = []
    for s_ in np.unique(sm):
        i = np.where(sm == s_)[0]
        i = i[np.argsort(t1[i])]
        gaps += list(t1[i[1:]] - t5[i[:-1]])
    tot = span * len(np.unique(sm))
    per_chunk = (t4 - t3) / (own - 1)
    return {"tiles": int(ok.sum()), "span_us": span / 1e3, "own_mean": float(own.mean()),
            "first_chunk_us": float(np.median(t3 - t2)) / 1e3, "body_us_per_chunk": float(np.median(per_chunk)) / 1e3,
            "body_us_per_chunk_p10": float(np.percentile(per_chunk, 10)) / 1e3,
            "body_us_per_chunk_p90": float(np.percentile(per_chunk, 90)) / 1e3,
            "epilogue_us": float(np.median(t5 - t4)) / 1e3, "gap_us": float(np.median(gaps)) / 1e3,
            "share_body": float((t4 - t3).sum()) / tot, "share_first": float((t3 - t2).sum()) / tot,
            "share_epilogue": float((t5 - t4).sum()) / tot, "share_gaps": float(np.sum(gaps)) / tot}


def tiles():
    precompile((TT,))
    inputs = {lab: probe_record.random_sets(B, H, N, 128, seed=7 + N + B, sets=1)[0]
              for lab, (B, H, N, *_) in LAUNCHES.items()}
    got = {lab: [] for lab in LAUNCHES}
    for _ in range(3):
        for lab, (B, H, N, *rest) in LAUNCHES.items():
            fn = call(B, H, N, *rest, extra=(TT,))
            for _ in range(3):
                _, L = fn(*inputs[lab])
            torch.cuda.synchronize()
            got[lab].append(timeline(L, B, H, N))
    rows = []
    for lab, runs in got.items():
        row = {"impl": lab, **{k: float(np.median([r[k] for r in runs])) for k in runs[0]}}
        rows.append(row)
        print(f"{lab:30s} chunk {row['body_us_per_chunk']:.3f} us (p10 {row['body_us_per_chunk_p10']:.3f} p90 "
              f"{row['body_us_per_chunk_p90']:.3f})  first {row['first_chunk_us']:.3f}  epi {row['epilogue_us']:.3f} "
              f"gap {row['gap_us']:.3f}  body {row['share_body']:.3f}  span {row['span_us']:.1f}", flush=True)
    probe_record.write(f"tiles-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-window-"
                       f"chunks-h200-2026-11-29/probe_chunks.py tiles {RUN}", config=CFG.name)


def times():
    t0 = time.time()
    base = LAUNCHES["window N32768 static"]
    variants = {"window static (launcher's sections)": base}
    for sec in (1, 4, 8, 16):
        variants[f"window static sections {sec}"] = (*base[:6], sec)
    variants["window claims"] = LAUNCHES["window N32768 claims"]
    variants["causal N32768"] = LAUNCHES["causal N32768"]
    precompile(())
    print(f"builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    sets = probe_record.random_sets(1, 16, 32768, 128, seed=977 + RUN)
    ref = call(*base)(*sets[0])[0]
    fns, labels = [], []
    for lab, v in variants.items():
        fn = call(*v)
        err = ((fn(*sets[0])[0].float() - ref.float()).abs().max()).item()
        if lab.startswith("window") and err > 1e-2:
            raise SystemExit(f"{lab}: off the launcher's output by {err}")
        fns.append((lambda f: lambda q, k, v: f(q, k, v)[0])(fn))
        labels.append(lab)
    rows = probe_record.timed_rows(CudaEventTimer(), fns, labels, sets, rounds=7, d=128, N=32768, B=1, H=16)
    for r in rows:
        print(f"{r['impl']:40s} {r['median_ms']:.4f} ms (min {r['min_ms']:.4f})", flush=True)
    probe_record.write(f"times-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-window-"
                       f"chunks-h200-2026-11-29/probe_chunks.py times {RUN}", config=CFG.name)


def peers():
    from iomodel import chooser
    from validation.peers import peer_runners
    fa4, rows = peer_runners(torch)["fa4"][0], []
    for d, H in ((128, 16), (96, 21), (64, 32)):
        cfg = chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), window_shape(d, H, 1, 32768, W.left)).config
        builds = {"static (shipped)": ((STATIC_SCHEDULE,), None), "claims": ((), None),
                  "static sections 1": ((STATIC_SCHEDULE,), 1), "static sections 8": ((STATIC_SCHEDULE,), 8)}
        kcompile.precompile([(lambda df: lambda: flash_sm90.module(cfg, "bf16", True, df, local=True))(df)
                             for df, _ in builds.values()])
        fns = [(f"{cfg.name} {lab}", (lambda df, sec: lambda q, k, v: flash_sm90.attention(
            q, k, v, causal=True, config=cfg, window=W, _defines=df, _sections=sec))(df, sec))
               for lab, (df, sec) in builds.items()]
        if fa4 is not None:
            fns.append(("fa4", lambda q, k, v: fa4(q, k, v, True, window_size=(W.left, 0))))
        sets = probe_record.random_sets(1, H, 32768, d, seed=104729 + 1000 * RUN + d)
        err = probe_record.reference_errors(fns, *sets[0], True, f"d{d}", window_size=(W.left, 0))
        got = probe_record.timed_rows(CudaEventTimer(), [f for _, f in fns], [lab for lab, _ in fns], sets, rounds=9,
                                      d=d, N=32768, B=1, H=H)
        for r in got:
            r["rel_err"] = err[r["impl"]]
            print(f"d{d} {r['impl']:40s} {r['median_ms']:.4f} ms (min {r['min_ms']:.4f})", flush=True)
        rows += got
    probe_record.write(f"peers-run{RUN}.json", rows, "PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages "
                       "python3 validation/results/profile-sm90-window-chunks-h200-2026-11-29/probe_chunks.py "
                       f"peers {RUN}", fa4=getattr(fa4, "version", None))


SECTION_SHAPES = [  # (d, H, B, N, left)
    (128, 16, 1, 32768, 4096), (96, 21, 1, 32768, 4096), (64, 32, 1, 32768, 4096), (128, 16, 2, 16384, 2048),
    (128, 16, 4, 8192, 1024), (64, 32, 2, 16384, 8192)]
WIDE_SHAPES = [(192, 10, 1, 32768, 4096), (256, 8, 2, 16384, 2048), (256, 8, 1, 32768, 4096)]
WIDE = len(sys.argv) > 3 and sys.argv[3] == "wide"


def build_defines(d):
    """(static walk, claims) defines at head dim d."""
    from kernels.sm90_schedule import DYNAMIC_MAX_HEAD_DIM, WIDE_DYNAMIC

    return ((STATIC_SCHEDULE,), ()) if d <= DYNAMIC_MAX_HEAD_DIM else ((), (WIDE_DYNAMIC,))


def section_group(d, H, B, N, left):
    from iomodel import chooser
    from validation.reference import attention_reference

    win = Window(left, 0)
    s = window_shape(d, H, B, N, left)
    cfg = chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), s).config
    secs = sorted({1, 2, 4, 8, 16, B * H} & set(range(1, B * H + 1)))
    static, claims = build_defines(d)
    builds = {"shipped": (None, None), "claims": (claims, None),
              **{f"static sections {c}": (static, c) for c in secs}}
    fns = [(f"{cfg.name} {lab}", (lambda df, sec: lambda q, k, v: flash_sm90.attention(
        q, k, v, causal=True, config=cfg, window=win, _defines=df, _sections=sec))(df, sec))
           for lab, (df, sec) in builds.items()]
    sets = probe_record.random_sets(B, H, N, d, seed=7919 * RUN + d + N + left)
    ref = attention_reference(*sets[0], True, window_size=(left, 0))[0]
    base = fns[0][1](*sets[0])
    err = ((base.float() - ref).abs().max() / ref.abs().max()).item()
    del ref
    same = all(torch.equal(f(*sets[0]), base) for _, f in fns[1:])
    if err > 1e-2 or not same:
        raise SystemExit(f"d{d} N{N} ({left}, 0): off float32 by {err}, every build the same output: {same}")
    rows = probe_record.timed_rows(CudaEventTimer(), [f for _, f in fns], [lab for lab, _ in fns], sets, rounds=7,
                                   d=d, N=N, B=B, H=H, left=left, rel_err=err)
    for r in rows:
        print(f"d{d} N{N} B{B} ({left}, 0) {r['impl']:36s} {r['median_ms']:.4f} ms (min {r['min_ms']:.4f})",
              flush=True)
    return rows


def sections():
    from iomodel import chooser

    shapes = WIDE_SHAPES if WIDE else SECTION_SHAPES
    cfgs = {chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), window_shape(d, H, B, N, left)).config
            for d, H, B, N, left in shapes}
    kcompile.precompile([(lambda c, df: lambda: flash_sm90.module(c, "bf16", True, df, local=True))(c, df)
                         for c in cfgs for df in build_defines(c.head_dim)])
    rows = []
    for shape in shapes:
        rows += section_group(*shape)
    wide = " wide" if WIDE else ""
    probe_record.write(f"sections{wide.replace(' ', '-')}-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/"
                       f"results/profile-sm90-window-chunks-h200-2026-11-29/probe_chunks.py sections {RUN}{wide}")


LOOP_SHAPES = [(16, 1, 32768, 4096), (16, 2, 16384, 2048), (16, 4, 8192, 1024)]   # (H, B, N, left), d = 128
LOOP_BUILDS = {"shipped": (), "eager alpha first": ("SM90_STALE_LOCAL=0", "SM90_ALPHA_LOCAL=1"),
               "eager": ("SM90_STALE_LOCAL=0",)}


def loop():
    kcompile.precompile([(lambda df: lambda: flash_sm90.module(CFG, "bf16", True, df, local=True))(
        (STATIC_SCHEDULE, *extra)) for extra in LOOP_BUILDS.values()])
    rows = []
    for H, B, N, left in LOOP_SHAPES:
        win = Window(left, 0)
        fns = [(lab, (lambda df: lambda q, k, v: flash_sm90.attention(
            q, k, v, causal=True, config=CFG, window=win, _defines=df))((STATIC_SCHEDULE, *extra)))
               for lab, extra in LOOP_BUILDS.items()]
        sets = probe_record.random_sets(B, H, N, 128, seed=6151 * RUN + N + left)
        err = probe_record.reference_errors(fns, *sets[0], True, f"N{N} ({left}, 0)", window_size=(left, 0))
        got = probe_record.timed_rows(CudaEventTimer(), [f for _, f in fns], [lab for lab, _ in fns], sets, rounds=9,
                                      d=128, N=N, B=B, H=H, left=left)
        for r in got:
            r["rel_err"] = err[r["impl"]]
            print(f"N{N} B{B} ({left}, 0) {r['impl']:24s} {r['median_ms']:.4f} ms (min {r['min_ms']:.4f})", flush=True)
        rows += got
    probe_record.write(f"loop-run{RUN}.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-window-"
                       f"chunks-h200-2026-11-29/probe_chunks.py loop {RUN}", config=CFG.name)


POWER_SHAPES = [(128, 16, 1, 32768, 4096), (128, 16, 4, 8192, 1024), (64, 32, 2, 16384, 8192)]   # (d, H, B, N, left)


def power():
    from iomodel import chooser
    from validation.peers import peer_runners

    fa4, rows = peer_runners(torch)["fa4"][0], []
    sampled = probe_record.load(probe_record.POWER_PROBE).sampled
    for d, H, B, N, left in POWER_SHAPES:
        win = Window(left, 0)
        cfg = chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), window_shape(d, H, B, N, left)).config
        fns = [(f"{cfg.name} {lab}", (lambda sec: lambda q, k, v: flash_sm90.attention(
            q, k, v, causal=True, config=cfg, window=win, _sections=sec))(sec))
               for lab, sec in (("shipped", None), ("one section of all heads", B * H))]
        if fa4 is not None:
            fns.append(("fa4", lambda q, k, v: fa4(q, k, v, True, window_size=(left, 0))))
        sets = probe_record.random_sets(B, H, N, d, seed=3571 * RUN + d + N)
        err = probe_record.reference_errors(fns, *sets[0], True, f"d{d} N{N} ({left}, 0)", window_size=(left, 0))
        got = probe_record.timed_rows(CudaEventTimer(), [f for _, f in fns], [lab for lab, _ in fns], sets, rounds=7,
                                      d=d, N=N, B=B, H=H, left=left)
        for r in got:
            r["rel_err"] = err[r["impl"]]
        probe_record.add_sustained(got, fns, sets, sampled)
        for r in got:
            print(f"d{d} N{N} ({left}, 0) {r['impl']:40s} {r['median_ms']:.4f} ms (min {r['min_ms']:.4f})", flush=True)
        print("\n".join(probe_record.sustained_lines(got)), flush=True)
        rows += got
    probe_record.write(f"power-run{RUN}.json", rows, "PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages "
                       "python3 validation/results/profile-sm90-window-chunks-h200-2026-11-29/probe_chunks.py "
                       f"power {RUN}", fa4=getattr(fa4, "version", None))


if __name__ == "__main__":
    {"tiles": tiles, "times": times, "peers": peers, "sections": sections, "loop": loop, "power": power}[MODE]()
