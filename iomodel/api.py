"""The model's public entry points: predictions and rankings of kernel-family configurations.

A family (``iomodel.families``) pairs a relabeled diagram with an execution plan. Its derivation is
cached per family and variant (causal, grouped heads, dtype), so the many calls of a tile search or a
validation sweep cost one lambdify each. Configs are the families' typed configs throughout; a
mapping of their fields is accepted and converted (fields the shape fixes, like head_dim, may be
left out).
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from diagrams.diagram import as_program

from . import families
from .derive import derive
from .errors import ModelError
from .hardware import CALIBRATION_DIR, Calibration, GpuSpec, HardwareError, load_calibration, resolve_gpu
from .limits import check_fits
from .names import suggest
from .perf import ProgramModel, build_model
from .problems import check_shape, is_windowed, problem_flops, score_mods_of, shape_symbols, window_of

__all__ = ["Prediction", "predict", "rank_configs", "prepare", "evaluate_configs", "symbol_values", "model_result",
           "family_model", "shape_model", "resolve_calibration", "named_calibration"]


@dataclass
class Prediction:
    kernel: str
    gpu: str
    config: object               # the family's typed config
    shape: dict
    time_s: float
    tflops: float
    flops: float                 # conventional FLOPs of the problem (ANCHORS.md convention, iomodel.problems)
    executed_flops: dict         # per unit, as the kernel executes them (whole tiles)
    hbm_bytes: float
    global_bytes: float
    bottleneck: str
    terms: dict
    blocks_per_sm: float
    occupancy_limit: str
    smem_bytes: float
    regs_per_thread: float
    waves: float
    fraction_of_peak: float
    calibration_used: str | None
    feasible: bool = True
    reason: str = ""
    kernels: list = field(default_factory=list)
    spilled_regs: float = 0.0    # registers per thread of the slowest kernel that ptxas would spill

    def as_dict(self) -> dict:
        """Plain types; `config` as its searched sizes (the shape's own, like head_dim, are in `shape`)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["config"] = families.get(self.kernel).tiles(self.config)
        return d


def resolve_calibration(spec: GpuSpec | None, calibration) -> Calibration | None:
    """'auto': the shipped calibration of the GPU (None when there is none); None or 'none':
    datasheet rates; a Calibration passes; anything else is a calibration key or TOML path
    (:func:`named_calibration`)."""
    if calibration == "auto":
        return load_calibration(spec.key)
    if calibration is None or calibration == "none" or isinstance(calibration, Calibration):
        return None if calibration == "none" else calibration
    return named_calibration(calibration)


def named_calibration(name) -> Calibration:
    """The calibration a key (``h100-sxm``; a GPU alias finds its key) or TOML path names.  A name
    that finds none raises HardwareError naming the known ones: it is a typo, not a request for
    datasheet rates."""
    cal = load_calibration(name)
    if cal is None:
        known = sorted(p.stem for p in CALIBRATION_DIR.glob("*.toml"))
        raise HardwareError(f"no calibration {str(name)!r}{suggest(name, ['auto', 'none', *known])}: "
                            f"use auto, none, {', '.join(known)} or a calibration TOML path")
    return cal


def family_diagram(kernel: str, causal: bool, gqa: bool, dtype: str = "bf16",
                   window: tuple[bool, bool] | None = None, mods: tuple[str, ...] = ()):
    """The diagram (or program) of a family's variant that ``family_model`` derives: its plain or causal diagram,
    or the plain one with a window's band; the score modifiers drawn on it (eager where the family's are)."""
    fam = families.get(kernel)
    if window is not None:
        d = fam.window_band(fam.build(False, gqa), *window)
    else:
        d = fam.build_for_dtype(dtype) if fam.build_for_dtype else fam.build(causal, gqa)
    if mods and fam.mods_eager:
        d = d.with_stale_max(0.0)
    if mods:
        from diagrams import library

        d = library.score_mods(d, mods)
    return d


@functools.lru_cache(maxsize=None)
def family_model(kernel: str, causal: bool, gqa: bool, dtype: str = "bf16",
                 window: tuple[bool, bool] | None = None, mods: tuple[str, ...] = ()) -> ProgramModel:
    """`window`: (left bound, right bound) of a sliding window: the family's plain diagram with that band
    (its bounds the symbols ``Wl`` and ``Wr``, the shape's ``window_left`` and ``window_right``).  `mods`:
    score modifiers (softcap, alibi) drawn on the family's scores (``diagrams.library.score_mods``)."""
    fam = families.get(kernel)
    prog = as_program(family_diagram(kernel, causal, gqa, dtype, window, mods))
    plans = [dataclasses.replace(fam.kernel_plans.get(k.name, fam.plan), dtype=dtype) for k in prog.kernels]
    # a mask's blocks stream unequal steps: the tail split is for equal ones; the kernels split no score modifiers
    if causal or window is not None or mods:
        plans = [dataclasses.replace(p, tail_pieces_max=1) for p in plans]
    return build_model(derive(prog, exact=False), plans)


def _variant(shape: Mapping) -> tuple:
    """(causal, gqa, dtype, window, mods): a checked shape's variant as family_model and family_diagram take it."""
    gqa = shape.get("H_kv", 1) != shape.get("H", 1)
    mods = score_mods_of(shape)
    if is_windowed(shape):
        left, right = window_of(shape)
        return False, gqa, shape["dtype"], (left >= 0, right >= 0), mods
    return window_of(shape)[1] == 0, gqa, shape["dtype"], None, mods   # (-1, 0) is causal


def shape_model(kernel: str, shape: Mapping) -> ProgramModel:
    """The (cached) model of a family for a checked shape: its causality, grouped heads, dtype, window and
    score modifiers."""
    return family_model(kernel, *_variant(shape))


def shape_diagram(kernel: str, shape: Mapping):
    """The diagram the model of `shape` derives (``family_diagram``): what pseudocode and draw show."""
    return family_diagram(kernel, *_variant(shape))


def prepare(kernel: str, gpu, shape: Mapping, calibration="auto"):
    """(family, spec, calibration, checked shape): every check a problem passes before the model runs,
    the same for one prediction and for a search (a GPU the family cannot run on, a shape the family
    or the GPU cannot hold)."""
    fam = families.get(kernel)
    spec = resolve_gpu(gpu)
    if fam.gpu_problem(spec):
        raise ModelError(f"{kernel} cannot run on {spec.key}: {fam.gpu_problem(spec)}")
    cal = resolve_calibration(spec, calibration)
    s = check_shape(fam, shape)
    check_fits(fam, spec, s)
    return fam, spec, cal, s


def evaluate_configs(kernel: str, gpu, shape: Mapping, configs: Sequence, calibration="auto"):
    """(spec, calibration, checked shape, typed configs, the model's vectorized result)."""
    fam, spec, cal, s = prepare(kernel, gpu, shape, calibration)
    typed = [fam.config(c, s) for c in configs]
    return spec, cal, s, typed, model_result(kernel, spec, cal, s, typed)


def symbol_values(kernel: str, shape: Mapping, typed: Sequence) -> dict:
    """Diagram symbol -> values: the checked shape's sizes, what the launch derives from them (a family's
    `launch_symbols`: decode's packed row tile) and each typed config's tiles."""
    fam = families.get(kernel)
    launch = fam.launch_symbols(shape) if fam.launch_symbols is not None else {}
    band = {}
    if is_windowed(shape):   # the window's bounds (an unbounded side's symbol is not in the diagram)
        left, right = window_of(shape)
        band = {"Wl": max(left, 0), "Wr": max(right, 0)}
    return {**shape_symbols(fam.problem, shape, fam.shape_fields), **launch, **band, **fam.symbol_values(typed)}


def model_result(kernel: str, spec: GpuSpec, cal, shape: Mapping, typed: Sequence) -> dict:
    """The model's vectorized result for typed configs of a checked shape."""
    return shape_model(kernel, shape).evaluate(symbol_values(kernel, shape, typed), spec, cal)


def _summed(kernels: list, key: str, i: int) -> dict[str, float]:
    """Per-name sums over a program's kernels of one result dict (terms or work) at config i."""
    out: dict[str, float] = {}
    for kk in kernels:
        for name, arr in kk[key].items():
            out[name] = out.get(name, 0.0) + float(np.asarray(arr)[i])
    return out


def _kernel_rows(kernel: str, shape: Mapping, k0: list, i: int) -> list[dict]:
    return [{"name": kc.costs.name, "time_s": float(kk["time_s"][i]), "bottleneck": str(kk["bottleneck"][i]),
             "regs": float(kk["regs"][i]), "smem_bytes": float(kk["smem_bytes"][i]),
             "blocks": float(kk["blocks"][i]), "occupancy": float(kk["occupancy"][i])}
            for kc, kk in zip(shape_model(kernel, shape).kernels, k0)]


def make_prediction(kernel, spec, cal, shape, config, res, i) -> Prediction:
    """The Prediction of config i of a vectorized model result."""
    k0 = res["kernels"]
    time_s = float(res["time_s"][i])
    flops = problem_flops(families.get(kernel), shape)
    main = max(k0, key=lambda kk: float(kk["time_s"][i]))
    reason = str(res["infeasible"][i])
    return Prediction(
        kernel=kernel, gpu=spec.key, config=config, shape=dict(shape), time_s=time_s,
        tflops=flops / time_s / 1e12, flops=flops, executed_flops=_summed(k0, "work", i),
        hbm_bytes=float(sum(kk["hbm_bytes"][i] for kk in k0)),
        global_bytes=float(sum(kk["global_bytes"][i] for kk in k0)),
        bottleneck=str(main["bottleneck"][i]), terms=_summed(k0, "terms", i),
        blocks_per_sm=float(main["occupancy"][i]), occupancy_limit=str(main["occupancy_limit"][i]),
        smem_bytes=float(main["smem_bytes"][i]), regs_per_thread=float(main["regs"][i]),
        waves=float(main["waves"][i]), fraction_of_peak=flops / time_s / spec.peak_tensor_flops(shape["dtype"]),
        calibration_used=(f"{cal.gpu_key} ({cal.date})" if cal is not None else None),
        feasible=(reason == ""), reason=reason, kernels=_kernel_rows(kernel, shape, k0, i),
        spilled_regs=float(main["spilled_regs"][i]))


def predict(kernel: str, gpu, shape: Mapping, config, calibration="auto") -> Prediction:
    """Predicted time and every term for one configuration of a kernel family."""
    spec, cal, s, typed, res = evaluate_configs(kernel, gpu, shape, [config], calibration)
    return make_prediction(kernel, spec, cal, s, typed[0], res, 0)


def rank_configs(kernel: str, gpu, shape: Mapping, candidates: Sequence, calibration="auto",
                 include_infeasible: bool = False) -> list[Prediction]:
    """Predictions of the candidates ranked by predicted time, best first (infeasible ones dropped
    unless asked); each carries its typed config."""
    if not candidates:
        raise ModelError(f"no candidate configurations to rank for {kernel}")
    spec, cal, s, typed, res = evaluate_configs(kernel, gpu, shape, candidates, calibration)
    preds = [make_prediction(kernel, spec, cal, s, c, res, i) for i, c in enumerate(typed)]
    ranked = sorted(preds, key=lambda p: (not p.feasible, p.time_s))
    if not include_infeasible:
        ranked = [p for p in ranked if p.feasible]
        if not ranked:
            raise ModelError(f"none of the {len(candidates)} {kernel} configurations fits on {spec.key}")
    return ranked
