"""The validation sweep: measure ceilings, then predict, build, check and time
every (kernel family x tile configuration x shape) row, and the SDPA peers on
the same inputs in the same process.

The sweep logic is written against a small ``Env`` interface so that it runs
both on a GPU (``TorchEnv``: torch, CuPy, ``kernels``) and on a CPU with fake
kernels and a fake timer (``FakeEnv``, ``--dry-run``).  Nothing imports torch
at module import time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import itertools
import json
import math
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .timing import FakeTimer, TimingOutcome

__all__ = [
    "OUR_KERNELS",
    "PEER_KERNELS",
    "TOLERANCE",
    "default_shapes",
    "conventional_flops",
    "write_json_atomic",
    "KernelFamily",
    "PlannedRow",
    "Predictor",
    "build_plan",
    "run_sweep",
    "FakeEnv",
    "TorchEnv",
    "device_slug",
    "default_out_path",
]

from iomodel import api as _model_api  # noqa: E402
from iomodel.api import conventional_flops  # noqa: E402
from iomodel.hardware import write_text_atomic  # noqa: E402
from iomodel.validate import (OUR_KERNELS, PEER_KERNELS, config_dict, config_label, shape_key,  # noqa: E402
                              shape_label)

#: max relative error allowed, by dtype (max |out - ref| / max |ref|)
TOLERANCE = {"bf16": 1e-2, "fp16": 5e-3}
FAMILIES = (*OUR_KERNELS, "peers")  # what ``only`` may name
SWEEP_N = 4096          # every shipped config is timed at this sequence length
TOKENS = 16384          # B * N
HIDDEN = 2048           # H * d
DEFAULT_BUDGET_S = 510  # whole run, ceilings included: inside 9 minutes on one H100


# --------------------------------------------------------------------------- small helpers

def make_shape(N: int, d: int, causal: bool, dtype: str = "bf16", tokens: int = TOKENS,
               hidden: int = HIDDEN) -> dict[str, Any]:
    B = max(1, tokens // N)
    H = max(1, hidden // d)
    return {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": bool(causal), "dtype": dtype}


def default_shapes(quick: bool = False, dtype: str = "bf16") -> list[dict[str, Any]]:
    """B*N = 16384 tokens, H*d = 2048; N in {1024, 4096, 16384}, d in {64, 128},
    causal and not.  The N = 4096 shapes (where every config runs) come first.
    ``quick``: d=128 N=4096 non-causal (all configs) and d=64 N=1024 causal."""
    if quick:
        return [make_shape(4096, 128, False, dtype), make_shape(1024, 64, True, dtype)]
    shapes = []
    for N in (4096, 1024, 16384):
        for d in (128, 64):
            for causal in (False, True):
                shapes.append(make_shape(N, d, causal, dtype))
    return shapes


def jsonable(x: Any) -> Any:
    """Convert to plain JSON types; non-finite floats become None."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [jsonable(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return jsonable(dataclasses.asdict(x))
    # numpy scalars and arrays, without importing numpy
    if hasattr(x, "tolist"):
        return jsonable(x.tolist())
    if hasattr(x, "item"):
        try:
            return jsonable(x.item())
        except Exception:  # noqa: BLE001
            pass
    return str(x)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (a reader never sees a half-written file)."""
    return write_text_atomic(path, json.dumps(jsonable(obj), indent=1, allow_nan=False) + "\n")


def device_slug(name: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "gpu"


def default_out_path(device_name: str, date: str | None = None) -> Path:
    """``$OUT/<device>-<date>.json`` when ``$OUT`` is set (the device machine
    sends back what lands there), else ``validation/results/<device>-<date>.json``."""
    date = date or _dt.date.today().isoformat()
    base = os.environ.get("OUT")
    folder = Path(base) if base else Path(__file__).resolve().parent / "results"
    return folder / f"{device_slug(device_name)}-{date}.json"


def _short_error(exc: BaseException, limit: int = 600) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    text = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- families and plan

@dataclass
class KernelFamily:
    """One kernel family as the sweep sees it.

    ``run(config, q, k, v, causal)`` returns the output; ``configs_for(d)``
    the shipped configs for head dim ``d``; ``skip`` says why the whole
    family cannot run here (then it has no rows)."""

    name: str
    configs: Sequence[Any] = ()
    run: Callable[..., Any] | None = None
    skip: str | None = None
    head_dim_specific: bool = True

    def configs_for(self, d: int) -> list[Any]:
        if not self.head_dim_specific:
            return list(self.configs)
        out = []
        for c in self.configs:
            hd = getattr(c, "head_dim", None)
            if hd is None:
                hd = config_dict(c).get("head_dim")
            if hd is None or int(hd) == int(d):
                out.append(c)
        return out


@dataclass
class PlannedRow:
    kernel: str
    shape: dict[str, Any]
    config: Any = None
    why: str = ""            # "sweep" (all configs at N=4096), "model-top", "peer"
    predicted_rank: int | None = None

    @property
    def is_peer(self) -> bool:
        return self.kernel in PEER_KERNELS

    @property
    def label(self) -> str:
        return config_label(self.kernel, self.config)


class Predictor:
    """The model, through ``iomodel.api`` (or a stand-in with its ``predict``,
    ``peer_prediction`` and ``rank_configs``).  Every call is guarded: a model
    error becomes ``(None, message)``, never a crash."""

    def __init__(self, spec, calibration, api: Any = None):
        self.spec = spec
        self.calibration = calibration
        self.api = api if api is not None else _model_api

    @staticmethod
    def summarize(pred: Any) -> dict[str, Any] | None:
        if pred is None:
            return None
        d = pred.as_dict() if hasattr(pred, "as_dict") else dict(vars(pred))
        keep = ("time_s", "tflops", "flops", "hbm_bytes", "bottleneck", "terms", "blocks_per_sm",
                "occupancy_limit", "smem_bytes", "regs_per_thread", "waves", "calibration_used",
                "feasible", "reason")
        return jsonable({k: d[k] for k in keep if k in d})

    def predict(self, kernel: str, shape: Mapping, cfg: Any) -> tuple[dict | None, str | None]:
        try:
            pred = self.api.predict(kernel, self.spec, dict(shape), config_dict(cfg),
                                    calibration=self.calibration)
            return self.summarize(pred), None
        except Exception as exc:  # noqa: BLE001
            return None, _short_error(exc)

    def peer(self, peer: str, shape: Mapping) -> tuple[dict | None, str | None]:
        try:
            pred = self.api.peer_prediction(peer, self.spec, dict(shape), calibration=self.calibration)
            return self.summarize(pred), None
        except Exception as exc:  # noqa: BLE001
            return None, _short_error(exc)

    def rank(self, kernel: str, shape: Mapping, configs: Sequence[Any]) -> tuple[list[int] | None, str | None]:
        """Indices of ``configs`` best first (the model's order; configs the model
        finds infeasible are left out), or None with why."""
        if not configs:
            return [], None
        dicts = [config_dict(c) for c in configs]
        try:
            ranked = self.api.rank_configs(kernel, self.spec, dict(shape), dicts, calibration=self.calibration)
        except Exception as exc:  # noqa: BLE001
            return None, _short_error(exc)
        order: list[int] = []
        for cfg, _pred in ranked:
            cd = dict(cfg)
            for i, d in enumerate(dicts):
                if i not in order and all(d.get(k) == v for k, v in cd.items() if k in d):
                    order.append(i)
                    break
        return order, None


def build_plan(
    shapes: Sequence[Mapping[str, Any]],
    families: Mapping[str, KernelFamily],
    predictor: Predictor | None,
    *,
    only: Iterable[str] = FAMILIES,
    sweep_n: int = SWEEP_N,
    notes: list[str] | None = None,
) -> list[PlannedRow]:
    """Rows to run, grouped by shape (inputs are made once per shape).

    At ``N == sweep_n`` every shipped config of the head dim (model order when
    the model ranks them); elsewhere the model's top config (the first shipped
    one when the model cannot rank).  Peers at every shape."""
    only = set(only)
    notes = notes if notes is not None else []
    rows: list[PlannedRow] = []
    for shape in shapes:
        shape = dict(shape)
        for kname in OUR_KERNELS:
            if kname not in only:
                continue
            fam = families.get(kname)
            if fam is None or fam.skip:
                continue
            cfgs = fam.configs_for(shape["d"])
            if not cfgs:
                notes.append(f"{kname}: no shipped config for d={shape['d']}")
                continue
            order, why = (None, "no model")
            if predictor is not None:
                order, why = predictor.rank(kname, shape, cfgs)
            if order is None:
                order = list(range(len(cfgs)))
                msg = f"{kname} {shape_label(shape)}: model could not rank configs ({why}); using shipped order"
                if msg not in notes:
                    notes.append(msg)
            elif not order:
                notes.append(f"{kname} {shape_label(shape)}: the model finds no feasible config; timing them all")
                order = list(range(len(cfgs)))
            ranked_set = set(order)
            full_order = order + [i for i in range(len(cfgs)) if i not in ranked_set]
            if shape["N_q"] == sweep_n:
                for r, i in enumerate(full_order):
                    rows.append(PlannedRow(kname, shape, cfgs[i], "sweep", r if i in ranked_set else None))
            else:
                i = full_order[0]
                rows.append(PlannedRow(kname, shape, cfgs[i], "model-top", 0 if i in ranked_set else None))
        if "peers" in only:
            for peer in PEER_KERNELS:
                rows.append(PlannedRow(peer, shape, None, "peer"))
    return rows


# --------------------------------------------------------------------------- environments

class FakeEnv:
    """CPU stand-in for the GPU: fake kernels, fake outputs, a fake timer.

    Deterministic: a config's fake speed depends only on its fields, so the
    sweep, the JSON and the statistics can be checked without a GPU.  Some
    configs fail on purpose, to exercise the error paths:
    ``fail`` (labels whose build raises), ``nan`` (labels whose output is NaN),
    ``wrong`` (labels whose output is off by 5%), ``fail_timing`` (labels that
    pass the check, then raise when timed); and one peer is unsupported.
    """

    device_name = "FAKE GPU (dry run)"
    torch_version = None
    cuda_version = None

    def __init__(self, spec, *, fail: Iterable[str] = ("64x128w4s1",), nan: Iterable[str] = ("128x32w4s3",),
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

    # the fake "device" ------------------------------------------------------
    def _fake_rate(self, kernel: str, cfg: Any, shape: Mapping) -> float:
        """FLOP/s a fake kernel reaches: a smooth function of its tile sizes."""
        base = {"flash_sm80": 330e12, "flash_sm90": 560e12, "unfused": 110e12,
                "sdpa_flash": 320e12, "sdpa_cudnn": 540e12, "sdpa_efficient": 150e12}[kernel]
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
        return base * max(0.2, 1.0 - pen)

    def measure_ceilings(self, spec, *, quick: bool = False, log=print):
        from .ceilings import CeilingResult

        res = CeilingResult()
        clock = float(spec.facts["max_boost_clock_hz"].value) if "max_boost_clock_hz" in spec.facts else spec.clock_hz
        res.values = {
            "gemm_flops": 0.71 * spec.peak_tensor_flops("bf16"),
            "copy_bandwidth": 0.9 * spec.hbm_bandwidth,
            "clock_hz": clock,
            "exp2_per_clk_per_sm": 16.0,
            "fp32_fma_per_clk_per_sm": 0.957 * spec.fp32_fma_per_clk_per_sm,
            "mma_sync_flops_per_clk_per_sm": 0.6 * spec.tensor_flops_per_clk_per_sm.get("bf16", 2048),
        }
        for k in res.values:
            res.sources[k] = "dry run: fake number, not a measurement"
        res.clock_source = "dry run: spec max boost clock"
        log("  (dry run: fake ceilings)")
        return res

    def families(self) -> dict[str, KernelFamily]:
        """The shipped configs of ``kernels`` (importing it needs neither torch nor a GPU), fake runners."""
        from kernels import configs as kc

        fams = {
            "flash_sm80": KernelFamily("flash_sm80", list(kc.SHIPPED_FLASH), self._runner("flash_sm80")),
            "unfused": KernelFamily("unfused", list(kc.SHIPPED_MATMUL), self._runner("unfused"),
                                    head_dim_specific=False),
        }
        if self.with_sm90:
            from kernels import sm90

            fams["flash_sm90"] = KernelFamily("flash_sm90", list(sm90.SHIPPED_SM90), self._runner("flash_sm90"))
        else:
            fams["flash_sm90"] = KernelFamily("flash_sm90", skip="dry run: no sm90 family")
        return fams

    def _runner(self, kernel: str):
        def run(cfg, q, k, v, causal=False):
            label = config_label(kernel, cfg)
            if label in self.fail:
                raise RuntimeError(f"fake build failure for {kernel} {label}")
            if label in self.fail_timing and not self._in_check:
                raise RuntimeError(f"fake launch failure while timing {kernel} {label}")
            shape = q["shape"]
            t = conventional_flops(shape) / self._fake_rate(kernel, cfg, shape)
            err = float("nan") if label in self.nan else (0.05 if label in self.wrong else 2e-3)
            return {"time_s": t, "err": err}

        return run

    def peers(self) -> dict[str, tuple[Callable | None, str | None]]:
        out = {}
        for peer in PEER_KERNELS:
            if peer in self.unsupported_peers:
                def run(q, k, v, causal=False, _p=peer):
                    raise RuntimeError(f"fake: {_p} does not support these inputs")
            else:
                def run(q, k, v, causal=False, _p=peer):
                    shape = q["shape"]
                    return {"time_s": conventional_flops(shape) / self._fake_rate(_p, None, shape), "err": 1e-3}
            out[peer] = (run, None)
        return out

    def make_inputs(self, shape, n_sets: int, seed: int):
        return [tuple({"shape": dict(shape), "set": i, "seed": seed} for _ in range(3)) for i in range(n_sets)]

    def reference(self, q, k, v, causal):
        return {"shape": q["shape"]}

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


class TorchEnv:
    """The real device: torch tensors, the ``kernels`` package, SDPA peers."""

    def __init__(self, *, min_repeats: int = 20, target_s: float = 0.12):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device visible to torch (use --dry-run to check the sweep on a CPU)")
        from .timing import CudaEventTimer

        self.torch = torch
        dev = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(dev)
        self.device_name = torch.cuda.get_device_name(dev)
        self.sm_count = props.multi_processor_count
        self.compute_capability = (props.major, props.minor)
        self.total_memory = props.total_memory
        self.torch_version = torch.__version__
        self.cuda_version = torch.version.cuda
        self.timer = CudaEventTimer(min_repeats=min_repeats, target_s=target_s)

    def measure_ceilings(self, spec, *, quick: bool = False, log=print):
        from .ceilings import measure_ceilings

        return measure_ceilings(spec, quick=quick, log=log)

    def families(self) -> dict[str, KernelFamily]:
        fams: dict[str, KernelFamily] = {}
        try:
            import kernels
            from kernels import configs as kc
        except Exception as exc:  # noqa: BLE001
            why = f"import kernels failed: {_short_error(exc)}"
            fams["flash_sm80"] = KernelFamily("flash_sm80", skip=why)
            fams["unfused"] = KernelFamily("unfused", skip=why)
        else:
            for name, attr, shipped, by_d in (("flash_sm80", "flash_attention", "SHIPPED_FLASH", True),
                                              ("unfused", "attention_unfused", "SHIPPED_MATMUL", False)):
                fn = getattr(kernels, attr, None)
                cfgs = getattr(kc, shipped, None)
                if fn is None or cfgs is None:
                    missing = f"kernels.{attr}" if fn is None else f"kernels.configs.{shipped}"
                    fams[name] = KernelFamily(name, skip=f"{missing} not found")
                    continue
                fams[name] = KernelFamily(
                    name, list(cfgs),
                    lambda cfg, q, k, v, causal=False, _fn=fn: _fn(q, k, v, causal=causal, config=cfg),
                    head_dim_specific=by_d)
        if self.compute_capability[0] != 9:
            fams["flash_sm90"] = KernelFamily(
                "flash_sm90", skip=f"needs sm_90a; this device is sm_{self.compute_capability[0]}{self.compute_capability[1]}")
        else:
            try:
                from kernels import sm90

                fams["flash_sm90"] = KernelFamily(
                    "flash_sm90", list(sm90.SHIPPED_SM90),
                    lambda cfg, q, k, v, causal=False: sm90.flash_attention_sm90(q, k, v, causal=causal, config=cfg))
            except Exception as exc:  # noqa: BLE001 - ImportError, AttributeError, or a broken module
                fams["flash_sm90"] = KernelFamily("flash_sm90", skip=f"kernels.sm90 unavailable: {_short_error(exc)}")
        return fams

    def peers(self):
        from .peers import peer_runners

        return peer_runners(self.torch)

    def _dtype(self, name: str):
        return {"bf16": self.torch.bfloat16, "fp16": self.torch.float16}[name]

    def make_inputs(self, shape, n_sets: int, seed: int):
        torch = self.torch
        g = torch.Generator(device="cuda")
        g.manual_seed(seed)
        dt = self._dtype(shape["dtype"])
        B, H, Hk, Nq, Nk, d = (shape[k] for k in ("B", "H", "H_kv", "N_q", "N_k", "d"))
        sets = []
        for _ in range(n_sets):
            q = torch.randn((B, H, Nq, d), generator=g, device="cuda", dtype=torch.float32).to(dt)
            k = torch.randn((B, Hk, Nk, d), generator=g, device="cuda", dtype=torch.float32).to(dt)
            v = torch.randn((B, Hk, Nk, d), generator=g, device="cuda", dtype=torch.float32).to(dt)
            sets.append((q, k, v))
        return sets

    def reference(self, q, k, v, causal):
        """float32 attention, chunked over query rows so the scores stay under ~512 MiB."""
        from .reference import attention_reference
        return attention_reference(q, k, v, causal)[0]

    def check(self, out, ref) -> tuple[float, bool]:
        torch = self.torch
        if isinstance(out, (tuple, list)):
            out = out[0]
        if tuple(out.shape) != tuple(ref.shape):
            raise ValueError(f"output shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
        o = out.float()
        if not bool(torch.isfinite(o).all()):
            return float("nan"), False
        denom = float(ref.abs().max())
        err = float((o - ref).abs().max()) / max(denom, 1e-30)
        return err, True

    def memory_problem(self, kernel: str, shape) -> str | None:
        if kernel != "unfused":
            return None
        free, _total = self.torch.cuda.mem_get_info()
        need = shape["B"] * shape["H"] * shape["N_q"] * shape["N_k"] * (4 + 2)
        if need > 0.85 * free:
            return (f"skipped: the unfused kernel needs ~{need / 2**30:.1f} GiB for the N x N scores "
                    f"(fp32 S + 16-bit P), {free / 2**30:.1f} GiB free")
        return None

    @contextlib.contextmanager
    def checking(self, kernel: str):
        """For the correctness call of our kernels: the kernels' debug mode, which
        NaN-poisons the output first (unwritten tiles show up) and synchronizes
        after each launch (errors surface at their launch).  Off for timing."""
        set_debug = None
        if kernel in OUR_KERNELS:
            try:
                import kernels

                set_debug = getattr(kernels, "set_debug", None)
            except Exception:  # noqa: BLE001
                set_debug = None
        if set_debug is None:
            yield
            return
        try:
            from kernels._runtime import debug_enabled

            before = bool(debug_enabled())
        except Exception:  # noqa: BLE001
            before = False
        set_debug(True)
        try:
            yield
        finally:
            set_debug(before)

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def release(self) -> None:
        self.torch.cuda.empty_cache()


# --------------------------------------------------------------------------- the sweep

@dataclass
class SweepOptions:
    out: Path
    calibration_out: Path | None = None
    quick: bool = False
    only: tuple[str, ...] = FAMILIES
    shapes: list[dict[str, Any]] | None = None
    measure_ceilings: bool = True
    calibration_in: Any = None        # a Calibration or path used when not measuring
    budget_s: float = DEFAULT_BUDGET_S
    input_sets: int = 3
    seed: int | None = None
    dry_run: bool = False
    rounds: int = 5                   # timing rounds per shape; 1: each row timed in one block


def _row_record(row: PlannedRow) -> dict[str, Any]:
    return {
        "kernel": row.kernel,
        "config": jsonable(config_dict(row.config)) if row.config is not None else None,
        "config_label": row.label,
        "why": row.why,
        "predicted_rank": row.predicted_rank,
        "shape": dict(row.shape),
        "ok": False,
        "max_rel_err": None,
        "measured_ms": None,
        "measured_tflops": None,
        "predicted_ms": None,
        "predicted_tflops": None,
        "predicted_bottleneck": None,
    }


def _unrun_record(row: PlannedRow, why: str) -> dict[str, Any]:
    """The record of a row that did not run, ``why`` as its error."""
    rec = _row_record(row)
    rec["error"] = why
    return rec


def _fill_prediction(rec: dict, pred: dict | None, err: str | None, key: str = "prediction") -> None:
    if pred is not None and pred.get("time_s"):
        rec["predicted_ms"] = pred["time_s"] * 1e3
        rec["predicted_tflops"] = pred.get("tflops")
        rec["predicted_bottleneck"] = pred.get("bottleneck")
        rec[key] = pred
    if err:
        rec["prediction_error"] = err


#: ``error`` of a row that passed its check and waits for its shape's timing;
#: it stays in the JSON only if the run stops before that
NOT_TIMED = "passed the check; not timed (yet)"


def _recover(env) -> None:
    """After an exception on the device: surface a pending asynchronous error
    (and swallow it) and give cached memory back."""
    try:
        env.sync()
    except Exception:  # noqa: BLE001 - a sticky CUDA error; the next rows will say so
        pass
    env.release()


def _record_error(rec: dict, exc: BaseException) -> None:
    rec["error"] = _short_error(exc)
    rec["traceback_tail"] = "".join(traceback.format_exception(exc)[-3:])[-1500:]


def row_callable(row: PlannedRow, run: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(q, k, v)`` running this row's kernel (with its config) on one input set."""
    causal = bool(row.shape.get("causal"))
    if row.is_peer:
        return lambda q, k, v: run(q, k, v, causal)
    cfg = row.config
    return lambda q, k, v: run(cfg, q, k, v, causal)


