"""Probe: the host time of one forward call (Python launch path) against its GPU time, B16 H16 N1024 d128
causal bf16 (the sweep's smallest shape), ours (kernels.flash_attention, and flash_sm90.attention with the
config given) and SDPA cuDNN. Host time: 200 calls queued behind a 2 s GPU sleep (the queue never drains),
wall time over calls; back-to-back: CUDA events around 200 calls without the sleep (what the harness's
forward rows time); GPU time: events around 200 calls queued behind a sleep. Then a cProfile of 200 calls of
kernels.flash_attention. Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-host-h100-2026-11-24/host_probe.py"""
import cProfile, io, pstats, time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import kernels
from kernels import dispatch, flash_sm90
from validation import probe_record

B, H, N, d = 16, 16, 1024, 128


def events(f, calls, sleep):
    torch.cuda.synchronize()
    if sleep:
        torch.cuda._sleep(int(2e9))
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    t = time.perf_counter()
    for _ in range(calls):
        f()
    host = (time.perf_counter() - t) / calls
    e.record()
    e.synchronize()
    return host, s.elapsed_time(e) / calls


def gpu_time(f, calls=200):
    """ms a call on the GPU: the sleep ahead, then the calls; the start event waits behind the sleep too, so
    time a short share right after the sleep began is not counted: the start is recorded after the first call."""
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))
    f()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(calls):
        f()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / calls


def calls(q, k, v, cfg):
    def cudnn():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    return {"kernels.flash_attention": lambda: kernels.flash_attention(q, k, v, causal=True),
            "flash_sm90.attention(config)": lambda: flash_sm90.attention(q, k, v, causal=True, config=cfg),
            "sdpa cudnn": cudnn}


def main():
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cfg = dispatch.choose(["flash_sm90"], {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": True,
                                           "dtype": "bf16"}, 0).config
    rows = []
    for name, f in calls(q, k, v, cfg).items():
        for _ in range(20):
            f()
        host, _ = events(f, 200, True)
        _, b2b = events(f, 200, False)
        gpu = gpu_time(f)
        rows.append({"impl": name, "host_us": host * 1e6, "back_to_back_us": b2b * 1e3, "gpu_us": gpu * 1e3})
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(200):
        kernels.flash_attention(q, k, v, causal=True)
    pr.disable()
    torch.cuda.synchronize()
    st = io.StringIO()
    pstats.Stats(pr, stream=st).sort_stats("cumulative").print_stats(30)
    probe_record.write("host.json", rows, "PYTHONPATH=. python3 validation/results/profile-host-h100-2026-11-24/host_probe.py",
                       shape=[B, H, N, d, "causal"], config=cfg.name, profile=st.getvalue())
    for r in rows:
        print(f"{r['impl']:30} host {r['host_us']:7.1f} us  back-to-back {r['back_to_back_us']:7.1f} us  GPU {r['gpu_us']:7.1f} us")


if __name__ == "__main__":
    main()
