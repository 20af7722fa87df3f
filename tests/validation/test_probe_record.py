"""validation.probe_record: a probe's record under $OUT with the device, torch, date and command beside its rows
(torch stood in for by a stub with a device name and a version, so it runs without a GPU)."""
import json
import sys
import types

import numpy as np
import pytest

from validation import probe_record


@pytest.fixture
def stub_torch(tmp_path, monkeypatch):
    """A torch that names its device and version, and $OUT in tmp_path: what ``write`` reads."""
    cuda = types.SimpleNamespace(get_device_name=lambda: "Stub GPU")
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="9.9.9+stub", cuda=cuda))
    monkeypatch.setenv("OUT", str(tmp_path))


def test_record_holds_rows_command_and_where_it_ran(tmp_path, stub_torch):
    rows = [{"impl": "a", "median_ms": 1.25}, {"impl": "b", "median_ms": 2.5}]
    path = probe_record.write("probe.json", rows, "python3 probe.py", note="extra field")
    got = json.loads((tmp_path / "probe.json").read_text())
    assert path == str(tmp_path / "probe.json")
    assert got["rows"] == rows and got["command"] == "python3 probe.py" and got["note"] == "extra field"
    assert got["device"] == "Stub GPU" and got["torch"] == "9.9.9+stub" and len(got["date"]) == 10
    assert list(got)[-1] == "rows"   # the rows last, after what says where they came from


def test_timed_rows_label_each_callable_and_keep_a_failure():
    from validation.timing import FakeTimer

    def bad(*a):
        raise RuntimeError("launch failed")

    timer = FakeTimer(lambda fn, inputs: 2e-3, repeats=5, noise=0.0)
    rows = probe_record.timed_rows(timer, [lambda *a: None, bad], ["good", "bad"], [(1,), (2,)], rounds=2,
                                   unit="us", d=64, causal=True)
    assert [r["impl"] for r in rows] == ["good", "bad"]
    assert rows[0]["median_us"] == 2e3 and rows[0]["min_us"] == 2e3 and rows[0]["d"] == 64 and rows[0]["causal"]
    assert rows[1]["median_us"] is None and rows[1]["min_us"] is None


def test_load_runs_a_probe_with_its_arguments_and_restores_argv(tmp_path):
    script = tmp_path / "other_probe.py"
    script.write_text("import sys\nSEEN = list(sys.argv[1:])\n\ndef twice(x):\n    return 2 * x\n")
    before = list(sys.argv)
    mod = probe_record.load(str(script), "none", "quiet")
    assert mod.SEEN == ["none", "quiet"] and mod.twice(21) == 42 and mod.__name__ == "other_probe"
    assert sys.argv == before
    script.write_text("import sys\nraise SystemExit(sys.argv[1])\n")
    with pytest.raises(SystemExit, match="stop"):
        probe_record.load(str(script), "stop")
    assert sys.argv == before   # restored when the script fails too


class _T:
    """A stand-in tensor: a number with the few methods config_rows calls."""

    def __init__(self, x):
        self.x = x

    def float(self):
        return self

    def __sub__(self, other):
        return _T(self.x - other.x)

    def abs(self):
        return _T(abs(self.x))

    def max(self):
        return self

    def item(self):
        return self.x


