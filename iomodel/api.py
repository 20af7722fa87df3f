"""The model's public entry points: predictions for kernel families, tile rankings, peers.

A kernel family pairs a relabeled diagram from `diagrams.library` with an `ExecutionPlan`
(overlap mode, tensor instruction, register overhead) and the other facts of its code (the
instruction shape its tiles must fit, the head dims it is built for). Derivations are cached per
family and variant, so the many calls of a tile search or a validation sweep cost one lambdify each.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import numpy as np

from diagrams.diagram import as_program
from diagrams import library

from .derive import derive
from .hardware import Calibration, GpuSpec, load_calibration, load_spec, spec_for_device, HardwareError
from .perf import ExecutionPlan, ModelError, ProgramModel, build_model

DTYPES = ("bf16", "fp16")
PROBLEM_FIELDS = {"attention": ("B", "H", "H_kv", "N_q", "N_k", "d"), "matmul": ("M", "N", "K"),
                  "softmax": ("rows", "cols")}


@dataclass(frozen=True)
class Family:
    name: str
    description: str
    config_keys: tuple[str, ...]
    symbols: dict                # config key -> diagram symbol name
    plan: ExecutionPlan
    build: Callable              # (causal, gqa) -> diagram or program
    problem: str = "attention"   # which shape fields it takes: attention | matmul | softmax
    kernel_plans: dict = field(default_factory=dict)  # kernel name -> plan, where a kernel differs from `plan`
    label: str = ""              # a config in a few characters (str.format over the config keys)
    head_dims: tuple[int, ...] = ()  # the head dims its kernels are built for (attention; empty: any)
    derived_symbols: Callable | None = None  # configs -> {symbol: values} the code derives from the config keys
    instruction_check: Callable | None = None  # (spec, config, d) -> why the config breaks the instruction shape, or ""


def _flash_sm80(causal: bool, gqa: bool):
    kw = dict(kv_heads="Hk", heads="H") if gqa else {}
    return library.flash_attention(block_m="Br", block_n="Bc", warps="w", stages="st", causal=causal, **kw)


def _flash_sm90(causal: bool, gqa: bool):
    # consumer warpgroups (128 threads) own `block_m / consumers` query rows each
    kw = dict(kv_heads="Hk", heads="H") if gqa else {}
    return library.flash_attention(block_m="Br", block_n="Bc", warps="cw", stages="st", causal=causal,
                                   unit_threads=128, skip_per_unit=True, **kw)


def _unfused(causal: bool, gqa: bool):
    if gqa:
        raise ModelError("the unfused kernel family has no grouped-query variant")
    return library.unfused_attention(block_m="bm", block_n="bn", block_k="bk", warps_m="wm", warps_n="wn",
                                     stages="st")


def _matmul(causal: bool, gqa: bool):
    return library.tiled_matmul(tile_a="ta", tile_c="tc", chunk_b="kb", stages="st", warps="w",
                                a="Ma", b="Kb", c="Nc")


def _softmax(causal: bool, gqa: bool):
    return library.streamed_softmax(library.softmax(rows="R", cols="C"), "rb")


def _unfused_warps(configs: list[Mapping]) -> dict[str, np.ndarray]:
    # the matmul kernels put 2 warps along n (1 when there is a single warp), the rest along m
    warps = np.array([int(c["warps"]) for c in configs], dtype=np.float64)
    wn = np.where(warps >= 2, 2.0, 1.0)
    return {"wn": wn, "wm": warps / wn}


def _rows_per_warp(spec: GpuSpec, c: Mapping) -> str:
    """Why the block's rows do not split into whole mma row blocks per warp ("" when they do)."""
    m = spec.mma_sync_shape[0]
    rows = c["block_m"] / c["warps"]
    if rows != int(rows) or int(rows) % m:
        return f"rows per warp block_m/warps = {rows:g} is not a multiple of mma m={m}"
    return ""


def _check_flash_sm80(spec: GpuSpec, c: Mapping, d: int) -> str:
    k = spec.mma_sync_shape[2]
    why = _rows_per_warp(spec, c)
    if why:
        return why
    if c["block_n"] % k:  # block_n is the k of P.V and a multiple of n for Q.K^T
        return f"block_n {c['block_n']} is not a multiple of mma k={k}"
    if d % k:
        return f"head dim {d} is not a multiple of mma k={k}"
    return ""


