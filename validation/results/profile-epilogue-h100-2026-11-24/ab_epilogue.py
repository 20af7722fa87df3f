"""A/B: the wgmma forward's epilogue.  Run 1 (ab-epilogue-skip.json, with tried-skip-o-store.patch applied):
what storing O costs at most, the kernel with its O stores compiled out (-DSM90_EXP_SKIP_O: no output
written, timed only) beside the kernel, then with 4-byte stores from registers, and SDPA cuDNN.  Run 2
(ab-epilogue-wide.json, with tried-narrow-o-store.patch applied): the 16-byte stores after a quad
transpose (now the kernel's) against the 4-byte ones (-DSM90_EXP_NARROW_O).  Short sequences (issue 18's
small batches) and long ones.  Run: PYTHONPATH=. python3 validation/results/profile-epilogue-h100-2026-11-24/ab_epilogue.py [skip|narrow]"""
import json, os, sys, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from kernels import dispatch, flash_sm90
from validation.timing import CudaEventTimer

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "narrow"
timer = CudaEventTimer(max_repeats=60, target_s=0.25)


def ours(cfg, causal, defines=()):
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=cfg, _defines=defines)


def cudnn(causal):
    def f(q, k, v):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return f


rows = []
for B, H, N, d in ((16, 16, 1024, 128), (16, 32, 1024, 64), (4, 16, 4096, 128), (1, 32, 32768, 64)):
    for causal in (False, True):
        sets = [tuple(torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3)) for _ in range(2)]
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
        cfg = dispatch.choose(["flash_sm90"], shape, 0).config
        other = "SM90_EXP_SKIP_O" if MODE == "skip" else "SM90_EXP_NARROW_O"
        names = ["ours", "ours, no O store" if MODE == "skip" else "ours, 4-byte O stores", "sdpa cudnn"]
        fns = [ours(cfg, causal), ours(cfg, causal, (other,)), cudnn(causal)]
        q, k, v = sets[0]
        if MODE != "skip":   # both store paths correct first
            ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            for name, f in zip(names[:2], fns[:2]):
                err = ((f(q, k, v).float() - ref).abs().max() / ref.abs().max()).item()
                assert err < 2e-2, (name, err)
            del ref
        res = timer.time_interleaved(fns, sets, rounds=3)
        flops = 4 * B * H * N * N * d / (2 if causal else 1)
        for name, r in zip(names, res):
            ms = r.median_s * 1e3
            rows.append({"shape": [B, H, N, d], "causal": causal, "variant": name, "config": str(cfg), "ms": ms,
                         "tflops": flops / ms / 1e9})
            print(f"{B}x{H}x{N} d{d} {'causal' if causal else 'full  '} {name:17} {ms:.3f} ms {flops / ms / 1e9:.0f} TF",
                  flush=True)
        del sets; torch.cuda.empty_cache()
json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": "2026-11-24", "rows": rows},
          open(os.path.join(os.environ.get("OUT", "/tmp"), f"ab-epilogue-{'skip' if MODE == 'skip' else 'wide'}.json"), "w"),
          indent=1)