def test_config_rows_check_then_time_each_config_beside_the_peer(monkeypatch):
    import kernels
    from iomodel import families
    from validation.timing import FakeTimer

    cfgs = [c for c in families.get("flash_sm80").shipped if c.head_dim == 64][:2]
    off = {cfgs[1]: 0.0}
    monkeypatch.setattr(kernels, "run", lambda family, q, k, v, causal, config: _T(q + off.get(config, 0.0)))
    shape = {"B": 1, "H": 2, "H_kv": 2, "N_q": 512, "N_k": 512, "d": 64, "causal": False, "dtype": "bf16"}
    timer = FakeTimer(lambda fn, inputs: 1e-3, repeats=3, noise=0.0)
    rows = probe_record.config_rows(timer, "flash_sm80", cfgs, shape, [(1.0, 0, 0)], ("peer", lambda q, k, v: _T(q)),
                                    d=64, causal=False)
    fam = families.get("flash_sm80")
    assert [r["impl"] for r in rows] == [fam.label(c) for c in cfgs] + ["peer"]
    assert all(r["predicted_ms"] > 0 for r in rows[:-1]) and rows[-1]["predicted_ms"] is None
    assert rows[0]["median_ms"] == 1.0 and rows[0]["d"] == 64
    off[cfgs[1]] = 0.5   # a config off the peer's output stops the probe before any timing
    with pytest.raises(SystemExit, match="max abs diff 0.5"):
        probe_record.config_rows(timer, "flash_sm80", cfgs, shape, [(1.0, 0, 0)], ("peer", lambda q, k, v: _T(q)))


def test_checked_rows_check_every_callable_then_time_them_beside_the_peer():
    from validation.timing import FakeTimer

    timer = FakeTimer(lambda fn, inputs: 2e-3, repeats=3, noise=0.0)
    fns = [lambda q, k, v: _T(q), lambda q, k, v: _T(q + 0.01)]
    rows = probe_record.checked_rows(timer, fns, ["a", "b"], [(1.0, 0, 0)], ("peer", lambda q, k, v: _T(q)), d=64)
    assert [r["impl"] for r in rows] == ["a", "b", "peer"] and all(r["median_ms"] == 2.0 and r["d"] == 64 for r in rows)
    with pytest.raises(SystemExit, match="b: max abs diff 0.5"):
        probe_record.checked_rows(timer, [fns[0], lambda q, k, v: _T(q + 0.5)], ["a", "b"], [(1.0, 0, 0)],
                                  ("peer", lambda q, k, v: _T(q)))


def test_checked_rows_keep_going_record_a_build_off_the_peer_and_time_the_rest():
    from validation.timing import FakeTimer

    timer = FakeTimer(lambda fn, inputs: 2e-3, repeats=3, noise=0.0)
    fns = [lambda q, k, v: _T(q + 0.5), lambda q, k, v: _T(q + 0.01), lambda q, k, v: _T(float("nan"))]
    rows = probe_record.checked_rows(timer, fns, ["off", "ok", "nan"], [(1.0, 0, 0)], ("peer", lambda q, k, v: _T(q)),
                                     keep_going=True, rounds=2, d=192, causal=True)
    assert [r["impl"] for r in rows] == ["off", "nan", "ok", "peer"]
    assert rows[0] == {"d": 192, "causal": True, "impl": "off", "error": "max abs diff 0.5"}
    assert rows[1]["error"] == "max abs diff nan" and "median_ms" not in rows[1]
    assert rows[2]["median_ms"] == 2.0 and rows[3]["median_ms"] == 2.0 and rows[2]["d"] == 192


def test_peer_table_groups_rows_by_shape_with_each_ratio_to_its_peer():
    rows = [{"d": 64, "impl": "a", "median_ms": 2.0, "min_ms": 1.9, "predicted_ms": 2.1},
            {"d": 64, "impl": "peer", "median_ms": 3.0, "min_ms": 2.9},
            {"d": 128, "impl": "peer", "median_ms": 1.0, "min_ms": 1.0},
            {"d": 128, "impl": "b", "median_ms": 2.0, "min_ms": 2.0}]
    lines = probe_record.peer_table(rows, ("d",), lambda r: r["impl"] == "peer")
    assert lines[0].startswith("{'d': 64}: peer 3.0000 ms") and "peer/this 1.500  predicted 2.1000" in lines[1]
    assert lines[2].startswith("{'d': 128}: peer") and "peer/this 0.500" in lines[3] and "predicted" not in lines[3]
    assert len(lines) == 4


