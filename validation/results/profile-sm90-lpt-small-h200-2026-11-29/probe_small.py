"""Probe: the wgmma forward at d <= 128 against cuDNN and FlashAttention-4 (where it imports), three modes.
* `causal` (default): plain causal, the launcher's dynamic schedule (claims from a counter, heads_per_section's
  sections) against the lpt walk (`_persistent="lpt"`: the fixed walk's build, SM90_STATIC_SCHEDULE, walking
  lpt_order's table in grid_section_heads' sections) and the lpt walk in the claims' sections -> $OUT/causal.json
* `full`: no mask, N = 16384, every config the family offers at the shape -> $OUT/full.json
* `power`: no mask, N = 16384, the chosen config, the fastest other one of full-run1.json, FlashAttention-4 and cuDNN
  run back to back for 1 s each, three times in turn, while nvidia-smi samples the SM clock and power (the power
  probe's `sampled`, ../profile-sm90-power-h200-2026-11-28/probe_power.py) -> $OUT/power.json
* `tiles`: per-tile timelines (IOM_FWD90_TILE_TIMES) of short causal launches, the launcher's schedule (and the
  lpt walk at d = 128), for the model's short causal error -> $OUT/tiles.json
Each variant is checked against cuDNN on the first of 3 fresh input sets, then all are timed in one interleaved
group (the harness's timer).  Run from the repository root: PYTHONPATH=. python3 <this file> [mode] [rounds]"""
import os
import sys
import time

import numpy as np
import torch

from iomodel import chooser, families
from iomodel.families.flash_sm90 import Sm90Config
from kernels import compile as kcompile, flash_sm90, sm90_schedule
from validation import probe_record
from validation.peers import peer_runners
from validation.timing import CudaEventTimer

MODE = sys.argv[1] if len(sys.argv) > 1 else "causal"
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 7
RUN = int(sys.argv[3]) if len(sys.argv) > 3 else 1   # the run: its inputs' seeds and its file's name
CAUSAL = [(64, 32, 1024, 16), (128, 16, 1024, 16), (128, 16, 2048, 8), (64, 32, 4096, 4), (128, 16, 4096, 4),
          (64, 32, 16384, 1), (128, 16, 16384, 1)]   # (d, H, N, B): the sweep's B N = 16384, H d = 2048
FULL = [(64, 32, 16384, 1), (128, 16, 16384, 1)]
TILES = [(256, 8, 1024, 16), (192, 10, 1024, 16), (256, 8, 2048, 8), (128, 16, 1024, 16), (64, 32, 1024, 16)]
STATIC = (sm90_schedule.STATIC_SCHEDULE,)
HERE = os.path.dirname(os.path.abspath(__file__))


def shape_of(d: int, H: int, N: int, B: int, causal: bool) -> dict:
    return {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}


def pick(d: int, H: int, N: int, B: int, causal: bool = True):
    return chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), shape_of(d, H, N, B, causal))


def ours(cfg, causal=True, defines=None, persistent=None, sections=None):
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=cfg, _defines=defines,
                                                _persistent=persistent, _sections=sections)


