"""Device check + benchmark of the mma.sync FlashAttention kernel and the unfused baseline.

Self-contained (torch, cupy, numpy; the repo on PYTHONPATH):

    PYTHONPATH=. python3 validation/gpu_check_kernels.py --out OUTDIR

1. builds every shipped variant (NVRTC through CuPy, concurrently),
2. checks correctness of every shipped config (NaN-poisoned outputs, O and LSE
   against float32 PyTorch) and of the unfused baseline,
3. times every shipped flash config against SDPA's FlashAttention-2 and cuDNN
   backends at bf16, B*N = 16384 tokens, H*d = 2048, N in {1024, 4096, 16384},
   d in {64, 128}, causal and not (CUDA events, warm-up, median of >= 20 runs),
4. writes OUTDIR/kernels_gpu_check.json (all numbers, per config) and prints a
   table last.  TFLOP/s = 4*B*H*N^2*d / t, halved when causal.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def log(*a):
    print(*a, flush=True)


def reference(torch, q, k, v, causal, scale):
    H, H_kv = q.shape[1], k.shape[1]
    qf, kf, vf = q.float(), k.float(), v.float()
    if H != H_kv:
        kf = kf.repeat_interleave(H // H_kv, dim=1)
        vf = vf.repeat_interleave(H // H_kv, dim=1)
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    N_q, N_k = q.shape[2], k.shape[2]
    if causal:
        i = torch.arange(N_q, device=q.device)[:, None]
        j = torch.arange(N_k, device=q.device)[None, :]
        s = s.masked_fill(j > i + (N_k - N_q), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.matmul(torch.softmax(s, dim=-1).nan_to_num(0.0), vf), lse


def rand_qkv(torch, B, H, H_kv, N_q, N_k, d, dtype, mag=1.0, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = (torch.randn(B, H, N_q, d, generator=g, device="cuda") * mag).to(dtype)
    k = (torch.randn(B, H_kv, N_k, d, generator=g, device="cuda") * mag).to(dtype)
    v = torch.randn(B, H_kv, N_k, d, generator=g, device="cuda").to(dtype)
    return q, k, v


def check_all(torch, kernels, quick=False):
    from kernels.configs import SHIPPED_FLASH, SHIPPED_MATMUL

    tol = {torch.bfloat16: 1e-2, torch.float16: 5e-3}
    results = []
    cases = []
    for i, cfg in enumerate(SHIPPED_FLASH):
        dt1 = (torch.bfloat16, torch.float16)[i % 2]
        dt2 = (torch.float16, torch.bfloat16)[i % 2]
        cases += [(cfg, (2, 4, 2, 1000, 1000), False, dt1, 1.0),
                  (cfg, (1, 4, 1, 333, 1029), True, dt2, 1.0),
                  (cfg, (2, 2, 2, 17, 17), True, dt1, 1.0),
                  (cfg, (1, 2, 2, 1029, 333), True, dt1, 20.0)]
        if i % 4 == 0 and not quick:
            cases += [(cfg, (1, 2, 1, 4097, 4097), i % 8 == 0, dt2, 1.0),
                      (cfg, (1, 2, 2, 1, 1), False, dt1, 1.0),
                      (cfg, (1, 2, 2, 1, 4097), True, dt2, 1.0)]
    for cfg, (B, H, H_kv, N_q, N_k), causal, dtype, mag in cases:
        d = cfg.head_dim
        rec = {"kind": "flash", "config": cfg.as_dict(), "shape": [B, H, H_kv, N_q, N_k, d], "causal": causal,
               "dtype": str(dtype).split(".")[-1], "mag": mag}
        try:
            q, k, v = rand_qkv(torch, B, H, H_kv, N_q, N_k, d, dtype, mag)
            o, lse = kernels.flash_attention(q, k, v, causal=causal, config=cfg, return_lse=True)
            torch.cuda.synchronize()
            ref, ref_lse = reference(torch, q, k, v, causal, 1 / math.sqrt(d))
            nan = bool(torch.isnan(o).any() or torch.isnan(lse).any())
            err = ((o.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item() if ref.norm() > 0 else 0.0
            fin = torch.isfinite(ref_lse)
            lse_err = (lse[fin] - ref_lse[fin]).abs().max().item() if fin.any() else 0.0
            inf_ok = bool(torch.equal(torch.isinf(lse), torch.isinf(ref_lse)))
            dead = torch.isinf(ref_lse)
            dead_ok = bool((o.float()[dead] == 0).all()) if dead.any() else True
            ok = (not nan) and err < tol[dtype] and lse_err < 1e-2 + 1e-3 * ref_lse[fin].abs().max().item() \
                and inf_ok and dead_ok
            rec.update(rel_err=err, lse_err=lse_err, nan=nan, inf_ok=inf_ok, dead_rows_zero=dead_ok, ok=ok)
        except Exception as e:  # keep going, report
            rec.update(ok=False, error=f"{type(e).__name__}: {e}")
            if "CUDA" in str(e) or "cuda" in type(e).__name__.lower():
                results.append(rec)
                log("FATAL CUDA error, stopping checks:", rec)
                return results
        results.append(rec)
        if not rec["ok"]:
            log("FAIL", rec)
    for i, cfg in enumerate(SHIPPED_MATMUL):
        for (B, H, H_kv, N_q, N_k, d), causal in (((2, 4, 2, 1000, 1000, 128), True),
                                                   ((1, 2, 1, 17, 333, 64), False),
                                                   ((1, 8, 1, 333, 77, 64), True)):
            dtype = (torch.bfloat16, torch.float16)[i % 2]
            rec = {"kind": "unfused", "config": cfg.as_dict(), "shape": [B, H, H_kv, N_q, N_k, d],
                   "causal": causal, "dtype": str(dtype).split(".")[-1]}
            try:
                q, k, v = rand_qkv(torch, B, H, H_kv, N_q, N_k, d, dtype)
                o = kernels.attention_unfused(q, k, v, causal=causal, config=cfg)
                torch.cuda.synchronize()
                ref, _ = reference(torch, q, k, v, causal, 1 / math.sqrt(d))
                err = ((o.float() - ref).norm() / ref.norm()).item()
                nan = bool(torch.isnan(o).any())
                rec.update(rel_err=err, nan=nan, ok=(not nan) and err < tol[dtype])
            except Exception as e:
                rec.update(ok=False, error=f"{type(e).__name__}: {e}")
            results.append(rec)
            if not rec["ok"]:
                log("FAIL", rec)
    return results


def time_fn(torch, fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in evs:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    ts = sorted(a.elapsed_time(b) * 1e-3 for a, b in evs)
    return ts[len(ts) // 2], ts[0]


def bench(torch, kernels, reps=20, Ns=(1024, 4096, 16384), dims=(64, 128)):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kernels.configs import SHIPPED_FLASH

    rows = []
    for d in dims:
        H = 2048 // d
        for N in Ns:
            B = 16384 // N
            for causal in (False, True):
                q, k, v = rand_qkv(torch, B, H, H, N, N, d, torch.bfloat16, seed=1)
                flops = 4.0 * B * H * N * N * d * (0.5 if causal else 1.0)
                row = {"B": B, "H": H, "N": N, "d": d, "causal": causal, "flops": flops, "ours": {}}
                for cfg in [c for c in SHIPPED_FLASH if c.head_dim == d]:
                    try:
                        t, tmin = time_fn(torch, lambda: kernels.flash_attention(q, k, v, causal=causal, config=cfg),
                                          reps)
                        row["ours"][cfg.short()] = {"config": cfg.as_dict(), "time_s": t, "min_s": tmin,
                                                    "tflops": flops / t / 1e12}
                    except Exception as e:
                        row["ours"][cfg.short()] = {"config": cfg.as_dict(), "error": str(e)}
                for name, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                                      ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
                    try:
                        with sdpa_kernel(backend):
                            t, tmin = time_fn(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                              reps)
                        row[name] = {"time_s": t, "min_s": tmin, "tflops": flops / t / 1e12}
                    except Exception as e:
                        row[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
                # model's choice, when the model is importable
                try:
                    from kernels.flash_sm80 import choose_flash_config

                    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "dtype": "bf16"}
                    row["model_choice"] = choose_flash_config(shape, causal, q.device).short()
                except Exception as e:
                    row["model_choice"] = None
                    row["model_error"] = f"{type(e).__name__}: {e}"[:300]
                good = {k2: v2 for k2, v2 in row["ours"].items() if "time_s" in v2}
                if good:
                    best = min(good, key=lambda c: good[c]["time_s"])
                    row["best"] = best
                    row["best_tflops"] = good[best]["tflops"]
                    for peer in ("sdpa_flash", "sdpa_cudnn"):
                        if "time_s" in row.get(peer, {}):
                            row[f"ratio_vs_{peer}"] = row[peer]["time_s"] / good[best]["time_s"]
                rows.append(row)
                log(f"bench d={d} N={N} causal={causal}: best {row.get('best')} "
                    f"{row.get('best_tflops', float('nan')):.1f} TFLOP/s, flash "
                    f"{row['sdpa_flash'].get('tflops', float('nan')):.1f}, cudnn "
                    f"{row['sdpa_cudnn'].get('tflops', float('nan')):.1f}")
                del q, k, v
    return rows


def bench_unfused(torch, kernels, reps=10):
    out = []
    for d in (64, 128):
        H = 2048 // d
        for N in (1024, 4096):
            B = 16384 // N
            for causal in (False, True):
                q, k, v = rand_qkv(torch, B, H, H, N, N, d, torch.bfloat16, seed=2)
                flops = 4.0 * B * H * N * N * d * (0.5 if causal else 1.0)
                try:
                    t, tmin = time_fn(torch, lambda: kernels.attention_unfused(q, k, v, causal=causal), reps, 2)
                    out.append({"B": B, "H": H, "N": N, "d": d, "causal": causal, "time_s": t,
                                "tflops": flops / t / 1e12})
                except Exception as e:
                    out.append({"B": B, "H": H, "N": N, "d": d, "causal": causal, "error": str(e)[:300]})
                del q, k, v
                torch.cuda.empty_cache()
    return out


def ab_test(torch, kernels, define, rounds=3, reps=20):
    """Time the FA2-like/best shipped configs with and without an NVRTC -D switch, alternating."""
    from kernels import _runtime
    from kernels.configs import FlashConfig

    picks = {64: FlashConfig(128, 128, 4, 2, 64), 128: FlashConfig(128, 64, 4, 2, 128)}
    out = []
    for d, N, causal in ((64, 1024, False), (64, 4096, True), (128, 4096, False), (128, 4096, True),
                         (128, 16384, False)):
        H, B = 2048 // d, 16384 // N
        q, k, v = rand_qkv(torch, B, H, H, N, N, d, torch.bfloat16, seed=3)
        flops = 4.0 * B * H * N * N * d * (0.5 if causal else 1.0)
        res = {"": [], define: []}
        for _ in range(rounds):
            for variant in ("", define):
                _runtime.set_extra_options((f"-D{variant}=1",) if variant else ())
                t, _ = time_fn(torch, lambda: kernels.flash_attention(q, k, v, causal=causal, config=picks[d]), reps)
                res[variant].append(flops / t / 1e12)
        _runtime.set_extra_options(())
        rec = {"d": d, "N": N, "causal": causal, "base": res[""], define: res[define]}
        out.append(rec)
        log(f"A/B {define} d={d} N={N} causal={causal}: base {['%.1f' % x for x in res['']]} "
            f"vs {['%.1f' % x for x in res[define]]} TFLOP/s")
        del q, k, v
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--ab", action="append", default=[], help="NVRTC macro to A/B against the default build")
    args = ap.parse_args(argv)

    import cupy
    import torch

    import kernels
    from kernels import _runtime
    from kernels.configs import SHIPPED_FLASH, SHIPPED_MATMUL
    from kernels.flash_sm80 import precompile_flash
    from kernels.unfused import precompile_unfused

    os.makedirs(args.out, exist_ok=True)
    dev = torch.device("cuda", torch.cuda.current_device())
    report = {"device": torch.cuda.get_device_name(dev), "torch": torch.__version__, "cupy": cupy.__version__,
              "cc": "sm_%d%d" % torch.cuda.get_device_capability(dev), "nvrtc": list(cupy.cuda.nvrtc.getVersion()),
              "max_dynamic_smem": _runtime.max_dynamic_smem(dev)}
    log("device:", report)

    t0 = time.time()
    variants = [(c, dt, cz) for c in SHIPPED_FLASH for dt in ("bf16", "fp16") for cz in (False, True)]
    try:
        precompile_flash(variants, dev)
        precompile_unfused([(c, dt) for c in SHIPPED_MATMUL for dt in ("bf16", "fp16")], dev)
    except Exception:
        traceback.print_exc()
    report["compile_s"] = time.time() - t0
    log(f"compiled {len(variants)} flash variants + unfused in {report['compile_s']:.1f} s")

    if not args.skip_check:
        _runtime.set_debug(True)
        t0 = time.time()
        checks = check_all(torch, kernels, args.quick)
        _runtime.set_debug(False)
        report["checks"] = checks
        n_ok = sum(r["ok"] for r in checks)
        log(f"correctness: {n_ok}/{len(checks)} ok in {time.time() - t0:.1f} s; worst rel err "
            f"{max((r.get('rel_err', 0) for r in checks), default=0):.2e}")
        with open(os.path.join(args.out, "kernels_gpu_check.json"), "w") as f:
            json.dump(report, f, indent=1)

    for define in args.ab:
        try:
            report.setdefault("ab", {})[define] = ab_test(torch, kernels, define)
        except Exception:
            traceback.print_exc()

    if not args.skip_bench:
        t0 = time.time()
        report["bench"] = bench(torch, kernels, args.reps)
        try:
            report["bench_unfused"] = bench_unfused(torch, kernels)
        except Exception as e:
            report["bench_unfused_error"] = str(e)
        report["bench_s"] = time.time() - t0
        with open(os.path.join(args.out, "kernels_gpu_check.json"), "w") as f:
            json.dump(report, f, indent=1)
        log("")
        log(f"{report['device']}  bf16, B*N=16384, H*d=2048; TFLOP/s (causal counts half the FLOPs)")
        log(f"{'d':>4} {'N':>6} {'causal':>6} | {'ours best':>9} {'config':>16} | {'FA2':>7} {'cuDNN':>7} | "
            f"{'xFA2':>5} {'xcuDNN':>6} | model pick (TFLOP/s)")
        for r in report["bench"]:
            mc = r.get("model_choice")
            mt = r["ours"].get(mc, {}).get("tflops") if mc else None
            log(f"{r['d']:>4} {r['N']:>6} {str(r['causal']):>6} | {r.get('best_tflops', float('nan')):9.1f} "
                f"{str(r.get('best')):>16} | {r['sdpa_flash'].get('tflops', float('nan')):7.1f} "
                f"{r['sdpa_cudnn'].get('tflops', float('nan')):7.1f} | "
                f"{r.get('ratio_vs_sdpa_flash', float('nan')):5.2f} {r.get('ratio_vs_sdpa_cudnn', float('nan')):6.2f} | "
                f"{mc} ({mt if mt is None else round(mt, 1)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
