"""``FakeEnv``: the sweep's device on a CPU (``--dry-run``): fake ceilings, kernels, outputs and timer.

The sweep is written against a small environment interface (``measure_ceilings``, ``families``,
``peers``, ``algorithms``, ``decode``, ``varlen``, ``make_inputs``, ``reference``, ``check``, ``memory_problem``,
``checking``, ``sync``, ``release``, ``timer``); ``TorchEnv`` (validation/torch_env.py) is the real one.
This one imports neither torch nor the kernels, so the sweep, the JSON and the statistics can be checked anywhere.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Iterable, Mapping

from iomodel.accuracy import PEER_KERNELS
from iomodel.algo_peers import DECODE_FLOOR, DECODE_KERNELS, VARLEN, VARLEN_PEERS, algo_flops, algo_of
from iomodel.problems import conventional_flops
from iomodel.results import config_dict, config_label

from .plan import SWEEP_KERNELS, KernelFamily
from .timing import FakeTimer

__all__ = ["FakeEnv", "FakeAlgorithms", "FakeDecode", "FakeVarlen"]

#: FLOP/s of each fake kernel at its best tiles
_BASE_RATE = {"flash_sm80": 330e12, "flash_sm90": 560e12, "unfused": 110e12,
              "sdpa_flash": 320e12, "sdpa_cudnn": 540e12, "sdpa_efficient": 150e12,
              "fa4": 550e12}


def fake_rate(kernel: str, cfg: Any, shape: Mapping) -> float:
    """FLOP/s a fake kernel reaches: a smooth function of its tile sizes, so configs rank."""
    d = config_dict(cfg)
    pen = 0.0
    if "block_m" in d:
        pen += 0.08 * abs(math.log2(d["block_m"] / 128))
    if "block_n" in d:
        pen += 0.05 * abs(math.log2(d["block_n"] / (64 if shape["d"] == 128 else 128)))
    if "stages" in d:
        pen += 0.03 * abs(d["stages"] - 2)
    if "warps" in d:
        pen += 0.04 * abs(math.log2(d["warps"] / 4))
    if shape.get("causal"):
        pen += 0.06
    return _BASE_RATE[kernel] * max(0.2, 1.0 - pen)


class FakeAlgorithms:
    """The algorithm phase's kernels in a dry run: a fake output and time (FLOPs at a fixed rate per
    kernel; our backward kernels' rate a smooth function of the config, so configs rank); kernels in
    ``fail`` raise, kernels in ``wrong`` give an output off by 5%."""

    RATE = {"torch_matmul": 600e12, "torch_cross_entropy": 450e12, "torch_mlp": 550e12,
            "torch_sdpa_flash_bwd": 400e12, "torch_sdpa_cudnn_bwd": 480e12, "torch_sdpa_efficient_bwd": 200e12,
            "flash_bwd_sm80": 380e12, "flash_bwd_sm80_deterministic": 300e12,
            "flash_bwd_sm90": 520e12, "flash_bwd_sm90_deterministic": 430e12}

    def __init__(self, fail: Iterable[str] = (), wrong: Iterable[str] = ()):
        self.fail, self.wrong = set(fail), set(wrong)
        self.groups: list[tuple] = []   # (shape, kernels, n_sets) of every backward group made

    def make_inputs(self, kernel: str, shape, n_sets: int, seed: int):
        return [({"kernel": kernel, "shape": dict(shape), "set": i, "seed": seed},) for i in range(n_sets)]

    def rate(self, kernel: str, config: Any = None) -> float:
        """FLOP/s of a fake kernel (at its best tiles when it has a config: 64 queries x 128 keys, two
        stages; flash_bwd_sm90's configs name them block_m x block_n)."""
        d = config_dict(config)
        pen = 0.0
        queries, keys = d.get("block_q", d.get("block_m")), d.get("block_k", d.get("block_n"))
        if queries is not None:
            pen += 0.06 * abs(math.log2(queries / 64)) + 0.04 * abs(math.log2(keys / 128))
            pen += 0.03 * abs(d["stages"] - 2)
        return self.RATE[kernel] * max(0.2, 1.0 - pen)

    def runner(self, kernel: str, config: Any = None) -> Callable[..., Any]:
        def run(x):
            if kernel in self.fail:
                raise RuntimeError(f"fake failure of {kernel}")
            t = algo_flops(algo_of(kernel), x["shape"]) / self.rate(kernel, config)
            return {"time_s": t, "err": 0.05 if kernel in self.wrong else 2e-3}

        return run

    def check(self, kernel: str, fn: Callable[..., Any], inputs, ref=None) -> tuple[float, bool]:
        err = fn(*inputs[0])["err"]
        return err, math.isfinite(err)

    def make_backward_group(self, shape, kernels, n_sets: int, seed: int):
        """A backward group's sets (``validation.backward``): one fake set of the shape for every kernel."""
        self.groups.append((dict(shape), tuple(kernels), n_sets))
        return [({"shape": dict(shape), "set": i, "seed": seed},) for i in range(n_sets)]

    def group_runner(self, kernel: str, config: Any = None) -> Callable[..., Any]:
        return self.runner(kernel, config)

    def reference(self, first) -> dict:
        return {"shape": first["shape"]}


class FakeDecode:
    """The decode rows in a dry run (``validation.decode``): a fake read roof, and each kernel's time the
    bytes it must move at a fixed bandwidth plus a launch (paged caches 3% slower); kernels in ``fail``
    raise on every call (as a backend refusing the inputs), kernels in ``wrong`` are off by 5%."""

    BANDWIDTH = {"flash_decode_sm80": 2.9e12, "sdpa_flash_decode": 2.3e12, "sdpa_cudnn_decode": 2.6e12,
                 "sdpa_efficient_decode": 1.6e12, DECODE_FLOOR: 3.0e12}
    LAUNCH_S = 6e-6

    def __init__(self, spec, fail: Iterable[str] = (), wrong: Iterable[str] = ()):
        self.spec, self.fail, self.wrong = spec, set(fail), set(wrong)
        self.made: list[tuple] = []   # (shape, pages, peers, n_sets) of every make_inputs call

    def read_roof(self, quick: bool = False) -> dict[str, Any]:
        return {"bandwidth": 0.92 * self.spec.hbm_bandwidth, "bytes": (1 if quick else 2) << 30,
                "source": "dry run: fake number, not a measurement"}

    def make_inputs(self, shape, pages, peers: bool, n_sets: int, seed: int):
        self.made.append((dict(shape), tuple(pages), peers, n_sets))
        return [({"shape": dict(shape), "set": i, "seed": seed},) for i in range(n_sets)]

    def reference(self, s):
        return {"shape": s["shape"]}

    def runner(self, kernel: str, config: Any = None, page_size: int | None = None) -> Callable[..., Any]:
        from .decode import decode_bytes

        def run(s):
            if kernel in self.fail:
                raise RuntimeError(f"fake: {kernel} does not take these inputs")
            rate = self.BANDWIDTH[kernel] * (0.97 if page_size else 1.0)
            nbytes = decode_bytes(s["shape"])["kv_read" if kernel == DECODE_FLOOR else "total"]
            return {"time_s": self.LAUNCH_S + nbytes / rate,
                    "err": 0.05 if kernel in self.wrong else 2e-3}

        if kernel not in DECODE_KERNELS:
            run.how = {"gqa": "enable_gqa", "mask": "fake"}
        return run

    def check(self, kernel: str, fn: Callable[..., Any], inputs, ref) -> tuple[float, bool]:
        err = fn(*inputs[0])["err"]
        return err, math.isfinite(err)


class FakeVarlen:
    """The varlen rows in a dry run (``validation.varlen``): each kernel's time its row's FLOPs at a fixed
    rate plus a launch (``SM90_RATE`` with a config of flash_sm90's); kernels in ``fail`` raise on every
    call, those in ``refuse_gqa`` on GQA shapes (as a backend refusing the inputs), those in ``wrong``
    are off by 5%."""

    RATE = {"flash_varlen_sm80": 300e12, "flash_varlen": 300e12, "flash_dense": 330e12, "flash_dense_sm80": 330e12,
            "torch_varlen_attn": 310e12, "sdpa_flash_nested": 290e12}
    SM90_RATE = {"flash_varlen": 520e12, "flash_dense": 560e12}
    LAUNCH_S = 10e-6

    def __init__(self, fail: Iterable[str] = (), wrong: Iterable[str] = (),
                 refuse_gqa: Iterable[str] = ("sdpa_flash_nested",)):
        self.fail, self.wrong, self.refuse_gqa = set(fail), set(wrong), set(refuse_gqa)
        self.made: list[tuple] = []   # (packed shape, dense shape, nested, n_sets) of every make_inputs call

    def make_inputs(self, shape, dense, nested: bool, n_sets: int, seed: int):
        self.made.append((dict(shape), dict(dense) if dense else None, nested, n_sets))
        return [({"shape": dict(shape), "set": i, "seed": seed},) for i in range(n_sets)]

    def reference(self, s):
        return {"shape": s["shape"]}

    def rate(self, kernel: str, config: Any = None) -> float:
        return self.SM90_RATE[kernel] if "consumers" in config_dict(config) else self.RATE[kernel]

    def runner(self, kernel: str, config: Any, shape) -> Callable[..., Any]:
        row_shape = dict(shape)

        def run(s):
            if kernel in self.fail or (kernel in self.refuse_gqa and row_shape["H"] != row_shape["H_kv"]):
                raise RuntimeError(f"fake: {kernel} does not take these inputs")
            return {"time_s": self.LAUNCH_S + algo_flops(VARLEN, row_shape) / self.rate(kernel, config),
                    "err": 0.05 if kernel in self.wrong else 2e-3}

        if kernel in VARLEN_PEERS:
            run.how = {"call": VARLEN_PEERS[kernel], "causal": "fake"}
        return run

    def check(self, kernel: str, fn: Callable[..., Any], inputs, ref) -> tuple[float, bool]:
        err = fn(*inputs[0])["err"]
        return err, math.isfinite(err)


class FakeEnv:
    """CPU stand-in for the GPU: fake kernels, fake outputs, a fake timer.

    Deterministic: a config's fake speed depends only on its fields.  Some configs fail on purpose,
    to exercise the error paths (by config label, e.g. ``64x128 w4 s1``): ``fail`` (the build
    raises), ``nan`` (the output is NaN), ``wrong`` (the output is off by 5%), ``fail_timing`` (pass
    the check, then raise when timed); and ``unsupported_peers`` raise on every input.
    """

    device_name = "FAKE GPU (dry run)"
    torch_version = None
    cuda_version = None

    def __init__(self, spec, *, fail: Iterable[str] = ("64x128 w4 s1",), nan: Iterable[str] = ("128x32 w4 s3",),
                 wrong: Iterable[str] = (), fail_timing: Iterable[str] = (),
                 unsupported_peers: Iterable[str] = ("sdpa_cudnn",), with_sm90: bool = True, sleep_s: float = 0.0):
        self.spec = spec
        self.sm_count = spec.sm_count
        self.compute_capability = spec.compute_capability
        self.fail = set(fail)
        self.nan = set(nan)
        self.wrong = set(wrong)
        self.fail_timing = set(fail_timing)
        self._in_check = False
        self.unsupported_peers = set(unsupported_peers)
        self.with_sm90 = with_sm90
        self.timer = FakeTimer(self._time_of, sleep_s=sleep_s)
        self.fake_algorithms = FakeAlgorithms()
        # the decode peer of an unsupported forward peer refuses too (``sdpa_cudnn_decode`` by default)
        self.fake_decode = FakeDecode(spec, fail=[f"{p}_decode" for p in self.unsupported_peers])
        self.fake_varlen = FakeVarlen()

    def measure_ceilings(self, spec, *, quick: bool = False, log=print):
        from .ceilings import CeilingResult

        res = CeilingResult()
        clock = float(spec.facts["max_boost_clock_hz"].value) if "max_boost_clock_hz" in spec.facts else spec.clock_hz
        res.values = {
            "gemm_flops": 0.71 * spec.peak_tensor_flops("bf16"),
            "copy_bandwidth": 0.9 * spec.hbm_bandwidth,
            "l2_bandwidth": 2.5 * spec.hbm_bandwidth,
            "clock_hz": clock,
            "exp2_per_clk_per_sm": 16.0,
            "fp32_fma_per_clk_per_sm": 0.957 * spec.fp32_fma_per_clk_per_sm,
            "mma_sync_flops_per_clk_per_sm": 0.6 * spec.tensor_flops_per_clk_per_sm.get("bf16", 2048),
            "hbm_latency_s": 525e-9,
        }
        for k in res.values:
            res.sources[k] = "dry run: fake number, not a measurement"
        res.clock_source = "dry run: spec max boost clock"
        log("  (dry run: fake ceilings)")
        return res

    def families(self) -> dict[str, KernelFamily]:
        """The registry's shipped configs of every family, with fake runners."""
        fams = {name: KernelFamily.shipped(name, self._runner(name)) for name in SWEEP_KERNELS}
        if not self.with_sm90:
            fams["flash_sm90"] = KernelFamily("flash_sm90", skip="dry run: no sm90 family")
        return fams

    def _runner(self, kernel: str) -> Callable[..., Any]:
        def run(cfg, q, k, v, causal=False):
            label = config_label(kernel, cfg)
            if label in self.fail:
                raise RuntimeError(f"fake build failure for {kernel} {label}")
            if label in self.fail_timing and not self._in_check:
                raise RuntimeError(f"fake launch failure while timing {kernel} {label}")
            shape = q["shape"]
            err = float("nan") if label in self.nan else (0.05 if label in self.wrong else 2e-3)
            return {"time_s": conventional_flops(shape) / fake_rate(kernel, cfg, shape), "err": err}

        return run

    def peers(self) -> dict[str, tuple[Callable | None, str | None]]:
        def runner(peer: str) -> Callable[..., Any]:
            def run(q, k, v, causal=False, **features):   # features: a window or softcap the peer takes
                if peer in self.unsupported_peers:
                    raise RuntimeError(f"fake: {peer} does not support these inputs")
                shape = q["shape"]
                return {"time_s": conventional_flops(shape) / fake_rate(peer, None, shape), "err": 1e-3}

            return run

        return {peer: (runner(peer), None) for peer in PEER_KERNELS}

    def algorithms(self) -> FakeAlgorithms:
        return self.fake_algorithms

    def decode(self) -> FakeDecode:
        return self.fake_decode

    def varlen(self) -> FakeVarlen:
        return self.fake_varlen

    def make_inputs(self, shape, n_sets: int, seed: int):
        return [tuple({"shape": dict(shape), "set": i, "seed": seed} for _ in range(3)) for i in range(n_sets)]

    def reference(self, q, k, v, causal, features=None):
        return {"shape": q["shape"]}

    def features(self, shape) -> dict:
        return {}

    def check(self, out, ref) -> tuple[float, bool]:
        err = out["err"]
        return err, math.isfinite(err)

    def memory_problem(self, kernel: str, shape) -> str | None:
        return None

    @contextlib.contextmanager
    def checking(self, kernel: str):
        self._in_check = True  # so ``fail_timing`` configs pass their check
        try:
            yield
        finally:
            self._in_check = False

    def _time_of(self, fn, inputs) -> float:
        return fn(*inputs[0])["time_s"]

    def sync(self) -> None:
        pass

    def release(self) -> None:
        pass
