"""Clock and power under sustained load: does the Hopper backward lose its ratio to cuDNN's through the
clock it is given?  For each shape, phases of back-to-back calls of one implementation (after a pause),
then both alternating call by call; every call timed with CUDA events; nvidia-smi samples the SM clock,
power and throttle reasons every 50 ms beside it.  A cold call of the CTA-timeline build (per query tile)
against one right after a hot phase shows whether the loop itself slows (README.md beside it).
Run from the repository root: PYTHONPATH=. python3 validation/results/profile-power-h100-2026-11-24/power_probe.py"""
import json, os, statistics, subprocess, sys, threading, time

import torch

sys.argv = [sys.argv[0], "none"]          # bwd_probe runs nothing at import with this
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "profile-bwd-sm90-h100-2026-11-24"))
import bwd_probe  # noqa: E402
from kernels import flash_bwd_sm90  # noqa: E402

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
HOT_S, PAUSE_S = 5.0, 3.0


class Smi:
    """nvidia-smi's samples, each stamped with this process's clock as it arrives."""
    FIELDS = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"

    def __init__(self):
        self.samples = []
        try:
            self.p = subprocess.Popen(["nvidia-smi", f"--query-gpu={self.FIELDS}", "--format=csv,noheader,nounits",
                                       "-lms", "50"], stdout=subprocess.PIPE, text=True)
        except OSError as e:
            print("no nvidia-smi:", e)
            self.p = None
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            parts = [x.strip() for x in line.split(",")]
            try:
                self.samples.append((time.time(), float(parts[0]), float(parts[1]), float(parts[2]),
                                     float(parts[3]), parts[4]))
            except (ValueError, IndexError):
                pass

    def window(self, t0, t1):
        s = [x for x in self.samples if t0 <= x[0] <= t1]
        if not s:
            return {}
        reasons = sorted({x[5] for x in s})
        return {"sm_mhz_mean": statistics.mean(x[1] for x in s), "sm_mhz_min": min(x[1] for x in s),
                "power_w_mean": statistics.mean(x[3] for x in s), "temp_c_max": max(x[4] for x in s),
                "throttle_reasons": reasons, "samples": len(s)}


def calls(fns, names, seconds):
    """Call fns in turn (one each, round robin) for `seconds`; per-call event times per name."""
    times = {n: [] for n in names}
    t_start = time.time()
    while time.time() - t_start < seconds:
        evs = []
        for _ in range(8):
            for f, n in zip(fns, names):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(); f(); b.record()
                evs.append((n, a, b))
        torch.cuda.synchronize()
        for n, a, b in evs:
            times[n].append(a.elapsed_time(b))
    return times, t_start, time.time()