def claims_sections(cfg, d: int, H: int, N: int, B: int) -> int:
    props = torch.cuda.get_device_properties(0)
    return sm90_schedule.heads_per_section(B, H, H, N, d, 2, props.L2_cache_size, -(-N // cfg.block_m),
                                           props.multi_processor_count, dynamic=True)


def causal_variants(d: int, H: int, N: int, B: int) -> list:
    cfg = pick(d, H, N, B).config
    s = claims_sections(cfg, d, H, N, B)
    return [("shipped", ours(cfg)), ("lpt", ours(cfg, persistent="lpt")),
            (f"lpt s{s}", ours(cfg, persistent="lpt", sections=s))]


def full_variants(d: int, H: int, N: int, B: int) -> list:
    fam = families.get("flash_sm90")
    chosen = pick(d, H, N, B, False).config
    cfgs = fam.offered(fam.shipped, shape_of(d, H, N, B, False))
    return [(("chosen " if c == chosen else "") + fam.label(c), ours(c, False)) for c in cfgs]


def precompile(groups) -> int:
    builds = set()
    for (d, H, N, B), causal in groups:
        if causal:
            cfg = pick(d, H, N, B).config
            builds |= {(cfg, True, ()), (cfg, True, STATIC)}
        else:
            fam = families.get("flash_sm90")
            builds |= {(c, False, ()) for c in fam.offered(fam.shipped, shape_of(d, H, N, B, False))}
    return kcompile.precompile([(lambda c, ca, df: lambda: flash_sm90.module(c, "bf16", ca, df))(*b) for b in builds])


def timed(groups, name: str) -> list:
    runners, timer, rows, t0 = peer_runners(torch), CudaEventTimer(), [], time.time()
    cudnn, fa4 = runners["sdpa_cudnn"][0], runners["fa4"][0]
    print(f"{precompile(groups)} builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    for (d, H, N, B), causal in groups:
        sets = probe_record.random_sets(B, H, N, d, seed=41 * N + d + causal + 1000 * (RUN - 1))
        vs = causal_variants(d, H, N, B) if causal else full_variants(d, H, N, B)
        fns, labels = [f for _, f in vs], [lab for lab, _ in vs]
        if fa4 is not None:
            fns.append(lambda q, k, v, c=causal: fa4(q, k, v, c))
            labels.append("fa4")
        rows += probe_record.checked_rows(timer, fns, labels, sets, ("sdpa_cudnn", lambda q, k, v, c=causal:
                                                                     cudnn(q, k, v, c)),
                                          keep_going=True, rounds=ROUNDS, d=d, N=N, B=B, H=H, causal=causal)
        print(f"d{d} N{N} B{B} causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.write(name, rows, "PYTHONPATH=. python3 validation/results/profile-sm90-lpt-small-h200-2026-11-29/"
                       f"probe_small.py {MODE} {ROUNDS} {RUN}", fa4=getattr(fa4, "version", None))
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "causal"), lambda r: r["impl"] == "sdpa_cudnn")))
    return rows


POWER_ALT = {64: Sm90Config(192, 96, 2, 64, 3), 128: Sm90Config(128, 128, 2, 128, 2)}   # full-run1.json's runners-up


def power() -> list:
    """Sustained time, SM clock and power of each variant of the FULL shapes (module docstring)."""
    probe_power = os.path.join(HERE, "..", "profile-sm90-power-h200-2026-11-28", "probe_power.py")
    sampled = probe_record.load(probe_power).sampled
    runners, rows = peer_runners(torch), []
    cudnn, fa4 = runners["sdpa_cudnn"][0], runners["fa4"][0]
    for d, H, N, B in FULL:
        sets = probe_record.random_sets(B, H, N, d, seed=43 * N + d)
        vs = [("chosen", ours(pick(d, H, N, B, False).config, False)), ("alt", ours(POWER_ALT[d], False)),
              ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, False))]
        vs += [("fa4", lambda q, k, v: fa4(q, k, v, False))] if fa4 is not None else []
        got = {lab: {"d": d, "N": N, "B": B, "H": H, "impl": lab} for lab, _ in vs}
        for _ in range(3):
            for lab, f in vs:
                for key, val in sampled(f, sets, 1.0).items():
                    got[lab].setdefault(f"{key}_runs", []).append(val)
        rows += list(got.values())
    probe_record.write("power.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-lpt-small-h200-"
                       "2026-11-29/probe_small.py power", fa4=getattr(fa4, "version", None))
    for r in rows:
        print(f"d{r['d']} N{r['N']} {r['impl']:10} ms {r['sustained_ms_runs']}  MHz {r['sm_mhz_runs']}  "
              f"W {r['power_w_runs']}")
    return rows