def check_row(env, row: PlannedRow, inputs, ref, run: Callable[..., Any],
              predictor: Predictor | None) -> tuple[dict, Callable[..., Any] | None]:
    """Predict, run once and check one row.  Never raises.  Returns its record
    and the callable to time, or None when the row failed (the record says why)."""
    rec = _row_record(row)
    shape = row.shape
    if predictor is not None:
        if row.is_peer:
            pred, perr = predictor.peer(row.kernel, shape)
            _fill_prediction(rec, pred, perr, key="peer_prediction")
        else:
            pred, perr = predictor.predict(row.kernel, shape, row.config)
            _fill_prediction(rec, pred, perr)
    fn = row_callable(row, run)
    try:
        problem = env.memory_problem(row.kernel, shape)
        if problem:
            rec["error"] = problem
            return rec, None
        with env.checking(row.kernel):
            out = fn(*inputs[0])
            env.sync()
        err, finite = env.check(out, ref)
        del out  # outputs are not kept: timing makes its own
        rec["max_rel_err"] = err if finite else None
        tol = TOLERANCE.get(shape.get("dtype", "bf16"), 1e-2)
        if not finite:
            rec["error"] = "output has NaN or Inf"
            return rec, None
        if not err < tol:
            rec["error"] = f"wrong result: max_rel_err {err:.3g} >= {tol:g}"
            return rec, None
    except Exception as exc:  # noqa: BLE001 - one bad config must not end the sweep
        _record_error(rec, exc)
        _recover(env)
        return rec, None
    rec["error"] = NOT_TIMED
    return rec, fn


