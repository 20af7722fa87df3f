"""The model's public entry points: predictions for kernel families, tile rankings, peers.

A kernel family pairs a relabeled diagram from `diagrams.library` with an `ExecutionPlan`
(overlap mode, tensor instruction, register overhead). Derivations are cached per family and
variant, so the many calls of a tile search or a validation sweep cost one lambdify each.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np

from diagrams.diagram import as_program
from diagrams import library

from .derive import derive
from .hardware import Calibration, GpuSpec, load_calibration, load_spec, spec_for_device, HardwareError
from .perf import ExecutionPlan, ModelError, ProgramModel, build_model

DTYPES = ("bf16", "fp16")
HEAD_DIMS = {"flash_sm80": (64, 128, 256), "flash_sm90": (64, 128, 256), "unfused": (64, 128, 256)}


@dataclass(frozen=True)
class Family:
    name: str
    description: str
    config_keys: tuple[str, ...]
    symbols: dict                # config key -> diagram symbol name
    plan: ExecutionPlan
    build: callable              # (causal, gqa) -> diagram or program
    problem: str = "attention"   # which shape fields it takes: attention | matmul | softmax
    kernel_plans: dict = field(default_factory=dict)  # kernel name -> plan, where a kernel differs from `plan`


def _flash_sm80(causal: bool, gqa: bool):
    kw = dict(kv_heads="Hk", heads="H") if gqa else {}
    return library.flash_attention(block_m="Br", block_n="Bc", warps="w", stages="st", causal=causal, **kw)


def _flash_sm90(causal: bool, gqa: bool):
    # consumer warpgroups (128 threads) own `block_m / consumers` query rows each
    kw = dict(kv_heads="Hk", heads="H") if gqa else {}
    return library.flash_attention(block_m="Br", block_n="Bc", warps="cw", stages="st", causal=causal,
                                   unit_threads=128, **kw)


def _unfused(causal: bool, gqa: bool):
    if gqa:
        raise ModelError("the unfused kernel family has no grouped-query variant")
    return library.unfused_attention(block_m="bm", block_n="bn", block_k="bk", warps_m="wm", warps_n="wn",
                                     stages="st")


def _matmul(causal: bool, gqa: bool):
    return library.tiled_matmul(tile_a="ta", tile_c="tc", chunk_b="kb", stages="st", warps="w",
                                a="Ma", b="Kb", c="Nc")


def _softmax(causal: bool, gqa: bool):
    # two passes over each row (online max and sum, then normalize), a warp per row, 128 columns a step
    return (library.softmax(rows="R", cols="C").online_softmax().group("n", "rb")
            .group("n", 1, "reg").stream("m", 128, "reg"))


FAMILIES: dict[str, Family] = {
    "flash_sm80": Family("flash_sm80", "FlashAttention forward, mma.sync + cp.async, synchronous warps",
                         ("block_m", "block_n", "warps", "stages"),
                         {"block_m": "Br", "block_n": "Bc", "warps": "w", "stages": "st"},
                         ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=56,
                                       min_reg_overhead=40, interleave_max=1.4, step_latency_cycles_per_warp=70.0),
                         _flash_sm80),
    "flash_sm90": Family("flash_sm90", "FlashAttention forward, wgmma + TMA, warp-specialized",
                         ("block_m", "block_n", "stages", "consumers"),
                         {"block_m": "Br", "block_n": "Bc", "stages": "st", "consumers": "cw"},
                         ExecutionPlan(overlap="warp-specialized", tensor_instruction="wgmma", reg_overhead=24,
                                       extra_threads=128, extra_thread_regs=24, register_operands=True,
                                       interleave_max=1.4, interleave_slope=0.2, step_latency_cycles=100.0,
                                       latency_hidden_by_stages=True, step_latency_cycles_per_warp=20.0,
                                       tensor_reads_smem=True,
                                       sync_bytes_per_buffer=16, smem_slack_bytes=1024),
                         _flash_sm90),
    "unfused": Family("unfused", "three kernels: scores (mma.sync), row softmax, output (mma.sync)",
                      ("block_m", "block_n", "block_k", "warps", "stages"),
                      {"block_m": "bm", "block_n": "bn", "block_k": "bk", "stages": "st"},
                      ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=40,
                                    fragment_buffers=2, interleave_max=1.4, memory_overlap=0.75,
                                    step_latency_cycles=1000.0),
                      _unfused,
                      kernel_plans={"softmax": ExecutionPlan(overlap="sync", tensor_instruction="mma_sync",
                                                             reg_overhead=24)}),
    "matmul_sm80": Family("matmul_sm80", "tiled matmul, mma.sync, contraction streamed through SMEM",
                          ("block_m", "block_n", "block_k", "warps", "stages"),
                          {"block_m": "ta", "block_n": "tc", "block_k": "kb", "warps": "w", "stages": "st"},
                          ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=40,
                                        fragment_buffers=2),
                          _matmul, "matmul"),
    "softmax": Family("softmax", "row softmax in two passes, a warp per row, rows_per_block warps a block",
                      ("rows_per_block",), {"rows_per_block": "rb"},
                      ExecutionPlan(overlap="sync", tensor_instruction="mma_sync", reg_overhead=16),
                      _softmax, "softmax"),
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


PROBLEM_FIELDS = {"matmul": ("M", "N", "K"), "softmax": ("rows", "cols")}


def check_shape(kernel: str, shape: Mapping) -> dict:
    s = dict(shape)
    problem = family(kernel).problem
    if problem != "attention":
        s.setdefault("dtype", "bf16")
        s.setdefault("causal", False)
        for key in PROBLEM_FIELDS[problem]:
            val = s.get(key)
            if not isinstance(val, (int, np.integer)) or isinstance(val, bool) or val <= 0:
                raise ModelError(f"shape field {key} must be a positive integer, got {val!r}")
        if s["dtype"] not in DTYPES:
            raise ModelError(f"dtype {s['dtype']!r} not supported; use one of {', '.join(DTYPES)}")
        return s
    s.setdefault("H_kv", s.get("H"))
    s.setdefault("N_k", s.get("N_q"))
    s.setdefault("causal", False)
    s.setdefault("dtype", "bf16")
    for key in ("B", "H", "H_kv", "N_q", "N_k", "d"):
        val = s.get(key)
        if not isinstance(val, (int, np.integer)) or isinstance(val, bool) or val <= 0:
            raise ModelError(f"shape field {key} must be a positive integer, got {val!r}")
    if s["H"] % s["H_kv"]:
        raise ModelError(f"heads ({s['H']}) must be a multiple of kv heads ({s['H_kv']})")
    if s["dtype"] not in DTYPES:
        raise ModelError(f"dtype {s['dtype']!r} not supported; use one of {', '.join(DTYPES)}")
    if kernel in HEAD_DIMS and s["d"] not in HEAD_DIMS[kernel]:
        raise ModelError(f"head dim {s['d']} not supported by {kernel}; supported: {HEAD_DIMS[kernel]}")
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
    diagram = fam.build(causal, gqa)
    prog = as_program(diagram)
    costs = derive(prog, exact=False)
    plans = [ExecutionPlan(**{**fam.kernel_plans.get(k.name, fam.plan).__dict__, "dtype": dtype}) for k in prog.kernels]
    return build_model(costs, prog.kernels, plans)


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
    if fam.name == "unfused":
        # the matmul kernels put 2 warps along n (1 when there is a single warp), the rest along m
        warps = np.array([int(c["warps"]) for c in configs], dtype=np.float64)
        vals["wn"] = np.where(warps >= 2, 2.0, 1.0)
        vals["wm"] = warps / vals["wn"]
    for key, symname in fam.symbols.items():
        try:
            vals[symname] = np.array([int(c[key]) for c in configs], dtype=np.float64)
        except KeyError:
            raise ModelError(f"{kernel} config needs {', '.join(fam.config_keys)}; got {sorted(configs[0])}") from None
    return vals


def evaluate_configs(kernel: str, gpu, shape: Mapping, configs: list[Mapping], calibration="auto"):
    spec = resolve_gpu(gpu)
    cal = resolve_calibration(spec, calibration)
    s = check_shape(kernel, shape)
    gqa = s.get("H_kv", 1) != s.get("H", 1)
    model = family_model(kernel, bool(s["causal"]), gqa, s["dtype"])
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
                 for kc, kk in zip(family_model(kernel, bool(shape["causal"]), shape.get("H_kv", 1) != shape.get("H", 1),
                                                shape["dtype"]).kernels, k0)])


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