def timeline(d: int, H: int, N: int, B: int, label: str, defines: tuple, persistent) -> dict:
    """One launch's per-tile record (the header's IOM_FWD90_TILE_TIMES slots), summarised: the span, the shares
    of SM time in each phase, gaps between a CTA's tiles and the idle tail, and a least-squares fit of a tile's
    time over its key chunks (a tile's fixed cost and its cost a chunk)."""
    cfg = pick(d, H, N, B).config
    q, k, v = probe_record.random_sets(B, H, N, d, seed=7 * N + d, sets=1)[0]
    for _ in range(3):
        _, L = flash_sm90.attention(q, k, v, causal=True, config=cfg, return_lse=True,
                                    _defines=("IOM_FWD90_TILE_TIMES", *defines), _persistent=persistent)
    torch.cuda.synchronize()
    raw = L.view(torch.int64).view(-1).cpu().numpy()
    num_m = -(-N // cfg.block_m)
    idx = np.array([(bh * N + m * cfg.block_m) // 2 for bh in range(B * H) for m in range(num_m)])
    sm, t1, t2, t3, t4, t5, nb, own = np.stack([raw[idx + i] for i in range(8)], axis=1).T
    ok = t5 > 0
    sm, t1, t2, t3, t4, t5, nb, own = (x[ok] for x in (sm, t1, t2, t3, t4, t5, nb, own))
    start, end, sms = t1.min(), t5.max(), np.unique(sm)
    total = float(end - start) * len(sms)
    gaps, lead = [], []
    for s in sms:
        i = np.where(sm == s)[0]
        i = i[np.argsort(t1[i])]
        gaps += list(t1[i[1:]] - t5[i[:-1]])
        lead.append(t1[i[0]] - start)
    slope, fixed = np.polyfit(own.astype(float), (t5 - t1).astype(float), 1)
    share = lambda a, b: round(float((b - a).sum()) / total, 4)   # noqa: E731
    return {"d": d, "N": N, "B": B, "H": H, "impl": label, "config": families.get("flash_sm90").label(cfg),
            "tiles": int(ok.sum()), "sms": int(len(sms)), "span_us": float(end - start) / 1e3,
            "chunks_mean": float(nb.mean()), "own_chunks_mean": float(own.mean()),
            "tile_us_fixed": float(fixed) / 1e3, "tile_us_per_own_chunk": float(slope) / 1e3,
            "q_wait_us": float(np.median(t2 - t1)) / 1e3, "first_chunk_us": float(np.median(t3 - t2)) / 1e3,
            "body_us_per_chunk": float(np.median((t4 - t3) / np.maximum(own - 1, 1))) / 1e3,
            "epilogue_us": float(np.median(t5 - t4)) / 1e3, "gap_us": float(np.median(gaps)) / 1e3,
            "share_q_wait": share(t1, t2), "share_first": share(t2, t3), "share_body": share(t3, t4),
            "share_epilogue": share(t4, t5), "share_gaps": round(float(np.sum(gaps)) / total, 4),
            "share_lead": round(float(np.sum(lead)) / total, 4),
            "share_tail": round(float(sum(end - t5[sm == s].max() for s in sms)) / total, 4),
            "predicted_ms": pick(d, H, N, B).time_s * 1e3}


def tiles() -> list:
    builds = [(pick(d, H, N, B).config, True, ("IOM_FWD90_TILE_TIMES",)) for d, H, N, B in TILES]
    builds.append((pick(128, 16, 1024, 16).config, True, ("IOM_FWD90_TILE_TIMES", *STATIC)))
    kcompile.precompile([(lambda c, ca, df: lambda: flash_sm90.module(c, "bf16", ca, df))(*b) for b in builds])
    rows = []
    for d, H, N, B in TILES:
        wide = d > sm90_schedule.DYNAMIC_MAX_HEAD_DIM
        rows.append(timeline(d, H, N, B, "lpt" if wide else "shipped", (), "lpt" if wide else None))
        if d == 128:
            rows.append(timeline(d, H, N, B, "lpt", STATIC, "lpt"))
    timer, cudnn = CudaEventTimer(), peer_runners(torch)["sdpa_cudnn"][0]
    for r in rows:   # the same launch without the profile's stores, timed beside cuDNN
        d, H, N, B = r["d"], r["H"], r["N"], r["B"]
        cfg, lpt = pick(d, H, N, B).config, r["impl"] == "lpt"
        got = probe_record.timed_rows(timer, [ours(cfg, persistent="lpt" if lpt else None),
                                              lambda q, k, v: cudnn(q, k, v, True)], ["ours", "sdpa_cudnn"],
                                      probe_record.random_sets(B, H, N, d, seed=3 * N + d), rounds=ROUNDS)
        r["measured_ms"], r["sdpa_cudnn_ms"] = got[0]["median_ms"], got[1]["median_ms"]
        print({k: r[k] for k in ("d", "N", "B", "impl", "span_us", "measured_ms", "predicted_ms", "tile_us_fixed",
                                 "tile_us_per_own_chunk", "share_tail", "share_gaps", "share_lead")}, flush=True)
    probe_record.write("tiles.json", rows, "PYTHONPATH=. python3 validation/results/profile-sm90-lpt-small-h200-"
                       f"2026-11-29/probe_small.py tiles {ROUNDS}")
    return rows


if __name__ == "__main__":
    if MODE == "tiles":
        tiles()
    elif MODE == "power":
        power()
    elif MODE == "full":
        timed([(s, False) for s in FULL], f"full-run{RUN}.json")
    else:
        timed([(s, True) for s in CAUSAL], f"causal-run{RUN}.json")
