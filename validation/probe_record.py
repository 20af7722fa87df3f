"""The record a probe under validation/results/profile-*/ writes: its rows with the device, torch, the date and
the command that made them, as JSON under $OUT (the device tool brings $OUT back); the rows of one group
of callables timed together; another probe script loaded for its functions.  torch is imported inside."""
from __future__ import annotations

import contextlib
import json
import os
import time

__all__ = ["write", "timed_rows", "checked_rows", "config_rows", "peer_table", "sustained_lines", "add_sustained",
           "peer_group", "report", "output_distances", "distance_lines", "swapped_module", "random_sets", "sm80_build",
           "sm80_precompile", "sm80_builds", "sm80_build_groups", "sm90_precompile", "sm90_call", "sm90_build_groups",
           "sm90_peer_setup", "shape_sets", "sm90_launch", "reference_errors", "load"]

#: the Hopper backward's probe of 2026-11-24: its inputs (`make`), FLOP count and CTA timelines, used by later probes
BWD_SM90_PROBE = "validation/results/profile-bwd-sm90-h100-2026-11-24/bwd_probe.py"
#: the power probe of 2026-11-28: its `sampled` (a callable run back to back under nvidia-smi), used by later probes
POWER_PROBE = "validation/results/profile-sm90-power-h200-2026-11-28/probe_power.py"


def write(name: str, rows: list, command: str, **extra) -> str:
    """Write $OUT/<name> (default /tmp) and return its path: device, torch, date, command, `extra`, rows."""
    import torch

    path = os.path.join(os.environ.get("OUT", "/tmp"), name)
    record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
              "command": command, **extra, "rows": rows}
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    return path


def timed_rows(timer, fns, labels, inputs, rounds: int = 5, queue_ahead: bool = False, unit: str = "ms",
               **fields) -> list[dict]:
    """Time `fns` together (``timer.time_interleaved``) and return one row a callable: `fields`, its label as
    ``impl`` and its median and minimum in `unit` ("ms" or "us"; None where it raised)."""
    scale = {"ms": 1e3, "us": 1e6}[unit]
    kw = {"queue_ahead": True} if queue_ahead else {}
    out = timer.time_interleaved(fns, inputs, rounds, **kw)
    return [{**fields, "impl": lab,
             f"median_{unit}": None if isinstance(r, Exception) else r.median_s * scale,
             f"min_{unit}": None if isinstance(r, Exception) else r.min_s * scale} for lab, r in zip(labels, out)]


def checked_rows(timer, fns, labels, sets, peer, tol: float = 0.05, keep_going: bool = False, **fields) -> list[dict]:
    """Callables checked, then timed beside a peer, as the probes of variants do: each of `fns` (labelled
    `labels`) against the peer's output on the first input set (max |diff| under `tol`, else SystemExit), then
    all of them and the peer timed together (``timed_rows``, `fields` passed on: rounds, labels of the shape).
    `peer`: (label, callable(q, k, v)).  Rows in the order of `fns`, the peer's last.  `keep_going`: a callable
    off the peer (or NaN) is not timed but recorded first, a row with its ``error``, and the others go on."""
    peer_label, peer_fn = peer
    ref = peer_fn(*sets[0]).float()
    failed, kept = [], []
    for f, label in zip(fns, labels):
        err = (f(*sets[0]).float() - ref).abs().max().item()
        if not err <= tol:
            if not keep_going:
                raise SystemExit(f"{label}: max abs diff {err}")
            shape = {k: v for k, v in fields.items() if k not in ("rounds", "queue_ahead", "unit")}
            failed.append({**shape, "impl": label, "error": f"max abs diff {err}"})
        else:
            kept.append((f, label))
    return failed + timed_rows(timer, [f for f, _ in kept] + [peer_fn], [lab for _, lab in kept] + [peer_label],
                               sets, **fields)