def _check_flash_sm90(spec: GpuSpec, c: Mapping, d: int) -> str:
    wg = spec.wgmma
    if wg is None:
        return f"{spec.key} has no wgmma"
    rows = c["block_m"] / c["consumers"]
    if rows != int(rows) or int(rows) % wg.m:
        return f"rows per consumer warpgroup = {rows:g} is not a multiple of wgmma m={wg.m}"
    if rows != wg.m:
        # the family's kernel gives each consumer warpgroup one wgmma row block
        return f"rows per consumer warpgroup = {rows:g}: the kernel gives each warpgroup {wg.m} rows"
    if c["block_n"] % wg.k or not wg.valid_n(c["block_n"]):
        return f"block_n {c['block_n']} is not a valid wgmma n (multiple of {wg.n_multiple}, <= {wg.n_max}) and k={wg.k}"
    if not wg.valid_n(d):
        return f"head dim {d} is not a valid wgmma n"
    return ""


def _check_mma_matmul(spec: GpuSpec, c: Mapping, d: int) -> str:
    _, n, k = spec.mma_sync_shape
    why = _rows_per_warp(spec, c)
    if why:
        return why
    if c["block_n"] % n or c["block_k"] % k:
        return f"block_n must be a multiple of {n} and block_k of {k}"
    return ""


FAMILIES: dict[str, Family] = {
    "flash_sm80": Family("flash_sm80", "FlashAttention forward, mma.sync + cp.async, synchronous warps",
                         ("block_m", "block_n", "warps", "stages"),
                         {"block_m": "Br", "block_n": "Bc", "warps": "w", "stages": "st"},
                         ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=56,
                                       min_reg_overhead=40, interleave_max=1.4, step_latency_cycles_per_warp=70.0),
                         _flash_sm80, label="{block_m}x{block_n} w{warps} s{stages}", head_dims=(64, 128, 256),
                         instruction_check=_check_flash_sm80),
    "flash_sm90": Family("flash_sm90", "FlashAttention forward, wgmma + TMA, warp-specialized",
                         ("block_m", "block_n", "stages", "consumers"),
                         {"block_m": "Br", "block_n": "Bc", "stages": "st", "consumers": "cw"},
                         ExecutionPlan(overlap="warp-specialized", tensor_instruction="wgmma", reg_overhead=24,
                                       extra_threads=128, extra_thread_regs=24, register_operands=True,
                                       interleave_max=1.6, interleave_slope=0.4, step_latency_cycles=100.0,
                                       latency_hidden_by_stages=True, step_latency_cycles_per_warp=40.0,
                                       fill_steps=2.0, tensor_reads_smem=True,
                                       sync_bytes_per_buffer=16, smem_slack_bytes=1024),
                         _flash_sm90, label="{block_m}x{block_n} c{consumers} s{stages}", head_dims=(64, 128, 256),
                         instruction_check=_check_flash_sm90),
    "unfused": Family("unfused", "three kernels: scores (mma.sync), row softmax, output (mma.sync)",
                      ("block_m", "block_n", "block_k", "warps", "stages"),
                      {"block_m": "bm", "block_n": "bn", "block_k": "bk", "stages": "st"},
                      ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=40,
                                    fragment_buffers=2, interleave_max=1.4, memory_overlap=0.75,
                                    step_latency_cycles=1000.0),
                      _unfused,
                      kernel_plans={"softmax": ExecutionPlan(overlap="sync", tensor_instruction="mma_sync",
                                                             reg_overhead=24)},
                      label="{block_m}x{block_n}x{block_k} w{warps} s{stages}", head_dims=(64, 128, 256),
                      derived_symbols=_unfused_warps, instruction_check=_check_mma_matmul),
    "matmul_sm80": Family("matmul_sm80", "tiled matmul, mma.sync, contraction streamed through SMEM",
                          ("block_m", "block_n", "block_k", "warps", "stages"),
                          {"block_m": "ta", "block_n": "tc", "block_k": "kb", "warps": "w", "stages": "st"},
                          ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=40,
                                        fragment_buffers=2),
                          _matmul, "matmul", label="{block_m}x{block_n}x{block_k} w{warps} s{stages}",
                          instruction_check=_check_mma_matmul),
    "softmax": Family("softmax", "row softmax in two passes, a warp per row, rows_per_block warps a block",
                      ("rows_per_block",), {"rows_per_block": "rb"},
                      ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=16),
                      _softmax, "softmax", label="{rows_per_block} rows/block"),
}


@dataclass
class Prediction:
    kernel: str
    gpu: str
    config: dict
    shape: dict
    time_s: float
    tflops: float
    flops: float                 # conventional attention FLOPs (ANCHORS.md convention)
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

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def resolve_gpu(gpu: str | GpuSpec) -> GpuSpec:
    if isinstance(gpu, GpuSpec):
        return gpu
    try:
        return load_spec(gpu)
    except HardwareError as first:
        try:
            return spec_for_device(gpu)
        except HardwareError:
            raise first from None


