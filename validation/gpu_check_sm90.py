"""GPU validation of the sm90 FlashAttention forward (kernels/sm90.py) -- one script per lease call.

    PYTHONPATH=. python3 -m validation.gpu_check_sm90 [--phases report,debug_s,correct,bench]

The parent process runs each phase in a child process with a time limit (a hung mbarrier wait
then costs one phase, not the whole call), prints a short table last and writes details
(JSON + logs) under $OUT (or --out).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import traceback

OUT = os.environ.get("OUT", "/tmp/sm90_out")


def _p(*a):
    print(*a, flush=True)


# ----------------------------------------------------------------------------------- helpers
def reference(q, k, v, causal, scale):
    """float32 attention; rows that see no key give O = 0, LSE = -inf."""
    import torch

    B, H, N_q, d = q.shape
    H_kv, N_k = k.shape[1], k.shape[2]
    g = H // H_kv
    kf = k.float().repeat_interleave(g, dim=1)
    vf = v.float().repeat_interleave(g, dim=1)
    s = torch.matmul(q.float(), kf.transpose(-1, -2)) * scale
    if causal:
        i = torch.arange(N_q, device=q.device)[:, None]
        j = torch.arange(N_k, device=q.device)[None, :]
        s = s.masked_fill(j > i + (N_k - N_q), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return torch.matmul(p, vf), lse


def rel_err(a, b):
    import torch

    num = torch.linalg.vector_norm((a.float() - b.float()).flatten())
    den = torch.linalg.vector_norm(b.float().flatten()).clamp_min(1e-30)
    return float(num / den)


def diagnose(o, ref, tag=""):
    """Where do O and ref differ: by query row (mod 64 / 8 patterns) and by d column."""
    import torch

    err = (o.float() - ref.float()).abs()
    tol = 0.05 * ref.float().abs().max().clamp_min(1e-6)
    bad = err > tol
    if not bad.any():
        return f"{tag} no element beyond 5% of max|ref|"
    rows = bad.any(dim=-1).nonzero()
    cols = bad.flatten(0, 2).any(dim=0).nonzero().flatten()
    r = rows[:, 2]
    msg = [f"{tag} bad elems {int(bad.sum())}/{bad.numel()}",
           f"bad rows {int(rows.shape[0])}, first (b,h,row) {rows[:6].tolist()}",
           f"row%64 hist {torch.bincount(r % 64, minlength=64).tolist()}",
           f"row//64 hist {torch.bincount(r // 64).tolist()[:40]}",
           f"bad d-cols ({cols.numel()}): {cols[:32].tolist()}"]
    return "\n    ".join(msg)


def time_fn(fn, warmup=3, reps=21, min_batch_s=2e-3):
    """Median over `reps` batches of back-to-back calls (CUDA events around each batch; a batch
    lasts >= min_batch_s so host launch overhead overlaps the GPU work), seconds per call."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    inner = max(1, min(50, math.ceil(min_batch_s / max(a.elapsed_time(b) / 1e3, 1e-6))))
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / inner)
    ts.sort()
    return ts[len(ts) // 2] / 1e3


# ----------------------------------------------------------------------------------- phases
def phase_debug_s(results):
    """Raw S = Q K^T of one tile (debug build) vs torch: isolates descriptors / TMA / swizzle."""
    import torch

    from kernels import sm90

    torch.manual_seed(0)
    for cfg in [sm90.shipped_for(64)[0], sm90.shipped_for(64)[1], sm90.shipped_for(128)[0],
                sm90.shipped_for(128)[1], sm90.shipped_for(256)[0]]:
        for dt in (torch.bfloat16, torch.float16):
            d = cfg.head_dim
            n_q, n_k = cfg.block_m, cfg.block_n
            q = torch.randn(1, 1, n_q, d, device="cuda", dtype=dt)
            k = torch.randn(1, 1, n_k, d, device="cuda", dtype=dt)
            v = torch.randn(1, 1, n_k, d, device="cuda", dtype=dt)
            buf = torch.full((cfg.block_m * cfg.block_n,), float("nan"), device="cuda")
            sm90.flash_attention_sm90(q, k, v, config=cfg, _defines=("SM90_DEBUG_S",), _debug_buffer=buf)
            torch.cuda.synchronize()
            s = buf.view(cfg.block_m, cfg.block_n)
            ref = q[0, 0].float() @ k[0, 0].float().T
            err = (s - ref).abs()
            ok = bool(torch.isfinite(s).all()) and float(err.max()) < 1e-2 * float(ref.abs().max())
            line = f"debug_s {cfg.name} {str(dt)[6:]}: max|err|={float(err.nan_to_num(1e9).max()):.3e} ok={ok}"
            if not ok:
                bad = ~(err < 1e-2 * float(ref.abs().max()))
                br = bad.any(1).nonzero().flatten()
                bc = bad.any(0).nonzero().flatten()
                line += f"\n    bad rows {br[:24].tolist()} ({br.numel()}), bad cols {bc[:24].tolist()} ({bc.numel()})"
                # is it a permutation? find for a few rows the best matching ref row/col
                for r in br[:3].tolist():
                    dist = (ref - s[r][None, :]).abs().amax(1)
                    line += f"\n    S row {r} best matches ref row {int(dist.argmin())} (err {float(dist.min()):.2e})"
            _p(line)
            results.append(dict(phase="debug_s", cfg=cfg.name, dtype=str(dt), ok=ok, max_err=float(err.nan_to_num(1e9).max())))


def correctness_cases():
    from kernels import sm90

    C = sm90.SHIPPED_SM90
    cases = []
    # (cfg, dtype, B, H, H_kv, N_q, N_k, causal, mag, layout)
    for cfg in C:
        cases.append((cfg, "bf16", 1, 2, 2, 300, 300, False, 1.0, "bhnd"))
        cases.append((cfg, "fp16", 1, 2, 2, 257, 257, True, 1.0, "bhnd"))
    base64 = sm90.shipped_for(64)[0]
    base128 = sm90.shipped_for(128)[0]
    for cfg in (base64, base128):
        for n in (1, 17, 1000, 4097):
            for causal in (False, True):
                cases.append((cfg, "bf16", 1, 2, 2, n, n, causal, 1.0, "bhnd"))
        for (nq, nk) in ((100, 300), (300, 100), (1, 1000), (1000, 17), (129, 4097)):
            for causal in (False, True):
                cases.append((cfg, "bf16", 1, 2, 2, nq, nk, causal, 1.0, "bhnd"))
        cases.append((cfg, "bf16", 2, 8, 2, 1000, 1000, True, 1.0, "bhnd"))    # GQA 4:1
        cases.append((cfg, "fp16", 2, 6, 1, 513, 700, False, 1.0, "bhnd"))    # MQA
        cases.append((cfg, "bf16", 2, 4, 4, 777, 777, False, 1.0, "bnhd"))    # strided (B,N,H,d) view
        cases.append((cfg, "bf16", 1, 4, 2, 1000, 1000, True, 1.0, "bnhd"))
        cases.append((cfg, "bf16", 1, 2, 2, 1000, 1000, False, 8.0, "bhnd"))  # large-magnitude scores
        cases.append((cfg, "fp16", 1, 2, 2, 1000, 1000, True, 8.0, "bhnd"))
        # more tiles than SMs: several tiles per persistent CTA, empty causal tiles (N_q > N_k)
        cases.append((cfg, "bf16", 4, 8, 8, 2000, 2000, True, 1.0, "bhnd"))
        cases.append((cfg, "bf16", 4, 8, 2, 2000, 2000, False, 1.0, "bhnd"))
        cases.append((cfg, "fp16", 2, 16, 4, 2000, 300, True, 1.0, "bhnd"))
        cases.append((cfg, "bf16", 3, 12, 3, 1500, 2500, True, 1.0, "bnhd"))
    return cases


def split_defines(defines):
    """'NONPERSIST' in the phase's defines selects the non-persistent grid."""
    d = tuple(x for x in defines if x != "NONPERSIST")
    return d, ("NONPERSIST" not in defines)


def run_case(case, defines=()):
    import torch

    from kernels import sm90

    cfg, dts, B, H, H_kv, N_q, N_k, causal, mag, layout = case
    dt = torch.bfloat16 if dts == "bf16" else torch.float16
    d = cfg.head_dim

    def make(h, n):
        if layout == "bnhd":
            return torch.randn(B, n, h, d, device="cuda", dtype=dt).transpose(1, 2)
        return torch.randn(B, h, n, d, device="cuda", dtype=dt)

    q = make(H, N_q) * mag
    k = make(H_kv, N_k)
    v = make(H_kv, N_k)
    if layout == "bnhd":
        q, k, v = q, k, v  # views, not contiguous
    scale = 1.0 / math.sqrt(d)
    out = torch.full((B, H, N_q, d), float("nan"), device="cuda", dtype=dt)
    defs, persistent = split_defines(defines)
    o, lse = sm90.flash_attention_sm90(q, k, v, causal=causal, config=cfg, scale=scale, return_lse=True,
                                       out=out, _defines=defs, _persistent=persistent)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, causal, scale)
    nan = int(torch.isnan(o).sum())
    e = rel_err(o.nan_to_num(1e4), ref)
    fin = torch.isfinite(ref_lse)
    lse_err = float((lse[fin] - ref_lse[fin]).abs().max()) if fin.any() else 0.0
    lse_inf_ok = bool((lse[~fin] == float("-inf")).all()) if (~fin).any() else True
    tol = 1e-2 if dts == "bf16" else 5e-3
    ok = nan == 0 and e < tol and lse_err < 1e-2 and lse_inf_ok
    desc = (f"{cfg.name} {dts} B{B} H{H}/{H_kv} Nq{N_q} Nk{N_k} {'causal' if causal else 'full'} x{mag:g} {layout}")
    line = f"{'PASS' if ok else 'FAIL'} {desc}: rel={e:.2e} lse={lse_err:.1e} nan={nan}"
    if not ok:
        line += "\n    " + diagnose(o.nan_to_num(1e4), ref)
    return ok, line, dict(case=desc, ok=ok, rel=e, lse=lse_err, nan=nan)