def config_rows(timer, family: str, configs, shape: dict, sets, peer, tol: float = 0.05, **fields) -> list[dict]:
    """Forward configs of a family against a peer, as the config probes time them: each config
    (``kernels.run(family, ...)``) checked against the peer's output on the first input set (max |diff| under
    `tol`, else SystemExit), then all of them and the peer timed together (``timed_rows``); each row holds the
    model's ``predicted_ms`` for its config (None for the peer).  `peer`: (label, callable(q, k, v)); `shape`:
    the model's shape (its ``causal`` the run's)."""
    import kernels
    from iomodel import api, families

    fam, causal = families.get(family), shape["causal"]
    fns = [(lambda c: lambda q, k, v: kernels.run(family, q, k, v, causal=causal, config=c))(cfg) for cfg in configs]
    timed = checked_rows(timer, fns, [fam.label(cfg) for cfg in configs], sets, peer, tol, **fields)
    preds = [api.predict(family, "h100-sxm", shape, cfg).time_s * 1e3 for cfg in configs] + [None]
    return [{**r, "predicted_ms": p} for r, p in zip(timed, preds)]


@contextlib.contextmanager
def swapped_module(owner, module, caches=()):
    """`owner.module` (a launcher's module function, e.g. ``kernels.flash_sm80``) replaced by `module` inside the
    block, the `caches` (lru_cached loaders of its kernels) cleared on entry and exit, the shipped one restored."""
    shipped = owner.module
    owner.module = module
    for c in caches:
        c.cache_clear()
    try:
        yield
    finally:
        owner.module = shipped
        for c in caches:
            c.cache_clear()


def random_sets(B: int, H: int, N: int, d: int, seed: int, sets: int = 3, tensors: int = 3) -> list[tuple]:
    """`sets` tuples of `tensors` fresh bf16 (B, H, N, d) tensors from a CUDA generator seeded with `seed`."""
    import torch

    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return [tuple(torch.randn(B, H, N, d, generator=g, device="cuda").to(torch.bfloat16) for _ in range(tensors))
            for _ in range(sets)]


def sm80_build(q, k, v, causal: bool, config, defines: tuple[str, ...]):
    """The mma.sync forward built with the compile-time `defines` (an A/B switch, e.g. ``IOM_BT_A_ORDER``) for
    these inputs: (callable(q, k, v) -> O, the config it runs, the model's pick where `config` is None).  Its launch
    plan is made and called once with the module function swapped (``swapped_module``) for the launcher's own
    ``module`` with the `defines`; the build goes to the kernel cache under its own key."""
    import functools
    import torch
    import kernels.flash_sm80 as kfs

    with swapped_module(kfs, functools.partial(kfs.module, defines=tuple(defines)), (kfs.kernel, kfs.merge_kernel)):
        call = kfs.prepare(kfs.FAMILY, q, k, v, causal, config, None, None, None)
        launch = kfs.Launch(q, k, v, call)
        launch(q, k, v)
        torch.cuda.synchronize()
    return (lambda q, k, v: launch(q, k, v)[0]), call.config


def sm80_precompile(variants, workers: int = 16) -> int:
    """Compile concurrently the modules ``sm80_build`` will load for these inputs' device: each (config, causal,
    defines) of `variants` in bf16, with the tail split's variant too where there is no mask (the launch plan
    decides on it).  Returns the number of builds."""
    import kernels.flash_sm80 as kfs
    from kernels import compile, driver

    arch = compile.nvrtc_arch(driver.capability(0))
    jobs = [lambda c=cfg, causal=causal, d=tuple(defines), split=split: kfs.module(c, "bf16", causal, arch, split=split,
                                                                                defines=d)
            for cfg, causal, defines in variants for split in ((False, True) if not causal else (False,))]
    return compile.precompile(jobs, workers=workers)


def sm90_precompile(variants) -> int:
    """Compile concurrently the wgmma forward's modules of `variants`, (config, causal, defines) each, in bf16 (the
    plain, causal or lpt kernel each build's defines select).  Returns the number of builds."""
    from kernels import compile as kcompile, flash_sm90

    return kcompile.precompile([(lambda c, ca, df: lambda: flash_sm90.module(c, "bf16", ca, tuple(df)))(*v)
                                for v in variants])