def test_swapped_module_restores_the_shipped_one_and_clears_the_caches_even_when_the_block_raises():
    class Cache:
        cleared = 0

        def cache_clear(self):
            self.cleared += 1

    owner, cache = types.SimpleNamespace(module="shipped"), Cache()
    with probe_record.swapped_module(owner, "probe", (cache,)):
        assert owner.module == "probe" and cache.cleared == 1
    assert owner.module == "shipped" and cache.cleared == 2
    with pytest.raises(RuntimeError, match="build failed"):
        with probe_record.swapped_module(owner, "probe", (cache,)):
            raise RuntimeError("build failed")
    assert owner.module == "shipped" and cache.cleared == 4


def test_sm80_precompile_builds_what_sm80_build_loads_with_the_split_variant_where_there_is_no_mask(monkeypatch):
    from iomodel.families.flash_sm80 import FlashConfig
    from kernels import codegen, compile, driver

    built = []
    monkeypatch.setattr(driver, "capability", lambda index: (9, 0))
    monkeypatch.setattr(compile, "nvrtc_arch", lambda cap: "sm_90")
    monkeypatch.setattr(compile, "build", lambda src, arch, **kw: built.append((arch, kw)) or kw)
    cfg = FlashConfig(64, 96, 4, 1, 192, 1)
    assert probe_record.sm80_precompile([(cfg, False, ("IOM_X",)), (cfg, True, ())], workers=2) == 3
    names = sorted(kw["names"] for _, kw in built)
    assert names == sorted([(codegen.flash_sm80_kernel(cfg, "bf16", False),),
                            (codegen.flash_sm80_kernel(cfg, "bf16", False, split=True),
                             codegen.flash_sm80_merge_kernel(cfg, "bf16")),
                            (codegen.flash_sm80_kernel(cfg, "bf16", True),)])
    assert all(arch == "sm_90" and kw["label"] == "flash_sm80" for arch, kw in built)
    assert sorted(kw["defines"] for _, kw in built) == [(), ("IOM_X",), ("IOM_X",)]
    # the module sm80_build swaps in, called as the launcher calls it (positionally), asks for the same build
    import functools
    import kernels.flash_sm80 as kfs

    before = len(built)
    functools.partial(kfs.module, defines=("IOM_X",))(cfg, "bf16", False, "sm_90", False, False, 0, True)
    assert built[before][1] == next(kw for _, kw in built[:before] if len(kw["names"]) == 2)


def test_sustained_lines_name_the_fastest_run_of_each_sampled_row_only():
    rows = [{"d": 128, "N": 4096, "B": 4, "impl": "ours", "sustained_ms_runs": [1.25, 1.2], "sm_mhz_runs": [1590.0],
             "power_w_runs": [600.0]},
            {"d": 128, "N": 4096, "B": 4, "impl": "timed only", "median_ms": 1.3}]
    lines = probe_record.sustained_lines(rows, ("d", "N", "B"))
    assert len(lines) == 1 and lines[0].startswith("d128 N4096 B4 ours ")
    assert "sustained ms 1.2000" in lines[0] and "MHz [1590.0]" in lines[0] and "W [600.0]" in lines[0]


def test_add_sustained_samples_each_callable_in_turn_and_skips_failed_rows():
    calls = []

    def sampled(f, sets, seconds):
        calls.append(f)
        return {"sm_mhz": 1500.0 + len(calls), "power_w": 600.0}

    rows = [{"impl": "a"}, {"impl": "b", "error": "max abs diff 1.0"}, {"impl": "peer"}]
    probe_record.add_sustained(rows, [("a", "fa"), ("b", "fb"), ("peer", "fp")], [()], sampled, repeats=2)
    assert calls == ["fa", "fp", "fa", "fp"]
    assert rows[0]["sm_mhz_runs"] == [1501.0, 1503.0] and rows[2]["power_w_runs"] == [600.0, 600.0]
    assert "sm_mhz_runs" not in rows[1]


