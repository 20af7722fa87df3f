"""Probe: a fixed causal section (24, 32 or 48 query heads) against the L2 rule's sections
(kernels.flash_sm90.l2_section_heads) on shapes beyond the sections probe: head dims 192
and 256 (the static schedule), GQA 4:1, N = 16384, a (4096, 0) window at N = 32768; each checked against
a float32 reference first (max abs error, and cuDNN's beside it). CUDA events, each share queued behind a GPU sleep, 7 interleaved rounds.
Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-small-batch-h100-2026-11-24/sections_check.py"""
import sys, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from kernels import dispatch, flash_sm90
from kernels.window import Window
from validation.reference import attention_reference
from validation.timing import CudaEventTimer
from validation import probe_record

timer = CudaEventTimer(max_repeats=200, target_s=0.1)
torch.manual_seed(3)
props = torch.cuda.get_device_properties(0)
SHAPES = [  # (B, H, H_kv, N, d, window_left)
    (16, 16, 16, 1024, 128, None), (4, 10, 10, 4096, 192, None), (4, 8, 8, 4096, 256, None),
    (4, 32, 8, 4096, 128, None), (16, 32, 8, 1024, 64, None), (1, 16, 16, 16384, 128, None),
    (1, 16, 16, 32768, 128, 4096),
]


def ours(cfg, window, sections):
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=True, config=cfg, _sections=sections, window=window)


def cudnn(q, k, v):
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=q.shape[1] != k.shape[1])


rows = []
for B, H, H_kv, N, d, left in SHAPES:
    shape = {"B": B, "H": H, "H_kv": H_kv, "N_q": N, "N_k": N, "d": d, "causal": True, "dtype": "bf16"}
    if left is not None:
        shape["window_left"], shape["window_right"] = left, 0
    window = Window(left, 0) if left is not None else None
    pick = dispatch.choose(["flash_sm90"], shape, 0).config
    rule = flash_sm90.l2_section_heads(B, H, H_kv, N, d, 2, props.L2_cache_size)   # the rule before
    sets = [(torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16),
             torch.randn((B, H_kv, N, d), device="cuda", dtype=torch.bfloat16),
             torch.randn((B, H_kv, N, d), device="cuda", dtype=torch.bfloat16)) for _ in range(3)]
    ref = (attention_reference(*sets[0], causal=True, window_size=(-1 if left is None else left, 0))[0]
           if B * N * N * 4 <= (2 << 30) else None)   # the largest (N = 32768) left unchecked, as when it ran
    fns, labels = [], []
    for s in sorted({rule, 24, 32, 48}):
        fns.append(ours(pick, window, s)); labels.append(f"sections {s}" + (" (rule)" if s == rule else ""))
    if left is None:
        fns.append(cudnn); labels.append("sdpa cudnn")
    errs = [float((f(*sets[0]).float() - ref).abs().max()) if ref is not None else None for f in fns]
    torch.cuda.synchronize()
    res = timer.time_interleaved(fns, sets, rounds=7, queue_ahead=True)
    for lab, r, e in zip(labels, res, errs):
        rows.append({"B": B, "H": H, "H_kv": H_kv, "N": N, "d": d, "window_left": left, "config": pick.name,
                     "impl": lab, "max_abs_err_vs_fp32": e, "median_ms": r.median_s * 1e3, "min_ms": r.min_s * 1e3})
    print(f"{B} {H}:{H_kv} N{N} d{d} done", file=sys.stderr, flush=True)
probe_record.write("sections-check.json", rows, "PYTHONPATH=. python3 validation/results/profile-small-batch-h100-2026-11-24/sections_check.py")
for r in rows:
    e = r["max_abs_err_vs_fp32"]
    print(f"B{r['B']} H{r['H']}:{r['H_kv']} N{r['N']} d{r['d']} w{r['window_left']} {r['config']} {r['impl']:20} "
          f"{r['median_ms']:.4f} ms  err {'-' if e is None else f'{e:.1e}'}")