def sm90_peer_setup(shapes, variants):
    """The opening of a wgmma-forward probe timed beside its peers (``peer_group``): the builds of every shape's
    `variants` ((label, config, defines) of ``variants(*shape)``; a shape (d, H, N, B) or (d, H, N, B, causal))
    compiled concurrently (``sm90_precompile``, the time on stderr), then (start time, ``peer_runners``, a
    CudaEventTimer, the power probe's `sampled`)."""
    import sys
    import torch
    from validation.peers import peer_runners
    from validation.timing import CudaEventTimer

    t0 = time.time()
    sm90_precompile([(c, len(s) > 4 and bool(s[4]), df) for s in shapes for _, c, df in variants(*s)])
    print(f"builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return t0, peer_runners(torch), CudaEventTimer(), load(POWER_PROBE).sampled


def shape_sets(shapes, variants, seed_of):
    """For each shape (d, H, N, B[, causal]): (the shape, ``variants(*shape)``, fresh inputs from ``random_sets``
    seeded ``seed_of(*shape)``), one shape's inputs alive at a time."""
    for s in shapes:
        d, H, N, B = s[:4]
        yield s, variants(*s), random_sets(B, H, N, d, seed=seed_of(*s))


def sm90_call(config, defines, causal: bool = False):
    """The wgmma forward of `config` built with `defines` (an A/B build) as a callable of (q, k, v)."""
    from kernels import flash_sm90

    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=causal, config=config, _defines=tuple(defines))


def sm90_launch(shape: dict, window=None) -> tuple:
    """The wgmma forward's launch of a bf16 model `shape` (a window's fields in it, `window` its
    ``kernels.window.Window``) on this device: (the model's pick, the defines its schedule builds it with)."""
    import torch
    from iomodel import chooser
    from kernels.sm90_schedule import schedule

    cfg = chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), shape).config
    props = torch.cuda.get_device_properties(0)
    sch = schedule(shape, cfg.block_m, props.multi_processor_count, props.L2_cache_size, 2, window=window, config=cfg)
    return cfg, tuple(sch.defines)


def reference_errors(fns, q, k, v, causal: bool, what: str, window_size=(-1, -1), tol: float = 1e-2) -> dict:
    """Each of `fns` ((label, callable(q, k, v) -> O)) against the float32 reference: its max |diff| over the
    reference's max |value|, by label; exits naming `what` where one is off by `tol` or more."""
    from validation.reference import attention_reference

    ref = attention_reference(q, k, v, causal, window_size=window_size)[0]
    err = {lab: ((f(q, k, v).float() - ref).abs().max() / ref.abs().max()).item() for lab, f in fns}
    if not all(e < tol for e in err.values()):
        raise SystemExit(f"{what}: off the float32 reference: {err}")
    return err


def sm80_builds(q, k, v, causal: bool, configs, builds: dict) -> tuple[list, list]:
    """``sm80_build`` of every config (None: the model's pick) under every named build of `builds` ({tag:
    defines}): the callables and their labels ("[pick ]<config> <tag>")."""
    from iomodel import families

    fam, fns, labels = families.get("flash_sm80"), [], []
    for cfg in configs:
        for tag, defines in builds.items():
            fn, used = sm80_build(q, k, v, causal, cfg, defines)
            fns.append(fn)
            labels.append(f"{'pick ' if cfg is None else ''}{fam.label(used)} {tag}")
    return fns, labels


