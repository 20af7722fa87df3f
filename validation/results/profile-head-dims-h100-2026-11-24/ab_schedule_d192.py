"""A/B: the wgmma kernel's dynamic schedule (kDynamic), own-chunk skipping (kOwnChunks) and wgmma turns
(kTurns) at head dims 192 and 256, where they were off (register pressure at d = 256, since relieved:
ptxas reports no spill with all three on).  Each variant compiled with its -D switch, checked against SDPA
in float32, timed interleaved with SDPA cuDNN.  Run:
PYTHONPATH=. python3 validation/results/profile-head-dims-h100-2026-11-24/ab_schedule_d192.py"""
import json, os, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from kernels import dispatch, flash_sm90
from validation.timing import CudaEventTimer

torch.manual_seed(0)
timer = CudaEventTimer(max_repeats=40, target_s=0.25)
VARIANTS = {"base": (), "dyn": ("SM90_DYN_MAX=256",), "own+turn": ("SM90_OWN_MAX=256", "SM90_TURN_MAX=256"),
            "all": ("SM90_DYN_MAX=256", "SM90_OWN_MAX=256", "SM90_TURN_MAX=256")}


def run(defines, cfg, causal):
    def f(q, k, v):
        flash_sm90.DYNAMIC_MAX_HEAD_DIM = 256 if "SM90_DYN_MAX=256" in defines else 128
        return flash_sm90.attention(q, k, v, causal=causal, config=cfg, _defines=defines)
    return f


def cudnn(causal):
    def f(q, k, v):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return f


rows = []
for d in (192, 256):
    for B, N, causal in ((4, 4096, True), (2, 8192, True), (4, 4096, False)):
        H = 16
        sets = [tuple(torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(2)]
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
        cfg = dispatch.choose(["flash_sm90"], shape, 0).config
        names = list(VARIANTS) + ["sdpa cudnn"]
        fns = [run(v, cfg, causal) for v in VARIANTS.values()] + [cudnn(causal)]
        q, k, v = sets[0]
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        errs = [((f(q, k, v).float() - ref).abs().max() / ref.abs().max()).item() for f in fns]
        del ref
        res = timer.time_interleaved(fns, sets, rounds=3)   # each call sets the schedule constant it needs
        flops = 4 * B * H * N * N * d / (2 if causal else 1)
        for name, r, e in zip(names, res, errs):
            ms = None if isinstance(r, Exception) else r.median_s * 1e3
            rows.append({"d": d, "shape": [B, H, N], "causal": causal, "variant": name, "config": str(cfg), "ms": ms,
                         "tflops": ms and flops / ms / 1e9, "max_rel_err": e})
            print(f"d={d} {B}x{H}x{N} {'causal' if causal else 'full'} {name:10} {ms and round(ms, 3)} ms "
                  f"{ms and round(flops / ms / 1e9)} TF err {e:.4f}", flush=True)
        del sets; torch.cuda.empty_cache()
json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": "2026-11-24", "rows": rows},
          open(os.path.join(os.environ.get("OUT", "/tmp"), "ab_schedule_d192.json"), "w"), indent=1)