def test_peer_group_adds_flashattention4_checks_against_cudnn_and_samples_when_asked(monkeypatch):
    seen = {}

    def checked(timer, fns, labels, sets, peer, keep_going=False, **fields):
        seen.update(labels=labels, peer=peer[0], keep_going=keep_going, fields=fields)
        return [{"impl": lab} for lab in labels] + [{"impl": peer[0]}]

    monkeypatch.setattr(probe_record, "checked_rows", checked)
    runners = {"sdpa_cudnn": (lambda q, k, v, causal: "cudnn",), "fa4": (lambda q, k, v, causal: "fa4",)}
    sampled = lambda f, sets, seconds: {"sm_mhz": 1600.0}  # noqa: E731
    rows = probe_record.peer_group(None, runners, [("ours", lambda q, k, v: "o")], [()], 7, sampled, d=64, N=16384)
    assert seen["labels"] == ["ours", "fa4"] and seen["peer"] == "sdpa_cudnn" and seen["keep_going"]
    assert seen["fields"] == {"rounds": 7, "causal": False, "d": 64, "N": 16384}
    assert all(r["sm_mhz_runs"] == [1600.0] * 3 for r in rows)
    runners["fa4"] = (None,)
    rows = probe_record.peer_group(None, runners, [("ours", lambda q, k, v: "o")], [()], 7, None, d=64, N=4096)
    assert seen["labels"] == ["ours"] and not any("sm_mhz_runs" in r for r in rows)


def test_a_causal_peer_group_asks_its_peers_for_the_causal_mask(monkeypatch):
    seen, asked = {}, []

    def checked(timer, fns, labels, sets, peer, keep_going=False, **fields):
        seen.update(fields=fields, outs=[f(1, 2, 3) for f in fns] + [peer[1](1, 2, 3)])
        return [{"impl": lab} for lab in labels] + [{"impl": peer[0]}]

    monkeypatch.setattr(probe_record, "checked_rows", checked)
    runners = {"sdpa_cudnn": (lambda q, k, v, causal: asked.append(("cudnn", causal)),),
               "fa4": (lambda q, k, v, causal: asked.append(("fa4", causal)),)}
    rows = probe_record.peer_group(None, runners, [("ours", lambda q, k, v: "o")], [()], 5, causal=True,
                                   extra={"ours": {"max_vs_shipped": 0.0}}, d=128, N=4096)
    assert seen["fields"]["causal"] is True and asked == [("fa4", True), ("cudnn", True)]
    assert rows[0] == {"impl": "ours", "max_vs_shipped": 0.0} and rows[1] == {"impl": "fa4"}


def test_report_writes_the_rows_with_fa4s_version_then_prints_the_tables(tmp_path, stub_torch, capsys):
    fa4 = types.SimpleNamespace(version="flash-attn-4 stub")
    rows = [{"d": 64, "N": 4096, "B": 4, "impl": "ours", "median_ms": 1.0, "min_ms": 0.9},
            {"d": 64, "N": 4096, "B": 4, "impl": "sdpa_cudnn", "median_ms": 1.1, "min_ms": 1.0,
             "sustained_ms_runs": [1.2], "sm_mhz_runs": [1500.0], "power_w_runs": [600.0]}]
    probe_record.report("run.json", rows, "python3 probe.py", {"fa4": (fa4,)})
    got = json.loads((tmp_path / "run.json").read_text())
    assert got["fa4"] == "flash-attn-4 stub" and got["rows"] == rows
    out = capsys.readouterr().out
    assert "sdpa_cudnn/this 1.100" in out and "sustained ms 1.2000" in out