def phase_correct(results, defines=()):
    ok_all = True
    for case in correctness_cases():
        try:
            ok, line, rec = run_case(case, defines)
        except Exception as exc:  # noqa: BLE001
            ok, line, rec = False, f"ERROR {case}: {exc!r}", dict(case=str(case), ok=False, error=repr(exc))
            traceback.print_exc()
        rec["defines"] = list(defines)
        results.append(rec)
        ok_all &= ok
        _p(line)
    _p(f"correct{list(defines)}: {'ALL PASS' if ok_all else 'FAILURES'}")


def bench_shapes():
    shapes = []
    for d in (64, 128):
        H = 2048 // d
        for N in (1024, 4096, 16384):
            B = 16384 // N
            for causal in (False, True):
                shapes.append((B, H, N, d, causal))
    return shapes


def phase_bench(results, configs=None, defines=()):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kernels import sm90

    torch.manual_seed(1)
    rows = []
    for (B, H, N, d, causal) in bench_shapes():
        q = torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16)
        flops = 4 * B * H * N * N * d * (0.5 if causal else 1.0)
        rec = dict(B=B, H=H, N=N, d=d, causal=causal)
        ref = None
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    fn = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                    if ref is None:
                        ref = fn()
                    t = time_fn(fn)
                rec[name] = flops / t / 1e12
            except Exception as exc:  # noqa: BLE001
                rec[name] = None
                _p(f"  {name} failed: {exc!r}"[:200])
        cands = configs if configs is not None else sm90.shipped_for(d)
        best = None
        for cfg in cands:
            if cfg.head_dim != d:
                continue
            try:
                defs, pers = split_defines(defines)
                fn = lambda: sm90.flash_attention_sm90(q, k, v, causal=causal, config=cfg, _defines=defs,  # noqa: E731
                                                       _persistent=pers)
                o = fn()
                torch.cuda.synchronize()
                e = rel_err(o, ref) if ref is not None else float("nan")
                t = time_fn(fn)
                tf = flops / t / 1e12
                rec[f"ours_{cfg.name}"] = tf
                rec[f"err_{cfg.name}"] = e
                if e < 2e-2 and (best is None or tf > best[1]):
                    best = (cfg.name, tf)
            except Exception as exc:  # noqa: BLE001
                _p(f"  ours {cfg.name} failed: {exc!r}"[:300])
        rec["best"] = best
        results.append(dict(phase="bench", **rec))
        rows.append(rec)
        _p(f"bench B{B} H{H} N{N} d{d} {'causal' if causal else 'full'}: " +
           " ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in rec.items()
                    if k not in ("B", "H", "N", "d", "causal")))
        del q, k, v, ref
    _p("\n| N | d | causal | ours (cfg) TF/s | flash | cudnn | /flash | /cudnn |")
    _p("|---|---|---|---|---|---|---|---|")
    for r in rows:
        b = r["best"]
        tf = b[1] if b else float("nan")
        fl = r.get("flash") or float("nan")
        cu = r.get("cudnn") or float("nan")
        _p(f"| {r['N']} | {r['d']} | {int(r['causal'])} | {tf:.0f} ({b[0] if b else '-'}) | {fl:.0f} | {cu:.0f} | "
           f"{tf / fl:.2f} | {tf / cu:.2f} |")


