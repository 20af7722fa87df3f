"""Probe: the mma.sync backward (flash_bwd_sm80, the model's pick) with its B^T operands (Q in S^T = K Q^T, dO in
dP^T = V dO^T) loaded in the B^T order (warp_tiles.cuh bt_delta; shipped) against the A order it had
(IOM_BT_A_ORDER), at d = 64 and 128, N = 4096 B4 (H d = 2048), causal and not, bf16: the two builds timed in one
interleaved group a shape (the harness's timer, 5 rounds), dQ dK dV of each checked against the other's first.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-pipes-h100-2026-11-25/bwd_bt_probe.py"""
import sys, time
import torch
import kernels
import kernels.flash_bwd_sm80 as kbw
from kernels import compile
from iomodel import families
from validation.timing import CudaEventTimer
from validation import probe_record

BUILDS = {"B^T order": (), "A order": ("IOM_BT_A_ORDER",)}
timer = CudaEventTimer()


def build(dout, q, k, v, out, lse, causal, defines):
    """A backward launch plan built with `defines` (``probe_record.swapped_module``) and called once."""
    def module(cfg, dtype, causal, deterministic, arch):
        return compile.build(f'#include "{kbw.HEADER}"\n', arch, names=kbw.kernel_names(cfg, dtype, causal, deterministic),
                             defines=defines, label=kbw.FAMILY + "-probe", flags=compile.MMA_SYNC_FLAGS)
    with probe_record.swapped_module(kbw, module, (kbw._kernels,)):
        launch = kbw.plan(dout, q, k, v, out, lse, causal)
        launch(dout, q, k, v, out, lse)
        torch.cuda.synchronize()
    return launch


t0, rows = time.time(), []
for d in (64, 128):
    for causal in (False, True):
        B, H, N = 4, 2048 // d, 4096
        sets = []
        for q, k, v, do in probe_record.random_sets(B, H, N, d, seed=7 * d + causal, tensors=4):
            o, lse = kernels.flash_attention(q, k, v, causal=causal, return_lse=True)
            sets.append((do, q, k, v, o, lse))
        launches = {tag: build(*sets[0], causal, defs) for tag, defs in BUILDS.items()}
        ref = launches["A order"](*sets[0])
        got = launches["B^T order"](*sets[0])
        err = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item() for a, b in zip(got, ref))
        if err > 1e-2:
            raise SystemExit(f"d{d} causal={causal}: the two builds differ by {err}")
        cfg = families.get("flash_bwd_sm80").label(launches["B^T order"].call.config)
        rows += probe_record.timed_rows(timer, list(launches.values()), [f"{cfg} {t}" for t in launches], sets,
                                        rounds=5, B=B, H=H, N=N, d=d, causal=causal, max_rel_diff=err)
        print(f"d{d} causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
probe_record.write("bwd-bt-order.json", rows, "PYTHONPATH=. python3 validation/results/profile-pipes-h100-2026-11-25/bwd_bt_probe.py")
for d in (64, 128):
    for causal in (False, True):
        a, b = [r for r in rows if (r["d"], r["causal"]) == (d, causal)]
        print(f"d{d} causal={causal}: {a['impl']} {a['median_ms']:.4f} ms, {b['impl']} {b['median_ms']:.4f} ms, "
              f"A/B^T {b['median_ms'] / a['median_ms']:.3f}")
