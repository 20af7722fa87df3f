"""Probe: host time of a forward call with launch plans (kernels.plans) against the same call with the plans
forgotten before every call (the full path: checks, the model's pick, the arguments, three TMA descriptors),
the harness's config call, the mma.sync path and SDPA cuDNN, at B16 H16 N1024 (the sweep's smallest shape),
d 64 and 128, causal and not, bf16. Host time: 200 calls queued behind a 2 s GPU sleep (wall time a call);
back to back: CUDA events around 200 calls without the sleep; GPU time: events around 200 calls queued
behind a sleep. Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-host-h100-2026-11-25/plans_probe.py"""
import importlib.util, pathlib

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import kernels
from kernels import dispatch, flash_sm90, plans
from validation import probe_record

# the timing of the probe before plans (its events and gpu_time), so both measure alike
_spec = importlib.util.spec_from_file_location(
    "host_probe", pathlib.Path(__file__).parent.parent / "profile-host-h100-2026-11-24" / "host_probe.py")
host_probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(host_probe)
events, gpu_time = host_probe.events, host_probe.gpu_time
B, H, N = 16, 16, 1024


def calls(q, k, v, causal, cfg):
    def no_plan():
        plans.clear()
        return kernels.flash_attention(q, k, v, causal=causal)

    def cudnn():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return {"kernels.flash_attention (plan)": lambda: kernels.flash_attention(q, k, v, causal=causal),
            "kernels.flash_attention (no plan)": no_plan,
            "flash_sm90.attention(config)": lambda: flash_sm90.attention(q, k, v, causal=causal, config=cfg),
            "kernels.flash_attention sm80 (plan)": lambda: kernels.flash_attention(q, k, v, causal=causal,
                                                                                    backend="sm80"),
            "sdpa cudnn": cudnn}


rows = []
for d in (128, 64):
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (True, False):
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
        cfg = dispatch.choose(["flash_sm90"], shape, 0).config
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        for name, f in calls(q, k, v, causal, cfg).items():
            err = float((f().float() - ref).abs().max())
            for _ in range(20):
                f()
            host, _ = events(f, 200, True)
            _, b2b = events(f, 200, False)
            rows.append({"impl": name, "d": d, "causal": causal, "config": cfg.name, "max_abs_err": err,
                         "host_us": host * 1e6, "back_to_back_us": b2b * 1e3, "gpu_us": gpu_time(f) * 1e3})
            r = rows[-1]
            print(f"d{d} {'causal' if causal else 'full  '} {name:36} host {r['host_us']:7.1f} us  back-to-back "
                  f"{r['back_to_back_us']:7.1f} us  GPU {r['gpu_us']:7.1f} us  err {err:.3g}", flush=True)
probe_record.write("plans.json", rows, "PYTHONPATH=. python3 validation/results/profile-host-h100-2026-11-25/plans_probe.py", shape=[B, H, N], dtype="bf16")