def resolve_calibration(spec: GpuSpec, calibration) -> Calibration | None:
    if calibration == "auto":
        return load_calibration(spec.key)
    if calibration is None or isinstance(calibration, Calibration):
        return calibration
    return load_calibration(calibration)


def check_shape(kernel: str, shape: Mapping) -> dict:
    s = dict(shape)
    fam = family(kernel)
    problem = fam.problem
    if problem == "attention":
        defaults = {"H_kv": s.get("H"), "N_k": s.get("N_q"), "causal": False, "dtype": "bf16"}
    else:
        defaults = {"dtype": "bf16", "causal": False}
    for key, val in defaults.items():
        s.setdefault(key, val)
    for key in PROBLEM_FIELDS[problem]:
        val = s.get(key)
        if not isinstance(val, (int, np.integer)) or isinstance(val, bool) or val <= 0:
            raise ModelError(f"shape field {key} must be a positive integer, got {val!r}")
    if problem == "attention" and s["H"] % s["H_kv"]:
        raise ModelError(f"heads ({s['H']}) must be a multiple of kv heads ({s['H_kv']})")
    if s["dtype"] not in DTYPES:
        raise ModelError(f"dtype {s['dtype']!r} not supported; use one of {', '.join(DTYPES)}")
    if fam.head_dims and s["d"] not in fam.head_dims:
        raise ModelError(f"head dim {s['d']} not supported by {kernel}; supported: {fam.head_dims}")
    return s


def conventional_flops(shape: Mapping) -> float:
    """The FLOPs a result is reported against (ANCHORS.md): 4*B*H*N_q*N_k*d for attention, halved when
    causal with N_q == N_k (the exact live fraction otherwise); 2*M*N*K for a matmul; 5 operations per
    element for a softmax (max, subtract, exp, sum, divide)."""
    if "K" in shape and "M" in shape:
        return 2.0 * shape["M"] * shape["N"] * shape["K"]
    if "rows" in shape:
        return 5.0 * shape["rows"] * shape["cols"]
    nq, nk = shape["N_q"], shape.get("N_k", shape["N_q"])
    full = 4.0 * shape["B"] * shape["H"] * nq * nk * shape["d"]
    if not shape.get("causal"):
        return full
    if nq == nk:
        return full / 2
    live = np.clip(np.arange(nq) + (nk - nq) + 1, 0, nk).sum()
    return full * float(live) / (nq * nk)


@functools.lru_cache(maxsize=None)
def family_model(kernel: str, causal: bool, gqa: bool, dtype: str = "bf16") -> ProgramModel:
    fam = family(kernel)
    prog = as_program(fam.build(causal, gqa))
    plans = [dataclasses.replace(fam.kernel_plans.get(k.name, fam.plan), dtype=dtype) for k in prog.kernels]
    return build_model(derive(prog, exact=False), plans)


def shape_model(kernel: str, shape: Mapping) -> ProgramModel:
    """The (cached) model of a family for a checked shape: its causality, grouped heads and dtype."""
    return family_model(kernel, bool(shape["causal"]), shape.get("H_kv", 1) != shape.get("H", 1), shape["dtype"])


