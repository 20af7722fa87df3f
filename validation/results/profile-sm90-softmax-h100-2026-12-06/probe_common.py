"""The pieces this folder's probes share (imported from beside them: each runs as a script, its folder on sys.path)."""
import sys
import time


def model_pick(s: dict):
    """The model's first config of the wgmma forward for the model shape `s` on this GPU (its shipped configs)."""
    import torch
    from iomodel import chooser, families

    fam = families.get("flash_sm90")
    return chooser.rank_configs("flash_sm90", torch.cuda.get_device_name(), s, fam.shipped_for(s))[0].config


def launch_defines(s: dict, config) -> tuple[str, ...]:
    """The compile-time switches the launcher builds `config` with at the model shape `s` on this GPU (bf16)."""
    import torch
    from kernels.sm90_schedule import schedule

    props = torch.cuda.get_device_properties(0)
    return tuple(schedule(s, config.block_m, props.multi_processor_count, props.L2_cache_size, 2,
                          config=config).defines)


def cudnn_groups(shapes, calls, seed_of) -> list[dict]:
    """For each shape (d, H, N, B[, causal]), ``calls(*shape)`` ((label, callable(q, k, v))) checked against and timed
    beside cuDNN in one interleaved group (7 rounds, 3 input sets seeded ``seed_of(N)``); progress on stderr."""
    import torch
    from validation import probe_record
    from validation.peers import peer_runners
    from validation.timing import CudaEventTimer

    cudnn, timer, rows, t0 = peer_runners(torch)["sdpa_cudnn"][0], CudaEventTimer(), [], time.time()
    for shape in shapes:
        d, H, N, B = shape[:4]
        causal, fns = len(shape) > 4 and bool(shape[4]), calls(*shape)
        rows += probe_record.checked_rows(timer, [f for _, f in fns], [lab for lab, _ in fns],
                                          probe_record.random_sets(B, H, N, d, seed=seed_of(N)),
                                          ("sdpa_cudnn", lambda q, k, v, c=causal: cudnn(q, k, v, c)), rounds=7,
                                          keep_going=True, d=d, N=N, B=B, H=H, causal=causal)
        print(f"d{d} N{N}{' causal' if causal else ''}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return rows


def finish(name: str, rows: list, command: str) -> None:
    """A cuDNN-group probe's end: its rows written under $OUT (``probe_record.write``) and its table printed."""
    from validation import probe_record

    probe_record.write(name, rows, command)
    print("\n".join(probe_record.peer_table(rows, ("d", "N", "B", "causal"), lambda r: r["impl"] == "sdpa_cudnn")))


def peer_groups(shapes, variants, seed_of, each=None) -> tuple[list[dict], dict]:
    """For each shape (d, H, N, B, causal): the builds of ``variants(*shape)`` ((label, config, defines)), compiled
    first, with FlashAttention-4 (where it imports) checked against and timed beside cuDNN in one interleaved group (7
    rounds, 3 input sets seeded ``seed_of(*shape)``; ``probe_record.peer_group``); ``each(shape, builds, inputs)``,
    if given, first.  Returns (rows, ``peer_runners``); progress on stderr."""
    from validation import probe_record

    t0, runners, timer, _ = probe_record.sm90_peer_setup(shapes, variants)
    rows = []
    for shape, vs, sets in probe_record.shape_sets(shapes, variants, seed_of):
        d, H, N, B, causal = shape
        if each is not None:
            each(shape, vs, sets)
        fns = [(lab, probe_record.sm90_call(cfg, df, causal)) for lab, cfg, df in vs]
        rows += probe_record.peer_group(timer, runners, fns, sets, 7, causal=causal, d=d, N=N, B=B, H=H)
        print(f"d{d} N{N} B{B}{' causal' if causal else ''}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return rows, runners