def phase_report(results):
    from kernels import sm90

    rep = sm90.resource_report(dtypes=("bf16", "fp16"), keep_dir=None)
    sass = sm90.sass_report(rep["_cubin"])
    with open(os.path.join(OUT, "ptxas_log.txt"), "w") as f:
        f.write(rep["_log"])
    for k, r in rep.items():
        if k.startswith("_"):
            continue
        s = (sass or {}).get(k, {})
        line = (f"report {k}: regs={r['registers']} spill={r['spill_stores']}/{r['spill_loads']} "
                f"static_smem={r['static_smem']} dyn_smem={r['dynamic_smem']} codes={r['ptxas_codes']} "
                f"HGMMA={s.get('HGMMA')} HMMA={s.get('HMMA')} LDL/STL={s.get('LDL')}/{s.get('STL')}")
        _p(line)
        results.append(dict(phase="report", kernel=k, **{kk: (vv if not hasattr(vv, "name") else vv.name)
                                                          for kk, vv in r.items()}, sass=s))


# ----------------------------------------------------------------------------------- driver
def child(phase, defines):
    results = []
    try:
        if phase == "report":
            phase_report(results)
        elif phase == "debug_s":
            phase_debug_s(results)
        elif phase == "correct":
            phase_correct(results, defines)
        elif phase == "bench":
            phase_bench(results, defines=defines)
    finally:
        tag = phase + ("_" + "_".join(defines) if defines else "")
        with open(os.path.join(OUT, f"res_{tag}.json"), "w") as f:
            json.dump(results, f, indent=1, default=str)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phases", default="env,report,debug_s,correct,bench")
    ap.add_argument("--child", default=None)
    ap.add_argument("--defines", default="")
    ap.add_argument("--out", default=None)
    ap.add_argument("--budget", type=float, default=380.0, help="seconds for the whole script")
    a = ap.parse_args()
    global OUT
    if a.out:
        OUT = a.out
    os.makedirs(OUT, exist_ok=True)
    defines = tuple(x for x in a.defines.split(",") if x)
    if a.child:
        child(a.child, defines)
        return
    t0 = time.time()
    limits = {"report": 120, "debug_s": 60, "correct": 110, "bench": 90, "sanitize": 120}
    for spec in a.phases.split(","):
        phase, _, defs = spec.partition(":")
        left = a.budget - (time.time() - t0)
        if phase == "env":
            _p(subprocess.run("nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; "
                              "python3 -c 'import torch,cupy;print(torch.__version__, cupy.__version__)'; "
                              "which nvcc cuobjdump compute-sanitizer", shell=True, capture_output=True,
                              text=True).stdout)
            continue
        lim = min(limits.get(phase, 120), left - 5)
        if lim < 20:
            _p(f"skip {spec}: {left:.0f}s left")
            continue
        if phase == "sanitize":
            cmd = ["compute-sanitizer", "--tool", "memcheck", sys.executable, "-m", "validation.gpu_check_sm90",
                   "--child", "debug_s"]
        else:
            cmd = [sys.executable, "-m", "validation.gpu_check_sm90", "--child", phase, "--defines",
                   defs.replace("+", ",")]
        _p(f"==== phase {spec} (limit {lim:.0f}s)")
        ts = time.time()
        try:
            res = subprocess.run(cmd, timeout=lim, capture_output=True, text=True, env=os.environ.copy())
            out = res.stdout + (("\n[stderr]\n" + res.stderr[-3000:]) if res.returncode else "")
            rc = res.returncode
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            out += f"\n!!! TIMEOUT after {lim:.0f}s (likely a hang)"
            rc = -1
        with open(os.path.join(OUT, "all_log.txt"), "a") as f:
            f.write(f"==== phase {spec} rc={rc}\n{out}\n")
        if phase == "report":  # full table is in all_log.txt; print only lines worth a look
            shown = [ln for ln in out.splitlines() if not ln.startswith("report ")
                     or "spill=0/0" not in ln or "codes=[]" not in ln or "HGMMA=0" in ln]
            n_ok = sum(1 for ln in out.splitlines() if ln.startswith("report "))
            _p("\n".join(shown[-40:]) + f"\n({n_ok} kernels reported; clean ones not shown)")
        else:
            _p(out.rstrip())
        _p(f"==== phase {spec} rc={rc} {time.time() - ts:.0f}s")


if __name__ == "__main__":
    main()