def family(kernel: str) -> Family:
    if kernel not in FAMILIES:
        raise ModelError(f"unknown kernel family {kernel!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[kernel]


def symbol_values(kernel: str, shape: Mapping, configs: Iterable[Mapping]) -> dict[str, np.ndarray]:
    fam = family(kernel)
    configs = list(configs)
    if fam.problem == "matmul":
        vals: dict[str, object] = {"Ma": shape["M"], "Nc": shape["N"], "Kb": shape["K"]}
    elif fam.problem == "softmax":
        vals = {"R": shape["rows"], "C": shape["cols"]}
    else:
        vals = {"B": shape["B"], "H": shape["H"], "N": shape["N_q"], "M": shape["N_k"],
                "d": shape["d"], "Hk": shape["H_kv"], "g": shape["H"] // shape["H_kv"]}
    for c in configs:
        if any(key not in c for key in fam.config_keys):
            raise ModelError(f"{kernel} config needs {', '.join(fam.config_keys)}; got {sorted(c)}")
    if fam.derived_symbols is not None:
        vals.update(fam.derived_symbols(configs))
    for key, symname in fam.symbols.items():
        vals[symname] = np.array([int(c[key]) for c in configs], dtype=np.float64)
    return vals


def evaluate_configs(kernel: str, gpu, shape: Mapping, configs: list[Mapping], calibration="auto"):
    spec = resolve_gpu(gpu)
    cal = resolve_calibration(spec, calibration)
    s = check_shape(kernel, shape)
    model = shape_model(kernel, s)
    for c in configs:
        if "head_dim" in c and int(c["head_dim"]) != s["d"]:
            raise ModelError(f"config head_dim {c['head_dim']} does not match the shape's d={s['d']}")
    values = symbol_values(kernel, s, configs)
    return spec, cal, s, model.evaluate(values, spec, cal)


def _prediction(kernel, spec, cal, shape, config, res, i) -> Prediction:
    k0 = res["kernels"]
    time_s = float(res["time_s"][i])
    flops = conventional_flops(shape)
    terms: dict[str, float] = {}
    for kk in k0:
        for name, arr in kk["terms"].items():
            terms[name] = terms.get(name, 0.0) + float(np.asarray(arr)[i])
    main = max(k0, key=lambda kk: float(kk["time_s"][i]))
    executed: dict[str, float] = {}
    for kk in k0:
        for u, arr in kk["work"].items():
            executed[u] = executed.get(u, 0.0) + float(arr[i])
    peak = spec.peak_tensor_flops(shape["dtype"])
    reason = str(res["infeasible"][i])
    return Prediction(
        kernel=kernel, gpu=spec.key, config=dict(config), shape=dict(shape), time_s=time_s,
        tflops=flops / time_s / 1e12, flops=flops, executed_flops=executed,
        hbm_bytes=float(sum(kk["hbm_bytes"][i] for kk in k0)),
        global_bytes=float(sum(kk["global_bytes"][i] for kk in k0)),
        bottleneck=str(main["bottleneck"][i]), terms=terms,
        blocks_per_sm=float(main["occupancy"][i]), occupancy_limit=str(main["occupancy_limit"][i]),
        smem_bytes=float(main["smem_bytes"][i]), regs_per_thread=float(main["regs"][i]),
        waves=float(main["waves"][i]), fraction_of_peak=flops / time_s / peak,
        calibration_used=(f"{cal.gpu_key} ({cal.date})" if cal is not None else None),
        feasible=(reason == ""), reason=reason,
        kernels=[{"name": kc.costs.name, "time_s": float(kk["time_s"][i]), "bottleneck": str(kk["bottleneck"][i]),
                  "regs": float(kk["regs"][i]), "smem_bytes": float(kk["smem_bytes"][i]),
                  "blocks": float(kk["blocks"][i]), "occupancy": float(kk["occupancy"][i])}
                 for kc, kk in zip(shape_model(kernel, shape).kernels, k0)])


def predict(kernel: str, gpu, shape: Mapping, config: Mapping, calibration="auto") -> Prediction:
    """Predicted time and every term for one configuration of a kernel family."""
    spec, cal, s, res = evaluate_configs(kernel, gpu, shape, [config], calibration)
    return _prediction(kernel, spec, cal, s, config, res, 0)


def rank_configs(kernel: str, gpu, shape: Mapping, candidates: list[Mapping], calibration="auto",
                 include_infeasible: bool = False) -> list[tuple[dict, Prediction]]:
    """Candidates ranked by predicted time, best first (infeasible ones dropped unless asked)."""
    if not candidates:
        raise ModelError(f"no candidate configurations to rank for {kernel}")
    spec, cal, s, res = evaluate_configs(kernel, gpu, shape, list(candidates), calibration)
    preds = [_prediction(kernel, spec, cal, s, c, res, i) for i, c in enumerate(candidates)]
    ranked = sorted(zip([dict(c) for c in candidates], preds), key=lambda cp: (not cp[1].feasible, cp[1].time_s))
    if not include_infeasible:
        ranked = [cp for cp in ranked if cp[1].feasible]
        if not ranked:
            raise ModelError(f"none of the {len(candidates)} {kernel} configurations fits on {spec.key}")
    return ranked


# Peers: the tile choices their sources state (FlashAttention-2, csrc/flash_attn/src/flash_fwd_launch_template.h,
# for sm80/sm90 without Hopper instructions). cuDNN and the memory-efficient kernel state none we can cite.
PEER_CONFIGS = {
    "sdpa_flash": ("flash_sm80", {64: dict(block_m=128, block_n=128, warps=4, stages=1),
                                  128: dict(block_m=128, block_n=64, warps=4, stages=1),
                                  256: dict(block_m=64, block_n=64, warps=4, stages=1)}),
}
PEERS = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient")


def peer_prediction(peer: str, gpu, shape: Mapping, calibration="auto") -> Prediction | None:
    if peer not in PEERS:
        raise ModelError(f"unknown peer {peer!r}; known: {', '.join(PEERS)}")
    if peer not in PEER_CONFIGS:
        return None
    kernel, by_d = PEER_CONFIGS[peer]
    cfg = by_d.get(int(shape["d"]))
    if cfg is None:
        return None
    return predict(kernel, gpu, shape, {**cfg, "head_dim": shape["d"]}, calibration)
