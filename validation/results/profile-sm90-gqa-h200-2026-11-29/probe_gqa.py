"""Probe: grouped-query attention (H query heads over H_kv K/V heads, as Llama-style models run it) on the wgmma
forward, the launcher's pick and schedule, beside FlashAttention-4 (where it imports), causal and not.  Each checked
against the float32 reference on the first of 3 fresh input sets, then timed in one interleaved group a shape.
Run from the repository root (-> $OUT/gqa-run<run>.json):
PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages python3 <this file> [rounds] [run]"""
import sys

import torch

from iomodel import chooser, families
from kernels import flash_sm90
from validation import probe_record
from validation.peers import peer_runners
from validation.timing import CudaEventTimer

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
RUN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
SHAPES = [  # (d, H, H_kv, N, B, causal)
    (128, 32, 8, 4096, 4, False), (128, 32, 8, 4096, 4, True), (128, 32, 8, 16384, 1, False),
    (128, 32, 8, 16384, 1, True), (128, 64, 8, 8192, 1, True), (64, 32, 4, 8192, 2, False)]


def inputs(d, H, H_kv, N, B, seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    make = lambda h: torch.randn(B, h, N, d, generator=g, device="cuda").to(torch.bfloat16)  # noqa: E731
    return [(make(H), make(H_kv), make(H_kv)) for _ in range(3)]


def main():
    fa4, timer, rows = peer_runners(torch)["fa4"][0], CudaEventTimer(), []
    label = families.get("flash_sm90").label
    for d, H, H_kv, N, B, causal in SHAPES:
        s = {"B": B, "H": H, "H_kv": H_kv, "N_q": N, "N_k": N, "d": d, "causal": causal, "dtype": "bf16"}
        cfg = chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), s).config
        fns = [(f"ours {label(cfg)}", lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal))]
        if fa4 is not None:
            fns.append(("fa4", lambda q, k, v: fa4(q, k, v, causal)))
        sets = inputs(d, H, H_kv, N, B, seed=7727 * RUN + d + N + causal)
        err = probe_record.reference_errors(fns, *sets[0], causal, f"d{d} H{H}/{H_kv} N{N}")
        got = probe_record.timed_rows(timer, [f for _, f in fns], [lab for lab, _ in fns], sets, rounds=ROUNDS,
                                      d=d, H=H, H_kv=H_kv, N=N, B=B, causal=causal)
        for r in got:
            r["rel_err"] = err[r["impl"]]
        ours = got[0]["median_ms"]
        for r in got:
            print(f"d{d} H{H}/{H_kv} N{N} B{B} {'causal' if causal else 'plain ':6s} {r['impl']:24s} "
                  f"{r['median_ms']:.4f} ms (min {r['min_ms']:.4f})  over ours {r['median_ms'] / ours:.3f}", flush=True)
        rows += got
    probe_record.write(f"gqa-run{RUN}.json", rows, "PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages "
                       f"python3 validation/results/profile-sm90-gqa-h200-2026-11-29/probe_gqa.py {ROUNDS} {RUN}",
                       fa4=getattr(fa4, "version", None))


if __name__ == "__main__":
    main()
