"""The refit of the flash_sm90 plan (iomodel/families/flash_sm90.py, SM90_PLAN, 2026-11-25): the model's
time of every flash_sm90 row measured with several configs of one shape (the five sweeps with every config
at N = 4096: runs 9-11 of 2026-11-22 and the sweeps of 2026-11-24; the N = 1024 probes: small-batch.json
without its d = 128 causal rows, measured before the causal sections were sized by waves, and this folder's
staged-o.json, the register-store kernel's rows), against a grid of (step latency, its part a warp,
the overlap slope of a consumer warpgroup): median and mean |error| and each shape's pick regret (the
pick's measured time over the fastest's).  No GPU.  From the repository root:
PYTHONPATH=. python3 validation/results/profile-epilogue-sm90-h100-2026-11-25/refit_sm90_plan.py "[100]" "[40, 50]" "[0.4, 0.5]"
prints one line a point; ``show(sl, spw, slope)`` lists three shapes' rows."""
import dataclasses, itertools, json, pathlib, sys
import numpy as np
from iomodel import families, api
from iomodel.families import flash_sm90 as F

fam = families.get('flash_sm90')
ROOT = str(pathlib.Path(__file__).resolve().parent.parent) + '/'

def load():
    data = []   # (source, shape dict, config label, measured ms)
    for f in ['h100-sxm-2026-11-22-run9.json','h100-sxm-2026-11-22-run10.json','h100-sxm-2026-11-22-run11.json',
              'h100-sxm-2026-11-24-sweep-run1.json','h100-sxm-2026-11-24-sweep-run2.json']:
        d = json.load(open(ROOT + f))
        for r in d['rows']:
            if r['kernel'] == 'flash_sm90' and r.get('ok'):
                s = {k: r['shape'][k] for k in ('B','H','H_kv','N_q','N_k','d','causal','dtype')}
                data.append((f, s, r['config'], r['measured_ms']))
    # probes: all configs at B16 N1024 (GPU time)
    d = json.load(open(ROOT + 'profile-small-batch-h100-2026-11-24/small-batch.json'))
    for r in d['rows']:
        if r['impl'].startswith('m') and not (r['d'] == 128 and r['causal']):   # (d 128 causal: before the wave-sized sections)
            B, H, N = r['shape']
            s = dict(B=B, H=H, H_kv=H, N_q=N, N_k=N, d=r['d'], causal=r['causal'], dtype='bf16')
            data.append(('small-batch', s, r['impl'], r['median_ms']))
    d = json.load(open(ROOT + 'profile-epilogue-sm90-h100-2026-11-25/staged-o.json'))
    shapes = {"B16 N1024 d128 causal": (16, 16, 1024, 128, True), "B16 N1024 d128": (16, 16, 1024, 128, False),
              "B4 N4096 d128 causal": (4, 16, 4096, 128, True), "B1 N32768 d128 causal": (1, 16, 32768, 128, True)}
    for r in d['rows']:
        if r['shape'] in shapes and not r['staged_o'] and r['impl'].startswith('m'):
            B, H, N, dd, c = shapes[r['shape']]
            s = dict(B=B, H=H, H_kv=H, N_q=N, N_k=N, d=dd, causal=c, dtype='bf16')
            if any(x[0] == 'staged' and x[1] == s and x[2] == r['impl'] for x in data):
                continue   # one row a config (the register-store kernel; staged configs ran it under the define)
            data.append(('staged', s, r['impl'], r['median_ms']))
    # sliding windows on the static walk (their schedule since 2026-11-25): three configs at N = 32768
    d = json.load(open(ROOT + 'profile-window-h100-2026-11-25/window-schedules.json'))
    for r in d['rows']:
        if r['impl'].startswith('window') and r['impl'].endswith('static, persistent'):
            s = dict(B=1, H=16, H_kv=16, N_q=32768, N_k=32768, d=128, causal=True, dtype='bf16', window_left=4096,
                     window_right=0)
            data.append(('window', s, r['impl'].split()[1], r['median_ms']))
    return data

def cfg_of(name_or_dict):
    if isinstance(name_or_dict, dict):
        return fam.config(name_or_dict, {})
    name_or_dict = name_or_dict.split()[0]
    for c in fam.shipped:
        if c.name == name_or_dict: return c
    raise KeyError(name_or_dict)

def predict(data, plan):
    object.__setattr__(fam, 'plan', plan)
    api.family_model.cache_clear()
    out = []
    for src, s, c, ms in data:
        cfg = cfg_of(c) if isinstance(c, str) else fam.config(c, s)
        p = api.rank_configs('flash_sm90', 'h100-sxm', s, [cfg])[0]
        out.append(p.time_s * 1e3)
    return np.array(out)

def score(data, pred):
    meas = np.array([x[3] for x in data])
    err = np.abs(pred / meas - 1)
    # pick regret per (source, shape) group with >= 4 configs measured
    groups = {}
    for i, (src, s, c, ms) in enumerate(data):
        groups.setdefault((src, tuple(sorted(s.items()))), []).append(i)
    regrets = []
    for key, idx in groups.items():
        if len(idx) < 3: continue
        best = min(meas[i] for i in idx)
        pick = min(idx, key=lambda i: pred[i])
        regrets.append((meas[pick] / best - 1, key))
    return np.median(err), np.mean(err), regrets

if __name__ == '__main__':
    data = load()
    print(len(data), 'rows')
    base = F.SM90_PLAN   # (its other fields; the three below replace the plan's)
    for sl, spw, im in itertools.product(*[eval(a) for a in sys.argv[1:4]]):
        plan = dataclasses.replace(base, step_latency_cycles=sl, step_latency_cycles_per_warp=spw, interleave_slope=im, interleave_max=max(1.8, 1 + 2 * im))
        pred = predict(data, plan)
        med, mean, reg = score(data, pred)
        worst = sorted(reg, reverse=True)[:3]
        print(f"sl {sl} spw {spw} slope {im}: median {med*100:.2f}% mean {mean*100:.2f}% mean regret "
              f"{np.mean([r for r, _ in reg])*100:.2f}% regrets>5%: {sum(r>0.05 for r,_ in reg)}/{len(reg)} "
              f"max regret {worst[0][0]*100:.1f}% ({dict(worst[0][1][1])['N_q']},{dict(worst[0][1][1])['d']},{dict(worst[0][1][1])['causal']},{worst[0][1][0][:12]})", flush=True)

def show(sl, spw, slope, groups=(("staged", 1024, 128, True), ("h100-sxm-2026-11-24-sweep-run2.json", 4096, 128, True), ("h100-sxm-2026-11-24-sweep-run2.json", 4096, 128, False))):
    data = load()
    plan = dataclasses.replace(F.SM90_PLAN, step_latency_cycles=sl, step_latency_cycles_per_warp=spw, interleave_slope=slope,
                               interleave_max=max(1.8, 1 + 2 * slope))
    pred = predict(data, plan)
    for src, N, d, c in groups:
        print(src, N, d, c)
        for i, (s_, sh, cfg, ms) in enumerate(data):
            if s_ == src and sh['N_q'] == N and sh['d'] == d and sh['causal'] == c:
                print(f"   {cfg if isinstance(cfg, str) else cfg}  meas {ms:.4f} pred {pred[i]:.4f} {(pred[i]/ms-1)*100:+.1f}%")