def fill_timing(rec: dict, outcome: TimingOutcome) -> None:
    """Put a row's timing (or the exception its timing raised) into its record."""
    if isinstance(outcome, Exception):
        _record_error(rec, outcome)
        return
    rec.pop("error", None)
    rec["measured_ms"] = outcome.median_s * 1e3
    rec["measured_tflops"] = conventional_flops(rec["shape"]) / outcome.median_s / 1e12
    rec["timing"] = outcome.as_dict()
    rec["ok"] = True


def progress_line(i: int, n: int, rec: dict, elapsed_s: float) -> str:
    s = rec["shape"]
    head = (f"[{i}/{n}] {rec['kernel']} {rec.get('config_label') or '-'} d{s['d']} N{s['N_q']}"
            f"{' causal' if s.get('causal') else ''}")
    if rec["ok"]:
        body = f"{rec['measured_tflops']:.1f} TFLOP/s"
    else:
        body = f"FAILED ({rec.get('error', '?')})"
    pred = f" (pred {rec['predicted_tflops']:.1f})" if rec.get("predicted_tflops") else " (pred -)"
    return f"{head}: {body}{pred}  [{elapsed_s:.0f}s]"


def _calibration_from_ceilings(spec, env, res, date: str):
    from iomodel.hardware import Calibration

    v = res.values
    return Calibration(
        gpu_key=spec.key,
        device_name=env.device_name,
        date=date,
        source=f"python -m validation run on {env.device_name}, {date}",
        clock_hz=v.get("clock_hz"),
        gemm_flops=v.get("gemm_flops"),
        mma_sync_flops_per_clk_per_sm=v.get("mma_sync_flops_per_clk_per_sm"),
        copy_bandwidth=v.get("copy_bandwidth"),
        exp2_per_clk_per_sm=v.get("exp2_per_clk_per_sm"),
        fp32_fma_per_clk_per_sm=v.get("fp32_fma_per_clk_per_sm"),
        sources={k: s for k, s in res.sources.items() if v.get(k) is not None},
    )