def sm80_build_groups(plan, seed: int, rounds: int = 5) -> list[dict]:
    """The A/B probes of the mma.sync forward's builds: every build of `plan` compiled concurrently first
    (``sm80_precompile``), then for each shape (d, N, B, H, causal flags, [(config, {tag: defines})]) fresh inputs
    (``random_sets``, seeded `seed` + d + causal), each config under each of its builds (``sm80_builds``) checked and
    timed beside SDPA flash in one interleaved group (``checked_rows``, keep_going).  Progress on stderr."""
    import sys
    import torch
    from validation.peers import peer_runners
    from validation.timing import CudaEventTimer

    t0 = time.time()
    n = sm80_precompile((cfg, causal, defines) for d, N, B, H, causals, cfgs in plan for causal in causals
                        for cfg, builds in cfgs for defines in builds.values())
    print(f"{n} builds: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    fa2, timer, rows = peer_runners(torch)["sdpa_flash"][0], CudaEventTimer(), []
    for d, N, B, H, causals, cfgs in plan:
        for causal in causals:
            sets = random_sets(B, H, N, d, seed=seed + d + causal)
            fns, labels = [], []
            for cfg, builds in cfgs:
                f, lab = sm80_builds(*sets[0], causal, [cfg], builds)
                fns, labels = fns + f, labels + lab
            rows += checked_rows(timer, fns, labels, sets, ("sdpa_flash", lambda q, k, v, c=causal: fa2(q, k, v, c)),
                                 keep_going=True, rounds=rounds, B=B, H=H, N=N, d=d, causal=causal)
            print(f"d={d} causal={causal}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return rows


def sm90_build_groups(shapes, builds: dict, seed_of, rounds: int = 5) -> list[dict]:
    """The A/B probes of the wgmma forward's builds: for each shape (d, H, N, B, causal), the model's pick (for this
    GPU's spec) under each build of `builds` ({tag: defines}; all compiled concurrently first), checked and timed
    beside cuDNN in one interleaved group on fresh inputs (``random_sets`` seeded ``seed_of(d, N)``; ``checked_rows``),
    each row labelled "<config> <tag>" with the model's ``predicted_ms``.  Progress on stderr."""
    import sys
    import torch
    from iomodel import chooser, families
    from validation.peers import peer_runners
    from validation.timing import CudaEventTimer

    gpu = torch.cuda.get_device_name()   # the chooser resolves a device name to its spec
    picks = {s: chooser.choose(["flash_sm90"], gpu, {"B": s[3], "H": s[1], "H_kv": s[1], "N_q": s[2], "N_k": s[2],
                                                     "d": s[0], "causal": s[4], "dtype": "bf16"}) for s in shapes}
    sm90_precompile([(picks[s].config, s[4], df) for s in shapes for df in builds.values()])
    cudnn, timer, rows, t0 = peer_runners(torch)["sdpa_cudnn"][0], CudaEventTimer(), [], time.time()
    for d, H, N, B, causal in shapes:
        pick = picks[(d, H, N, B, causal)]
        fns = [sm90_call(pick.config, df, causal) for df in builds.values()]
        labels = [f"{families.get('flash_sm90').label(pick.config)} {tag}" for tag in builds]
        got = checked_rows(timer, fns, labels, random_sets(B, H, N, d, seed=seed_of(d, N)),
                           ("sdpa_cudnn", lambda q, k, v, c=causal: cudnn(q, k, v, c)), rounds=rounds, d=d, N=N, B=B,
                           H=H, causal=causal)
        rows += [{**r, "predicted_ms": pick.time_s * 1e3} if r["impl"] != "sdpa_cudnn" else r for r in got]
        print(f"d{d} N{N}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return rows


def peer_table(rows: list[dict], keys: tuple[str, ...], is_peer) -> list[str]:
    """The probes' closing table: rows grouped by their `keys` fields (in order of first appearance), each group a
    line for its peer (the row where ``is_peer(row)``) and one a row beside it: median and minimum in ms, the
    peer's median over the row's, and the model's ``predicted_ms`` where the row has one."""
    lines, seen = [], []
    for r in rows:
        key = tuple(r[k] for k in keys)
        if key not in seen:
            seen.append(key)
    for key in seen:
        group = [r for r in rows if tuple(r[k] for k in keys) == key]
        peer = next(r for r in group if is_peer(r))
        lines.append(f"{dict(zip(keys, key))}: {peer['impl']} {peer['median_ms']:.4f} ms (min {peer['min_ms']:.4f})")
        for r in group:
            if r is not peer:
                pred = f"  predicted {r['predicted_ms']:.4f}" if r.get("predicted_ms") else ""
                lines.append(f"   {r['impl']:34} {r['median_ms']:.4f} ms (min {r['min_ms']:.4f})  "
                             f"{peer['impl']}/this {peer['median_ms'] / r['median_ms']:.3f}{pred}")
    return lines


def add_sustained(rows: list[dict], fns, sets, sampled, repeats: int = 3, seconds: float = 1.0) -> None:
    """Each of `fns` ((label, callable) whose row in `rows` has no ``error``) run back to back for `seconds` under
    `sampled` (the power probe's), `repeats` times in turn: its results appended to the row's ``<key>_runs``."""
    by = {r["impl"]: r for r in rows}
    for _ in range(repeats):
        for label, f in fns:
            if "error" not in by[label]:
                for key, val in sampled(f, sets, seconds).items():
                    by[label].setdefault(f"{key}_runs", []).append(val)


def peer_group(timer, runners, fns, sets, rounds: int, sampled=None, causal: bool = False, extra=None,
               **fields) -> list[dict]:
    """One shape's group (without a mask, or `causal`), as the wgmma forward's probes time it: `fns` ((label,
    callable)) and FlashAttention-4 (where it imports), each checked against cuDNN, then timed beside it
    (``checked_rows``, `keep_going`); with `sampled` (the power probe's) each also run back to back
    (``add_sustained``).  `runners`: ``validation.peers.peer_runners``; `fields` label the rows (d, N, B, H);
    `extra` ({label: fields}, e.g. ``output_distances``') is added to those labels' rows."""
    cudnn, fa4 = runners["sdpa_cudnn"][0], runners["fa4"][0]
    fns = list(fns) + ([("fa4", lambda q, k, v: fa4(q, k, v, causal))] if fa4 is not None else [])
    peer = ("sdpa_cudnn", lambda q, k, v: cudnn(q, k, v, causal))
    timed = checked_rows(timer, [f for _, f in fns], [lab for lab, _ in fns], sets, peer, keep_going=True,
                         rounds=rounds, causal=causal, **fields)
    if sampled is not None:
        add_sustained(timed, fns + [peer], sets, sampled)
    for r in timed:
        r.update((extra or {}).get(r["impl"], {}))
    return timed


def report(name: str, rows: list, command: str, runners, keys: tuple[str, ...] = ("d", "N", "B")) -> None:
    """A peer-group probe's end: its rows written (``write``, with FlashAttention-4's version), then each shape's
    table against cuDNN (the rows grouped by `keys`) and the sustained runs' lines printed."""
    fa4 = runners["fa4"][0]
    write(name, rows, command, fa4=getattr(fa4, "version", None))
    print("\n".join(peer_table(rows, keys, lambda r: r["impl"] == "sdpa_cudnn")))
    print("\n".join(sustained_lines(rows)))


def output_distances(fns, inputs, reference) -> dict:
    """Each of `fns` ((label, callable(q, k, v)), the first the build the others are set beside) run on `inputs`:
    its output's max and mean |diff| from the first one's (``max_vs_shipped``, ``mean_vs_shipped``) and from
    `reference`'s output (``max_vs_cudnn``, ``mean_vs_cudnn``), by label."""
    ref = reference(*inputs).float()
    outs = {lab: f(*inputs).float() for lab, f in fns}
    base = next(iter(outs.values()))

    def dist(a, b) -> tuple[float, float]:
        diff = (a - b).abs()
        return diff.max().item(), diff.mean().item()

    out = {}
    for lab, o in outs.items():
        (mx_s, mean_s), (mx_r, mean_r) = dist(o, base), dist(o, ref)
        out[lab] = {"max_vs_shipped": mx_s, "mean_vs_shipped": mean_s, "max_vs_cudnn": mx_r, "mean_vs_cudnn": mean_r}
    return out


def distance_lines(info: dict) -> list[str]:
    """``output_distances``' result as lines: a build's max / mean |diff| from the first build and from cuDNN."""
    return [f"   {lab:34} max/mean vs shipped {a['max_vs_shipped']:.2e}/{a['mean_vs_shipped']:.2e}  "
            f"vs cuDNN {a['max_vs_cudnn']:.2e}/{a['mean_vs_cudnn']:.2e}" for lab, a in info.items()]


def sustained_lines(rows: list[dict], keys: tuple[str, ...] = ("d", "N")) -> list[str]:
    """The closing lines of a probe that also ran its callables back to back under nvidia-smi (the power probe's
    `sampled`, its results in a row's ``*_runs`` lists): each such row's `keys`, label, fastest time a call, and the
    clocks and powers of its runs."""
    return [" ".join(f"{k}{r[k]}" for k in keys) + f" {r['impl']:22} sustained ms {min(r['sustained_ms_runs']):.4f}  "
            f"MHz {r['sm_mhz_runs']}  W {r['power_w_runs']}" for r in rows if "sm_mhz_runs" in r]


def load(path: str, *argv: str):
    """The probe script at `path` as a module, for its functions, run with `argv` as its command-line
    arguments (a probe that runs its modes at import is given none it knows); sys.argv is restored after."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    saved, sys.argv = sys.argv, [path, *argv]
    try:
        spec.loader.exec_module(module)
    finally:
        sys.argv = saved
    return module
