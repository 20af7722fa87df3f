"""Probe: d = 192 / 256 causal under the dynamic schedule with the L2-capped sections of d <= 128.  ncu
(`ncu_fa4_clock.sh`) had our static walk faster than FlashAttention-4 a clock for a clock there (2.7% at d = 256,
6% at d = 192 N = 8192) but reading 2.3 to 3.3x its DRAM bytes: its one section of all heads (l2_section_heads)
holds more K and V than the L2, as d = 128's causal sections did before they were capped.  Each shape's model pick:
`static` as shipped, `static sN` with sections of N heads, `dynamic` the claims with heads_per_section's L2 cap
(SM90_DYN_MAX=256, the launcher's DYNAMIC_MAX_HEAD_DIM raised with it), `dynamic all` one section of all heads;
beside cuDNN in one interleaved group (the harness's timer, 3 fresh input sets, outputs checked first).  Run from
the repository root: PYTHONPATH=. python3 <this file> 7   (rounds) -> wide-dynamic.json
With `7 verify`, after the launcher took the rule (schedule_defines, WIDE_DYNAMIC): `shipped` (the launcher's own
choice) against `static` (the walk forced, _defines=()) at shapes with and without sections -> wide-verify.json."""
import sys
import time

import torch

from iomodel import chooser, families
from kernels import compile as kcompile
from kernels import flash_sm90
from validation import probe_record
from validation.peers import peer_runners
from validation.timing import CudaEventTimer

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
DYN = ("SM90_DYN_MAX=256",)
SHAPES = [(256, 8, 8192, 2), (192, 10, 8192, 2), (256, 8, 16384, 1), (256, 8, 2048, 8), (192, 10, 4096, 4)]
VERIFY = [(192, 10, 4096, 4), (256, 8, 2048, 8), (192, 10, 2048, 8), (256, 8, 4096, 4), (192, 10, 1024, 16),
          (256, 8, 1024, 16), (256, 8, 8192, 2)]


def variant(cfg, dynamic: bool, sections=None):
    """A call of one build: the dynamic ones with the launcher's head-dim bound raised while the plan is made."""
    def run(q, k, v):
        old = flash_sm90.DYNAMIC_MAX_HEAD_DIM
        flash_sm90.DYNAMIC_MAX_HEAD_DIM = 256 if dynamic else old
        try:
            return flash_sm90.attention(q, k, v, causal=True, config=cfg, _defines=DYN if dynamic else None,
                                        _sections=sections)
        finally:
            flash_sm90.DYNAMIC_MAX_HEAD_DIM = old
    return run


def verify():
    runners, timer, rows, t0 = peer_runners(torch), CudaEventTimer(), [], time.time()
    cudnn, fam, gpu = runners["sdpa_cudnn"][0], families.get("flash_sm90"), torch.cuda.get_device_name()
    for d, H, N, B in VERIFY:
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": True, "dtype": "bf16"}
        cfg = chooser.choose(["flash_sm90"], gpu, shape).config
        sets = probe_record.random_sets(B, H, N, d, seed=23 * N + d)
        dynamic = flash_sm90.plan(*sets[0], causal=True, config=cfg).counters is not None
        fns = [lambda q, k, v: flash_sm90.attention(q, k, v, causal=True, config=cfg),
               lambda q, k, v: flash_sm90.attention(q, k, v, causal=True, config=cfg, _defines=())]
        labels = [f"{fam.label(cfg)} shipped ({'dynamic' if dynamic else 'static'})", f"{fam.label(cfg)} static"]
        rows += probe_record.checked_rows(timer, fns, labels, sets, ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, True)),
                                          keep_going=True, rounds=ROUNDS, d=d, N=N, B=B, H=H, causal=True)
        print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.write("wide-verify.json", rows, "PYTHONPATH=. python3 validation/results/"
                       f"profile-sm90-tail-split-h200-2026-11-28/probe_wide_dynamic.py {ROUNDS} verify")
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H"), lambda r: r["impl"] == "sdpa_cudnn")))


def main():
    if sys.argv[2:3] == ["verify"]:
        return verify()
    runners, timer, rows, t0 = peer_runners(torch), CudaEventTimer(), [], time.time()
    cudnn, fam, gpu = runners["sdpa_cudnn"][0], families.get("flash_sm90"), torch.cuda.get_device_name()
    picks = {}
    for d, H, N, B in SHAPES:
        shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": True, "dtype": "bf16"}
        picks[(d, H, N, B)] = chooser.choose(["flash_sm90"], gpu, shape).config
    kcompile.precompile([(lambda c, df: lambda: flash_sm90.module(c, "bf16", True, df))(c, df)
                         for c in set(picks.values()) for df in ((), DYN)])
    for (d, H, N, B), cfg in picks.items():
        small = 4 if d == 256 else 5
        fns = [variant(cfg, False), variant(cfg, False, small), variant(cfg, True), variant(cfg, True, B * H)]
        labels = [f"{fam.label(cfg)} {x}" for x in ("static", f"static s{small}", "dynamic", "dynamic all")]
        rows += probe_record.checked_rows(timer, fns, labels, probe_record.random_sets(B, H, N, d, seed=19 * N + d),
                                          ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, True)), keep_going=True,
                                          rounds=ROUNDS, d=d, N=N, B=B, H=H, causal=True)
        print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    probe_record.write("wide-dynamic.json", rows, "PYTHONPATH=. python3 validation/results/"
                       f"profile-sm90-tail-split-h200-2026-11-28/probe_wide_dynamic.py {ROUNDS}")
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "H"), lambda r: r["impl"] == "sdpa_cudnn")))


if __name__ == "__main__":
    main()