def run_sweep(env, spec, opts: SweepOptions, *, predictor_api: Any = None,
              log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the whole validation; returns the results dict (also written to ``opts.out``)."""
    from iomodel.hardware import calibration_to_dict, load_calibration, write_calibration

    if log is None:
        def log(msg: str) -> None:
            print(msg, file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    date = _dt.date.today().isoformat()
    results: dict[str, Any] = {
        "schema_version": 1,
        "device": env.device_name,
        "gpu_key": spec.key,
        "sm_count": env.sm_count,
        "compute_capability": list(env.compute_capability),
        "torch": env.torch_version,
        "cuda": env.cuda_version,
        "date": date,
        "dry_run": bool(opts.dry_run),
        "options": {"quick": opts.quick, "only": list(opts.only), "input_sets": opts.input_sets,
                    "budget_s": opts.budget_s, "rounds": opts.rounds,
                    "lead_in_calls": env.timer.lead_in, "tolerance": TOLERANCE},
        "calibration": None,
        "ceilings": None,
        "notes": [],
        "skipped_families": {},
        "rows": [],
    }
    if spec.sm_count != env.sm_count:
        results["notes"].append(
            f"spec {spec.key} has {spec.sm_count} SMs but the device reports {env.sm_count}: wrong --gpu-spec?")

    # 1. ceilings -> calibration
    cal = None
    if opts.measure_ceilings:
        log(f"measuring ceilings on {env.device_name} ...")
        res = env.measure_ceilings(spec, quick=opts.quick, log=log)
        results["ceilings"] = res.as_dict()
        cal = _calibration_from_ceilings(spec, env, res, date)
        cal_out = opts.calibration_out or _default_calibration_out(opts.out, spec.key)
        try:
            write_calibration(cal_out, cal)
            results["calibration_file"] = str(cal_out)
            log(f"calibration written to {cal_out}  [{time.perf_counter() - t0:.0f}s]")
        except Exception as exc:  # noqa: BLE001
            results["notes"].append(f"could not write calibration: {_short_error(exc)}")
    else:
        cal = opts.calibration_in if opts.calibration_in is not None else load_calibration(spec.key)
        if cal is not None and not hasattr(cal, "gpu_key"):
            cal = load_calibration(cal)
        results["notes"].append("ceilings not measured: " + (
            f"using calibration {cal.gpu_key} ({cal.date})" if cal is not None else "no calibration"))
    results["calibration"] = calibration_to_dict(cal) if cal is not None else None
    write_json_atomic(opts.out, results)

    # 2. plan
    predictor = Predictor(spec, cal, api=predictor_api)
    families = env.families()
    for name, fam in families.items():
        if fam.skip and (name in opts.only):
            results["skipped_families"][name] = fam.skip
            log(f"skipping {name}: {fam.skip}")
    shapes = opts.shapes or default_shapes(opts.quick)
    plan = build_plan(shapes, families, predictor, only=opts.only, notes=results["notes"])
    peer_fns = env.peers() if "peers" in opts.only else {}
    n = len(plan)
    log(f"{n} rows over {len(shapes)} shapes  [{time.perf_counter() - t0:.0f}s]")

    # 3. rows, shape by shape: check every row of a shape, then time the ones
    # that passed together, interleaved, so drift cannot favour one config
    seed = opts.seed if opts.seed is not None else int(time.time()) % 1_000_000
    results["seed"] = seed

    def save() -> None:
        results["elapsed_s"] = time.perf_counter() - t0
        write_json_atomic(opts.out, results)

    def finish(i: int, rec: dict) -> None:
        log(progress_line(i, n, rec, time.perf_counter() - t0))

    out_of_time = f"skipped: time budget of {opts.budget_s:.0f}s used up"
    numbered = list(enumerate(plan, 1))
    for _key, group_iter in itertools.groupby(numbered, key=lambda ir: shape_key(ir[1].shape)):
        group = list(group_iter)
        shape = group[0][1].shape
        inputs = ref = None
        env.release()
        if time.perf_counter() - t0 > opts.budget_s:
            results["rows"] += [_unrun_record(row, out_of_time) for _i, row in group]
            continue
        try:
            inputs = env.make_inputs(shape, opts.input_sets, seed + group[0][0])
            ref = env.reference(*inputs[0], bool(shape.get("causal")))
            env.sync()
        except Exception as exc:  # noqa: BLE001
            why = f"could not make inputs/reference: {_short_error(exc)}"
            inputs = ref = None
            _recover(env)
            for i, row in group:
                rec = _unrun_record(row, why)
                results["rows"].append(rec)
                finish(i, rec)
            save()
            continue
        # 3a. predict, run once, check; the record is on disk before any timing
        to_time: list[tuple[int, dict, Callable[..., Any]]] = []
        for i, row in group:
            if time.perf_counter() - t0 > opts.budget_s:
                results["rows"].append(_unrun_record(row, out_of_time))
                continue
            if row.is_peer:
                run, why = peer_fns.get(row.kernel, (None, "peer not available"))
                if run is None:
                    rec = _unrun_record(row, f"skipped: {why}")
                    results["rows"].append(rec)
                    finish(i, rec)
                    save()
                    continue
            else:
                run = families[row.kernel].run
            rec, fn = check_row(env, row, inputs, ref, run, predictor)
            results["rows"].append(rec)
            if fn is None:
                finish(i, rec)
            else:
                to_time.append((i, rec, fn))
            save()
        ref = None  # not needed for timing
        # 3b. time the rows that passed, together
        if to_time:
            try:
                outcomes = env.timer.time_interleaved([fn for _i, _r, fn in to_time], inputs, opts.rounds,
                                                      on_error=lambda: _recover(env))
            except Exception as exc:  # noqa: BLE001 - the timer itself failed: every row of the shape says so
                _recover(env)
                outcomes = [exc] * len(to_time)
            for (i, rec, _fn), outcome in zip(to_time, outcomes):
                fill_timing(rec, outcome)
                finish(i, rec)
            save()

    inputs = ref = None
    env.release()
    results["elapsed_s"] = time.perf_counter() - t0
    ok = sum(1 for r in results["rows"] if r["ok"])
    write_json_atomic(opts.out, results)
    log(f"done: {ok}/{len(results['rows'])} rows ok in {results['elapsed_s']:.0f}s; results in {opts.out}")
    return results


def _default_calibration_out(out: Path, key: str) -> Path:
    base = os.environ.get("OUT")
    if base:
        return Path(base) / f"calibration-{key}.toml"
    out = Path(out)
    return out.with_name(out.stem + f".calibration-{key}.toml")
