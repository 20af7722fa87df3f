"""Probe: why the mma.sync forward's harness medians sit 8-14% above their minima at N = 16384 where SDPA
flash's sit at 1%. The sweep's group of one shape (B1 H32 N16384, d 64 and d 128, non-causal) timed as
`validation.timing.CudaEventTimer.time_interleaved` times it (5 rounds, the sweep's order), but every call's
time kept with its round, its place in the share and the kernel before it, and nvidia-smi sampling clocks
and power every 20 ms beside it: with the lead-in of one call the harness had (`lead_in_s=0`), and with the
time-based lead-in (`lead_in_s=0.1`, now the default). `PROBE_QUEUE_AHEAD=1`: each share behind a GPU sleep
(the decode rows' way; the first run of this probe). Then each kernel alone, 30 calls back to back.
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-sm80-spread-h100-2026-11-25/spread_probe.py"""
import subprocess, sys, time, os, torch
import kernels
from validation.timing import CudaEventTimer, round_order, round_share
from validation.peers import peer_runners
from validation import probe_record
from iomodel.families.flash_sm80 import FlashConfig

OUT = os.environ.get("OUT", "/tmp")
QUEUE_AHEAD = os.environ.get("PROBE_QUEUE_AHEAD") == "1"
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active",
                        "--format=csv,noheader", "-lms", "20"], stdout=open(os.path.join(OUT, "smi.csv"), "w"))
peers = peer_runners(torch)
SM90 = {64: dict(block_m=192, block_n=128, consumers=3, stages=2, head_dim=64),
        128: dict(block_m=128, block_n=176, consumers=2, stages=2, head_dim=128)}
SM80 = {64: FlashConfig(128, 128, 4, 1, 64), 128: FlashConfig(128, 64, 4, 2, 128)}


def fns_for(d):
    from iomodel.families.flash_sm90 import Sm90Config
    c90 = Sm90Config(**SM90[d])
    return {
        "flash_sm80": lambda q, k, v: kernels.run("flash_sm80", q, k, v, causal=False, config=SM80[d]),
        "flash_sm90": lambda q, k, v: kernels.run("flash_sm90", q, k, v, causal=False, config=c90),
        "sdpa_flash": lambda q, k, v: peers["sdpa_flash"][0](q, k, v, False),
        "sdpa_cudnn": lambda q, k, v: peers["sdpa_cudnn"][0](q, k, v, False),
        "sdpa_efficient": lambda q, k, v: peers["sdpa_efficient"][0](q, k, v, False),
        "unfused": lambda q, k, v: kernels.run("unfused", q, k, v, causal=False),
    }


class Logged(CudaEventTimer):
    """The harness's timer, keeping each call's time with (round, kernel, place in the share)."""
    def time_logged(self, names, fns, inputs, rounds=5, queue_ahead=False):
        log = []
        orig = self._collect_round

        def collect(run, pending):
            orig(run, pending)
            for j, starts, ends in pending:
                for i, (s, e) in enumerate(zip(starts, ends)):
                    log.append({"round": self._r, "kernel": names[j], "place": i, "ms": s.elapsed_time(e),
                                "prev": self._prev.get(j)})
        self._collect_round = collect
        # the same loop as time_interleaved, with the round and the kernel before each share noted
        from validation.timing import _EventRun
        run = _EventRun(fns, inputs, None, queue_ahead)
        for j in range(len(fns)):
            self._estimate_repeats(run, j, rounds)
        for r in range(rounds):
            self._r, self._prev, pending, last = r, {}, [], None
            for j in round_order(len(fns), r):
                ev = self._launch_share(run, j, round_share(run.repeats[j], rounds, r))
                self._prev[j] = last
                last = names[j]
                if ev is not None:
                    pending.append((j, *ev))
            self._collect_round(run, pending)
        return log


rows, t0 = [], time.time()
for d in (64, 128):
    g = torch.Generator(device="cuda"); g.manual_seed(31 + d)
    sets = [tuple(torch.randn(1, 32, 16384, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
            for _ in range(3)]
    fns = fns_for(d)
    names = list(fns)
    ref = fns["sdpa_flash"](*sets[0]).float()
    for n in names:
        err = (fns[n](*sets[0]).float() - ref).abs().max().item()
        print(f"d{d} {n}: max abs diff vs sdpa_flash {err:.4f}", file=sys.stderr)
    torch.cuda.synchronize()
    for lead_in_s in (0.0, 0.1):
        timer = Logged(min_repeats=20, target_s=0.12, lead_in_s=lead_in_s)
        mark = time.time()
        for rec in timer.time_logged(names, [fns[n] for n in names], sets, queue_ahead=QUEUE_AHEAD):
            rows.append({"d": d, "phase": "interleaved", "lead_in_s": lead_in_s, **rec})
        rows.append({"d": d, "phase": "mark", "lead_in_s": lead_in_s, "from": mark, "to": time.time()})
    for n in ("flash_sm80", "sdpa_flash"):
        torch.cuda._sleep(int(2e8)); torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(30)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(30)]
        for i in range(30):
            starts[i].record(); fns[n](*sets[i % 3]); ends[i].record()
        torch.cuda.synchronize()
        for i in range(30):
            rows.append({"d": d, "phase": "alone", "kernel": n, "place": i, "ms": starts[i].elapsed_time(ends[i])})
    print(f"d{d} done {time.time() - t0:.0f} s", file=sys.stderr)
smi.terminate()
probe_record.write("spread-queued.json" if QUEUE_AHEAD else "spread.json", rows,
                   "PYTHONPATH=. python3 validation/results/profile-sm80-spread-h100-2026-11-25/spread_probe.py",
                   queue_ahead=QUEUE_AHEAD)
import statistics as st
for d, lead_in_s in ((64, 0.0), (64, 0.1), (128, 0.0), (128, 0.1)):
    print(f"d = {d}, lead-in {lead_in_s} s, interleaved: each kernel's calls by round (ms), [kernel before its share]")
    med = {}
    for n in ("flash_sm80", "sdpa_flash", "flash_sm90", "sdpa_cudnn", "sdpa_efficient", "unfused"):
        rs = [r for r in rows if r["d"] == d and r["phase"] == "interleaved" and r["kernel"] == n
              and r["lead_in_s"] == lead_in_s]
        line = []
        for rd in range(5):
            c = [r for r in rs if r["round"] == rd]
            if c:
                line.append(f"[{(c[0]['prev'] or '-')[:8]}] " + " ".join(f"{r['ms']:.2f}" for r in c))
        ms = [r["ms"] for r in rs]
        med[n] = st.median(ms)
        print(f"  {n:14} med {st.median(ms):.3f} min {min(ms):.3f} | " + " | ".join(line))
    print(f"  flash_sm80 / sdpa_flash {med['sdpa_flash'] / med['flash_sm80']:.3f}x, "
          f"flash_sm90 / sdpa_cudnn {med['sdpa_cudnn'] / med['flash_sm90']:.3f}x")
    for n in ("flash_sm80", "sdpa_flash") if lead_in_s else ():
        ms = [r["ms"] for r in rows if r["d"] == d and r["phase"] == "alone" and r["kernel"] == n]
        print(f"  alone {n:14} " + " ".join(f"{m:.2f}" for m in ms))
