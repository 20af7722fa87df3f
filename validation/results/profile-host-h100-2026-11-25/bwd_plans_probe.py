"""Probe: host time of a backward call with launch plans (kernels.plans) against the same call with the plans
forgotten before every call, and of a training step through autograd (forward + backward of
kernels.flash_attention on tensors that require grad), beside SDPA cuDNN's, at B16 H16 N1024 bf16, d 128 and 64,
causal. The timing of ../profile-host-h100-2026-11-24/host_probe.py (host: calls queued behind a GPU sleep; back
to back: events around the calls; GPU: events around calls queued behind a sleep). Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-host-h100-2026-11-25/bwd_plans_probe.py"""
import importlib.util, pathlib

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import kernels
from kernels import plans
from validation import probe_record

_spec = importlib.util.spec_from_file_location(
    "host_probe", pathlib.Path(__file__).parent.parent / "profile-host-h100-2026-11-24" / "host_probe.py")
host_probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(host_probe)
B, H, N = 16, 16, 1024


def calls(d):
    q, k, v, do = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = kernels.flash_attention(q, k, v, causal=True, return_lse=True)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))

    def no_plan():
        plans.clear()
        return kernels.flash_attention_backward(do, q, k, v, out, lse, causal=True)

    def step():
        o = kernels.flash_attention(qg, kg, vg, causal=True)
        return torch.autograd.grad(o, (qg, kg, vg), do)

    def cudnn_step():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            o = torch.nn.functional.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
        return torch.autograd.grad(o, (qg, kg, vg), do)

    return {"flash_attention_backward (plan)": lambda: kernels.flash_attention_backward(do, q, k, v, out, lse, causal=True),
            "flash_attention_backward (no plan)": no_plan,
            "autograd step (forward + backward)": step,
            "sdpa cudnn autograd step": cudnn_step}


def main():
    rows = []
    for d in (128, 64):
        for name, f in calls(d).items():
            for _ in range(10):
                f()
            host, _ = host_probe.events(f, 100, True)
            _, b2b = host_probe.events(f, 100, False)
            rows.append({"impl": name, "d": d, "host_us": host * 1e6, "back_to_back_us": b2b * 1e3,
                         "gpu_us": host_probe.gpu_time(f, 100) * 1e3})
            r = rows[-1]
            print(f"d{d} {name:38} host {r['host_us']:7.1f} us  back-to-back {r['back_to_back_us']:7.1f} us  "
                  f"GPU {r['gpu_us']:7.1f} us", flush=True)
    probe_record.write("bwd-plans.json", rows,
                       "PYTHONPATH=. python3 validation/results/profile-host-h100-2026-11-25/bwd_plans_probe.py",
                       shape=[B, H, N, "causal"], dtype="bf16")


if __name__ == "__main__":
    main()
