"""Probe: heads a causal scheduling section for the wgmma forward's dynamic schedule, over N (B N = 16384,
H d = 2048, bf16, causal) at the model's pick, beside SDPA cuDNN, timed interleaved (CUDA events, each share queued behind a GPU sleep, 7 rounds,
3 input sets; every variant checked against cuDNN first). Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-small-batch-h100-2026-11-24/sections_probe.py"""
import sys, torch
from kernels import dispatch, flash_sm90
from validation.peers import peer_runners
from validation.timing import CudaEventTimer
from validation import probe_record

timer = CudaEventTimer(max_repeats=200, target_s=0.1)
torch.manual_seed(2)
props = torch.cuda.get_device_properties(0)


def ours(cfg, sections=None):
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=True, config=cfg, _sections=sections)


_cudnn = peer_runners(torch)["sdpa_cudnn"][0]


def cudnn(q, k, v):
    return _cudnn(q, k, v, True)


rows = []
for d in (64, 128):
    for N in (1024, 2048, 4096, 8192):
        B, H = 16384 // N, 2048 // d
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": True, "dtype": "bf16"}
        pick = dispatch.choose(["flash_sm90"], shape, 0).config
        default = flash_sm90.l2_section_heads(B, H, H, N, d, 2, props.L2_cache_size)   # the rule before
        m_blocks = -(-N // pick.block_m)
        wave = -(-props.multi_processor_count // m_blocks)   # heads whose tiles fill one wave of CTAs
        shipped = flash_sm90.heads_per_section(B, H, H, N, d, 2, props.L2_cache_size, m_blocks,
                                               props.multi_processor_count)
        secs = sorted({s for s in (1, 2, 4, 8, 16, 32, 64, 128, wave, default, shipped) if s <= B * H})
        sets = [tuple(torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(3)]
        ref = cudnn(*sets[0]).float()
        fns, labels = [], []
        for s in secs:
            fns.append(ours(pick, s))
            labels.append(f"sections {s}" + (" (L2 rule)" if s == default else "") + (" (one wave)" if s == wave else "")
                          + (" (shipped)" if s == shipped else ""))
        fns.append(cudnn); labels.append("sdpa cudnn")
        errs = [float((f(*sets[0]).float() - ref).abs().max()) for f in fns]
        torch.cuda.synchronize()
        res = timer.time_interleaved(fns, sets, rounds=7, queue_ahead=True)
        for lab, r, e in zip(labels, res, errs):
            rows.append({"d": d, "N": N, "B": B, "H": H, "config": pick.name, "m_blocks": m_blocks, "impl": lab,
                         "max_abs_diff_vs_cudnn": e, "median_ms": r.median_s * 1e3, "min_ms": r.min_s * 1e3})
        print(f"d {d} N {N} done", file=sys.stderr, flush=True)
probe_record.write("sections.json", rows, "PYTHONPATH=. python3 validation/results/profile-small-batch-h100-2026-11-24/sections_probe.py")
for r in rows:
    print(f"d{r['d']} N{r['N']} {r['config']} {r['impl']:28} {r['median_ms']:.4f} ms  err {r['max_abs_diff_vs_cudnn']:.1e}")