def test_sm90_call_and_precompile_pass_the_build_on(monkeypatch):
    from kernels import compile as kcompile, flash_sm90

    calls = []
    monkeypatch.setattr(flash_sm90, "attention", lambda q, k, v, **kw: calls.append(kw) or "o")
    monkeypatch.setattr(flash_sm90, "module", lambda *a: calls.append(a))
    monkeypatch.setattr(kcompile, "precompile", lambda jobs: [j() for j in jobs] and len(jobs))
    assert probe_record.sm90_call("cfg", ["SM90_CLUSTER"])(1, 2, 3) == "o"
    assert calls.pop() == {"causal": False, "config": "cfg", "_defines": ("SM90_CLUSTER",)}
    assert probe_record.sm90_precompile([("a", False, ()), ("b", True, ["X"])]) == 2
    assert calls == [("a", "bf16", False, ()), ("b", "bf16", True, ("X",))]


class _Out:
    """Just enough of a tensor for output_distances: float(), -, abs(), max(), mean(), item()."""

    def __init__(self, a):
        self.a = np.asarray(a, dtype=float)

    def float(self):
        return self

    def __sub__(self, other):
        return _Out(self.a - other.a)

    def abs(self):
        return _Out(np.abs(self.a))

    def max(self):
        return _Out(self.a.max())

    def mean(self):
        return _Out(self.a.mean())

    def item(self):
        return float(self.a)


def test_output_distances_set_each_build_beside_the_first_and_the_reference():
    rng = np.random.default_rng()
    base, other, ref = rng.standard_normal((3, 5))
    fns = [("shipped", lambda q, k, v: _Out(base)), ("variant", lambda q, k, v: _Out(other))]
    info = probe_record.output_distances(fns, (1, 2, 3), lambda q, k, v: _Out(ref))
    assert info["shipped"]["max_vs_shipped"] == 0.0
    assert info["variant"]["max_vs_shipped"] == pytest.approx(np.abs(other - base).max())
    assert info["variant"]["mean_vs_cudnn"] == pytest.approx(np.abs(other - ref).mean())
    lines = probe_record.distance_lines(info)
    assert len(lines) == 2 and "variant" in lines[1] and f"{np.abs(other - ref).max():.2e}" in lines[1]


def test_sm90_peer_setup_compiles_first_then_hands_back_the_probes_tools(monkeypatch, stub_torch, capsys):
    import validation.peers
    import validation.timing

    order = []
    monkeypatch.setattr(probe_record, "sm90_precompile", lambda vs: order.append(("builds", list(vs))))
    monkeypatch.setattr(validation.peers, "peer_runners", lambda torch: order.append("runners") or {"fa4": (None,)})
    monkeypatch.setattr(validation.timing, "CudaEventTimer", lambda: "timer")
    monkeypatch.setattr(probe_record, "load", lambda path: types.SimpleNamespace(sampled=path))
    variants = lambda *s: [("lab", f"cfg{s[0]}", ("X",))]   # noqa: E731
    t0, runners, timer, sampled = probe_record.sm90_peer_setup([(64, 32, 4096, 4), (128, 16, 4096, 4, True)],
                                                               variants)
    assert order == [("builds", [("cfg64", False, ("X",)), ("cfg128", True, ("X",))]), "runners"]
    assert runners == {"fa4": (None,)} and timer == "timer" and sampled == probe_record.POWER_PROBE
    assert t0 > 0 and "builds:" in capsys.readouterr().err


def test_shape_sets_hand_each_shape_its_variants_and_inputs_seeded_by_it(monkeypatch):
    made = []
    monkeypatch.setattr(probe_record, "random_sets", lambda B, H, N, d, seed: made.append((B, H, N, d, seed)) or seed)
    shapes = [(64, 32, 4096, 4), (128, 16, 1024, 16, True)]
    got = list(probe_record.shape_sets(shapes, lambda *s: [s[0]], lambda d, H, N, B, *c: N + d + len(c)))
    assert got == [(shapes[0], [64], 4160), (shapes[1], [128], 1153)]
    assert made == [(4, 32, 4096, 64, 4160), (16, 16, 1024, 128, 1153)]
