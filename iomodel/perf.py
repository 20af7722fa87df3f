"""The performance model: derived costs x a GPU spec -> time, FLOP/s, bottleneck, every term.

Vectorized: every symbol of the costs may be a numpy array (one entry per configuration), so the
tile search evaluates thousands of configurations in one pass. The model (docs/performance-model.md):

* feasibility: SMEM per block, registers per thread, threads per block, instruction-shape multiples;
* occupancy: resident blocks per SM from SMEM (+ the per-block reservation), registers (allocated per
  warp in granules), threads and the block limit;
* per-SM work: the busiest SM runs ceil(blocks / SMs) blocks; each unit's time is its share of the
  work over its rate (tensor core, FP32 pipe, MUFU exp2, SMEM bandwidth);
* overlap: `sync` code (Ampere style: each warp does matmul, then softmax, then waits at a barrier)
  serializes the units within a warp, and resident warps on one scheduler hide each other only
  partly; `warp-specialized` code (Hopper: producer warps, pingpong consumers) overlaps them;
* memory: compulsory HBM bytes over HBM bandwidth, all global traffic over L2 bandwidth; overlapped
  with compute when the stream is pipelined (>= 2 stages) or several blocks share an SM;
* per stream step a fixed synchronization latency; one launch overhead per kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import sympy as sp

from .derive import KernelCosts, ProgramCosts
from .hardware import Calibration, GpuSpec
from .symbolic import NUMERIC_MODULES, sym

OVERLAP_MODES = ("sync", "warp-specialized")
COMPUTE_TERMS = ("tensor", "fp32", "exp", "smem")


class ModelError(ValueError):
    """A configuration the model cannot evaluate (one clear line)."""


@dataclass(frozen=True)
class ExecutionPlan:
    """How a kernel family runs a diagram: facts about its code that the diagram does not carry."""
    overlap: str = "sync"
    tensor_instruction: str = "mma_sync"   # "mma_sync" | "wgmma"
    reg_overhead: int = 40                 # registers per thread for addresses, indices, fragments (typical)
    min_reg_overhead: int | None = None    # what the compiler can squeeze that to at the 255 cap (None: same)
    extra_threads: int = 0                 # producer warps that hold no tile (warp specialization)
    extra_thread_regs: int | None = None   # their registers after `setmaxnreg` (None: same as the others)
    step_latency_cycles: float = 0.0       # barrier + pipeline wait per stream step, per block
    latency_hidden_by_stages: bool = False  # a deeper ring (stages - 1 chunks ahead) hides that wait
    step_latency_cycles_per_warp: float = 0.0  # the part that grows with the warps a barrier waits for
    interleave_max: float = 2.0            # sync code: how far co-resident warps hide each other's phases
    interleave_slope: float = 1.0          # overlap gained per extra co-resident warp (sync) or warpgroup (ws)
    memory_overlap: float = 1.0            # fraction of the shorter of compute and memory time hidden under the longer
    dtype: str = "bf16"
    # SMEM the code adds to the diagram's tiles: mbarriers of a TMA ring and alignment slack
    sync_bytes_per_buffer: int = 0         # mbarriers per staged buffer (full, and empty for a ring)
    smem_slack_bytes: int = 0              # alignment slack requested on top
    fragment_buffers: int = 0              # k-steps of SMEM operand fragments held in registers
    register_operands: bool = False        # on-chip operands held whole in registers (wgmma with A from registers)
    tensor_reads_smem: bool = False        # the tensor instruction reads its SMEM operands itself (wgmma): that
    #                                        traffic runs under the matrix product instead of as a phase of its own

    def __post_init__(self):
        if self.overlap not in OVERLAP_MODES:
            raise ModelError(f"unknown overlap mode {self.overlap!r}; known: {', '.join(OVERLAP_MODES)}")


@dataclass
class Rates:
    """Per-SM rates (per second) the model uses, and where each came from."""
    tensor: float
    fp32: float
    exp: float
    smem: float
    hbm: float
    l2: float | None
    clock_hz: float
    sources: dict[str, str] = field(default_factory=dict)


def rates_for(spec: GpuSpec, cal: Calibration | None, plan: ExecutionPlan) -> Rates:
    clock = spec.clock_hz
    src: dict[str, str] = {}
    if cal is not None and cal.clock_hz:
        clock = cal.clock_hz
        src["clock"] = f"calibration {cal.gpu_key} ({cal.date})"
    else:
        src["clock"] = "datasheet"
    dtype = plan.dtype if plan.dtype in spec.tensor_flops_per_clk_per_sm else "bf16"
    tensor_clk = spec.tensor_flops_per_clk_per_sm[dtype]
    src["tensor"] = f"datasheet {dtype} dense"
    if plan.tensor_instruction == "mma_sync" and spec.wgmma is not None:
        # Hopper runs mma.sync well below the wgmma datasheet rate: only a measurement says how far
        if cal is not None and cal.mma_sync_flops_per_clk_per_sm:
            tensor_clk = cal.mma_sync_flops_per_clk_per_sm
            src["tensor"] = "calibration mma.sync"
        else:
            src["tensor"] = "datasheet (wgmma rate; mma.sync uncalibrated, optimistic)"
    elif plan.tensor_instruction == "wgmma" and spec.wgmma is None:
        raise ModelError(f"{spec.key} has no wgmma (it is {spec.arch}); use the mma_sync plan")
    elif cal is not None and cal.gemm_flops and plan.tensor_instruction == "wgmma":
        tensor_clk = min(tensor_clk, cal.gemm_flops / (spec.sm_count * clock))
        src["tensor"] = "calibration GEMM"
    fma = spec.fp32_fma_per_clk_per_sm
    if cal is not None and cal.fp32_fma_per_clk_per_sm:
        fma, src["fp32"] = cal.fp32_fma_per_clk_per_sm, "calibration"
    ex = spec.exp2_per_clk_per_sm
    if cal is not None and cal.exp2_per_clk_per_sm:
        ex, src["exp"] = cal.exp2_per_clk_per_sm, "calibration"
    hbm = spec.hbm_bandwidth
    if cal is not None and cal.copy_bandwidth:
        hbm, src["hbm"] = cal.copy_bandwidth, "calibration copy"
    l2 = spec.facts["l2_bandwidth"].value if "l2_bandwidth" in spec.facts else None
    return Rates(tensor=tensor_clk * clock, fp32=fma * clock, exp=ex * clock,
                 smem=spec.smem_bytes_per_clk_per_sm * clock, hbm=hbm, l2=l2, clock_hz=clock, sources=src)


def _lambdify(exprs: Mapping[str, sp.Expr]):
    """One numpy function for all expressions; common subexpressions (mask counts) evaluated once."""
    names = sorted({s.name for e in exprs.values() for s in sp.sympify(e).free_symbols})
    args = [sym(n) for n in names]
    keys = list(exprs)
    fn = sp.lambdify(args, [sp.sympify(exprs[k]) for k in keys], modules=NUMERIC_MODULES, cse=True)
    return names, keys, fn


class CompiledKernel:
    """Lambdified costs of one kernel: evaluate on arrays of symbol values."""

    def __init__(self, costs: KernelCosts, compulsory_bytes: sp.Expr):
        self.costs = costs
        exprs = {
            "blocks": costs.blocks,
            "threads": costs.threads_per_block,
            "units": costs.units_per_block,
            "steps_total": costs.steps_total,
            "smem_bytes": costs.smem_bytes,
            "regs_raw": costs.regs_per_thread,
            "global_bytes": costs.global_bytes,
            "smem_traffic": costs.smem_traffic_bytes,
            "hbm_bytes": compulsory_bytes,
            "stages": costs.stream_stages,
            "smem_buffers": costs.smem_buffers,
            "frag_per_thread": costs.fragment_bytes_per_k / (4 * costs.unit_threads),
            "operand_regs": costs.register_operand_bytes / (4 * costs.unit_threads),
            "reread_bytes": costs.reread_bytes,
            "reread_span": costs.reread_span_per_unit,
        }
        for u in ("tensor", "fp32", "exp"):
            exprs[f"work_{u}"] = costs.flops.get(u, sp.Integer(0))
        self.names, self.keys, self.fn = _lambdify(exprs)

    def evaluate(self, values: Mapping[str, object], shape: tuple = ()) -> dict[str, np.ndarray]:
        missing = [n for n in self.names if n not in values]
        if missing:
            raise ModelError(f"kernel {self.costs.name}: no value for {', '.join(missing)}")
        args = [np.asarray(values[n], dtype=np.float64) for n in self.names]
        shape = np.broadcast_shapes(shape, *(a.shape for a in args))
        vals = self.fn(*args)
        return {k: np.broadcast_to(np.asarray(v, dtype=np.float64), shape) for k, v in zip(self.keys, vals)}


def _ceil_to(x, m):
    return np.ceil(x / m) * m


def occupancy(spec: GpuSpec, threads, smem, regs):
    """Resident blocks per SM and the resource that limits it."""
    warps = np.ceil(threads / 32)
    regs_warp = _ceil_to(regs * 32, spec.reg_alloc_unit)
    by_regs = np.floor(spec.regs_per_sm / np.maximum(regs_warp * warps, 1))
    by_smem = np.where(smem > 0, np.floor(spec.smem_per_sm / (smem + spec.smem_reserved_per_block)), np.inf)
    by_threads = np.floor(spec.max_threads_per_sm / threads)
    by_blocks = np.full_like(by_threads, spec.max_blocks_per_sm)
    stack = np.stack(np.broadcast_arrays(by_regs, by_smem, by_threads, by_blocks))
    names = np.array(["registers", "smem", "threads", "blocks"])
    return stack.min(axis=0), names[stack.argmin(axis=0)]


def evaluate_kernel(ck: CompiledKernel, values: Mapping[str, object], spec: GpuSpec, rates: Rates,
                    plan: ExecutionPlan) -> dict[str, np.ndarray]:
    """Every term of the model for one kernel, vectorized over configurations."""
    v = ck.evaluate(values, np.broadcast_shapes(*(np.shape(x) for x in values.values())))
    threads = v["threads"] + plan.extra_threads
    k_inst = spec.mma_sync_shape[2] if plan.tensor_instruction == "mma_sync" or spec.wgmma is None else spec.wgmma.k
    data_regs = v["regs_raw"] + plan.fragment_buffers * k_inst * v["frag_per_thread"]
    if plan.register_operands:
        data_regs = data_regs + v["operand_regs"]
    squeeze = plan.reg_overhead if plan.min_reg_overhead is None else plan.min_reg_overhead
    # ptxas fills up to the cap before it spills: a kernel fits when its data plus the least overhead does
    fits_regs = data_regs + squeeze <= spec.regs_per_thread_max
    regs = _ceil_to(data_regs + plan.reg_overhead, 8)
    regs = np.where(fits_regs, np.minimum(regs, spec.regs_per_thread_max), regs)
    smem = v["smem_bytes"] + plan.sync_bytes_per_buffer * v["smem_buffers"] + plan.smem_slack_bytes
    blocks = v["blocks"]
    reasons = np.full(blocks.shape, "", dtype=object)
    reasons = np.where(smem > spec.smem_per_block, f"SMEM per block over {spec.smem_per_block} B", reasons)
    reasons = np.where((reasons == "") & (regs > spec.regs_per_thread_max),
                       f"registers per thread over {spec.regs_per_thread_max}", reasons)
    reasons = np.where((reasons == "") & (threads > spec.max_threads_per_block),
                       f"threads per block over {spec.max_threads_per_block}", reasons)
    if plan.extra_thread_regs is not None:
        # setmaxnreg code claims the whole register file for one block: producers drop to their count and
        # the tile-holding threads get the rest; ptxas reports the even split at entry
        budget = np.floor((spec.regs_per_sm - plan.extra_threads * plan.extra_thread_regs) / v["threads"] / 8) * 8
        budget = np.minimum(budget, spec.regs_per_thread_max + 1)
        reasons = np.where((reasons == "") & (regs > budget) & (regs <= spec.regs_per_thread_max),
                           "registers per consumer thread over the setmaxnreg budget", reasons)
        need = regs
        regs = np.floor(spec.regs_per_sm / threads / 8) * 8
        occ, occ_limit = occupancy(spec, threads, smem, regs)
    else:
        need = regs
        occ, occ_limit = occupancy(spec, threads, smem, np.minimum(regs, spec.regs_per_thread_max))
    reasons = np.where((reasons == "") & (occ < 1), "no block fits on an SM", reasons)
    occ = np.maximum(occ, 1)

    per_sm_blocks = np.ceil(blocks / spec.sm_count)        # the busiest SM
    share = per_sm_blocks / blocks                          # its fraction of the work
    t = {
        "tensor": v["work_tensor"] * share / rates.tensor,
        "fp32": v["work_fp32"] * share / rates.fp32,
        "exp": v["work_exp"] * share / rates.exp,
        "smem": v["smem_traffic"] * share / rates.smem,
    }
    warps_per_sched = np.minimum(occ, per_sm_blocks) * np.ceil(threads / 32) / spec.schedulers_per_sm
    compute_sum = t["tensor"] + t["fp32"] + t["exp"] + (0.0 if plan.tensor_reads_smem else t["smem"])
    compute_max = np.maximum.reduce([t["tensor"], t["fp32"], t["exp"], t["smem"]])
    if plan.overlap == "sync":
        # a warp's phases run in sequence; a second resident warp per scheduler fills part of the gaps
        hide = np.clip(1 + plan.interleave_slope * (warps_per_sched - 1), 1, plan.interleave_max)
        compute = np.maximum(compute_max, compute_sum / hide)
    else:
        # warp-specialized: loads overlap fully; consumer warpgroups hide each other's softmax behind their
        # matrix products, each one more unit of overlap, up to `interleave_max`
        units_per_sm = np.minimum(occ, per_sm_blocks) * v["units"]
        hide = np.clip(1 + plan.interleave_slope * (units_per_sm - 1), 1, plan.interleave_max)
        compute = np.maximum(compute_max, compute_sum / hide)
    steps_busiest = v["steps_total"] * share
    block_latency = plan.step_latency_cycles
    if plan.latency_hidden_by_stages:
        block_latency = block_latency / np.maximum(v["stages"] - 1, 1)
    latency = block_latency + plan.step_latency_cycles_per_warp * np.ceil(v["threads"] / 32)
    t["sync"] = steps_busiest * latency / rates.clock_hz / np.minimum(occ, per_sm_blocks)
    # a later pass re-reads from L2 only while everything the resident units touch in between fits in it
    resident_units = spec.sm_count * np.minimum(occ, per_sm_blocks) * v["units"]
    span = resident_units * v["reread_span"]
    hit = np.where(span > 0, np.clip(spec.l2_bytes / np.maximum(span, 1), 0, 1), 1.0)
    hbm_bytes = v["hbm_bytes"] + v["reread_bytes"] * (1 - hit)
    t["hbm"] = hbm_bytes / rates.hbm
    t["l2"] = v["global_bytes"] / rates.l2 if rates.l2 else np.zeros_like(t["hbm"])
    memory = np.maximum(t["hbm"], t["l2"])
    pipelined = (v["stages"] >= 2) | (np.minimum(occ, per_sm_blocks) >= 2)
    busy = compute + t["sync"]
    overlapped = np.maximum(busy, memory) + (1 - plan.memory_overlap) * np.minimum(busy, memory)
    body = np.where(pipelined, overlapped, busy + memory)
    t["launch"] = np.full(body.shape, spec.launch_overhead_s)
    total = body + t["launch"]
    candidates = {"tensor": t["tensor"], "fp32": t["fp32"], "exp": t["exp"], "smem": t["smem"],
                  "hbm": t["hbm"], "l2": t["l2"], "sync": t["sync"]}
    names = np.array(list(candidates))
    bott = names[np.stack(np.broadcast_arrays(*candidates.values())).argmax(axis=0)]
    return {"time_s": total, "terms": t, "compute_s": compute, "memory_s": memory, "occupancy": occ,
            "occupancy_limit": occ_limit, "regs": regs, "regs_needed": need, "smem_bytes": smem, "threads": threads, "blocks": blocks,
            "waves": np.ceil(blocks / (spec.sm_count * occ)), "bottleneck": bott, "infeasible": reasons,
            "work": {u: v[f"work_{u}"] for u in ("tensor", "fp32", "exp")}, "hbm_bytes": hbm_bytes,
            "global_bytes": v["global_bytes"]}


def compulsory_bytes(costs_diagram) -> sp.Expr:
    """Each input read once, each output written once: the HBM floor of one kernel."""
    return sp.Add(*[x.nbytes() for x in costs_diagram.inputs()]) + sp.Add(*[x.nbytes() for x in costs_diagram.output_arrays()])


@dataclass
class ProgramModel:
    """A derived program ready for fast evaluation on a spec."""
    costs: ProgramCosts
    kernels: list[CompiledKernel]
    plans: list[ExecutionPlan]

    def evaluate(self, values: Mapping[str, object], spec: GpuSpec, cal: Calibration | None) -> dict:
        per_kernel = []
        for ck, plan in zip(self.kernels, self.plans):
            per_kernel.append(evaluate_kernel(ck, values, spec, rates_for(spec, cal, plan), plan))
        total = sum(k["time_s"] for k in per_kernel)
        infeasible = per_kernel[0]["infeasible"]
        for k in per_kernel[1:]:
            infeasible = np.where(infeasible == "", k["infeasible"], infeasible)
        return {"time_s": total, "kernels": per_kernel, "infeasible": infeasible}


def build_model(program_costs: ProgramCosts, diagrams, plans) -> ProgramModel:
    cks = [CompiledKernel(kc, compulsory_bytes(d)) for kc, d in zip(program_costs.kernels, diagrams)]
    return ProgramModel(program_costs, cks, list(plans))