def summary(ts, t0, t1, smi, label):
    half = ts[len(ts) // 2:]
    # the clock over the second half of the phase (the steady part)
    w = smi.window(t0 + (t1 - t0) / 2, t1)
    r = {"phase": label, "calls": len(ts), "first5_ms_median": statistics.median(ts[:5]),
         "second_half_ms_median": statistics.median(half), **w}
    return r


def phases(smi, pair):
    """Two (name, fn) in turn, each alone for HOT_S after a pause, twice; then both alternating call by call."""
    (a, fa), (b, fb) = pair
    rows = []
    for name, f in ((a, fa), (b, fb), (a, fa), (b, fb)):
        time.sleep(PAUSE_S)
        t, t0, t1 = calls([f], [name], HOT_S)
        rows.append(summary(t[name], t0, t1, smi, name))
    time.sleep(PAUSE_S)
    t, t0, t1 = calls([fa, fb], [a, b], 2 * HOT_S)
    for name in (a, b):
        rows.append(summary(t[name], t0, t1, smi, f"alternating: {name}"))
    return rows


def shape_rows(shape, smi):
    B, H, N, d, causal = shape
    q, k, v, out, lse, do, qg, kg, vg, oc = bwd_probe.make(B, H, N, d, causal, 5)
    cfg = bwd_probe.CFG[d]
    ours = lambda: flash_bwd_sm90.backward(do, q, k, v, out, lse, causal=causal, config=cfg)
    cudnn = lambda: torch.autograd.grad(oc, (qg, kg, vg), do, retain_graph=True)
    for f in (ours, cudnn):
        f()
    torch.cuda.synchronize()
    rows = phases(smi, (("ours", ours), ("cudnn", cudnn)))
    f = bwd_probe.flops(B, H, N, d, causal)
    for r in rows:
        r["shape"] = list(shape)
        r["tflops_second_half"] = f / r["second_half_ms_median"] / 1e9
    return rows


def forward_pair_rows(shape, smi, family, attention, peer_name, peer):
    """phases() of our forward `family` (its `attention`, the model's config) against `peer(q, k, v, causal)` on
    one (B, H, N, d, causal) shape of fresh bf16 inputs, the outputs compared first (the forward probes beside
    this one)."""
    from kernels import dispatch

    B, H, N, d, causal = shape
    q, k, v = (torch.randn((B, H, N, d), device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cfg = dispatch.choose([family], {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal,
                                     "dtype": "bf16"}, 0).config
    ours = lambda: attention(q, k, v, causal=causal, config=cfg)   # noqa: E731
    theirs = lambda: peer(q, k, v, causal)   # noqa: E731
    err = float((ours().float() - theirs().float()).abs().max())
    torch.cuda.synchronize()
    rows = phases(smi, (("ours", ours), (peer_name, theirs)))
    flops = 4 * B * H * N * N * d / (2 if causal else 1)
    for r in rows:
        r.update({"shape": list(shape), "config": str(cfg), f"max_abs_diff_vs_{peer_name}": err,
                  "tflops_second_half": flops / r["second_half_ms_median"] / 1e9})
    return rows


def timeline_cold_hot(shape, smi):
    """Per query tile time of the CTA-timeline build, cold (after a pause) and right after a hot phase."""
    B, H, N, d, causal = shape
    q, k, v, out, lse, do = bwd_probe.make(B, H, N, d, causal, 5)[:6]
    cfg = bwd_probe.CFG[d]
    res = []
    for label in ("cold", "hot"):
        time.sleep(PAUSE_S)
        if label == "hot":
            calls([lambda: flash_bwd_sm90.backward(do, q, k, v, out, lse, causal=causal, config=cfg)],
                  ["ours"], HOT_S)
        t0 = time.time()
        r = bwd_probe.timeline(B, H, N, d, causal)
        r["phase"] = label
        r["clock_during"] = smi.window(t0 - 0.2, time.time() + 0.1)
        res.append(r)
        print(label, json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
    return res


def sweep(shapes, shape_rows, smi):
    """Every shape's phases (shape_rows(shape, smi)), each row printed as it comes."""
    rows = []
    for shape in shapes:
        rr = shape_rows(shape, smi)
        rows += rr
        for r in rr:
            print(f"{shape} {r['phase']:>18}: first5 {r['first5_ms_median']:.3f} ms, 2nd half {r['second_half_ms_median']:.3f} ms "
                  f"({r['tflops_second_half']:.0f} TF/s), {r.get('sm_mhz_mean', 0):.0f} MHz (min {r.get('sm_mhz_min', 0):.0f}), "
                  f"{r.get('power_w_mean', 0):.0f} W, {r.get('throttle_reasons')}", flush=True)
    return rows


def main():
    smi = Smi()
    time.sleep(1.0)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
            "cudnn": torch.backends.cudnn.version()}
    rows = sweep(((1, 16, 16384, 128, False), (4, 16, 4096, 128, False), (1, 16, 16384, 128, True)), shape_rows, smi)
    tl = timeline_cold_hot((1, 16, 16384, 128, False), smi)
    json.dump({**meta, "rows": rows, "timelines": tl, "smi_samples": smi.samples},
              open(f"{OUT}/power-clocks.json", "w"), indent=1)


if __name__ == "__main__":
    main()
