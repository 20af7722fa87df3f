"""The performance model: derived costs x a GPU spec -> time, FLOP/s, bottleneck, every term.

Vectorized: every symbol of the costs may be a numpy array (one entry per configuration), so the
tile search evaluates thousands of configurations in one pass. The model (docs/performance-model.md):

* feasibility: SMEM per block, registers per thread, threads per block (what the kernel can build at
  all is the family's own check, before the model);
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

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import sympy as sp

from .derive import KernelCosts, ProgramCosts
from .hardware import Calibration, GpuSpec
from .errors import ModelError
from .plan import ExecutionPlan
from .symbolic import lambdify
from .traffic import hbm_bytes

WORK_UNITS = ("tensor", "fp32", "exp")     # the units derived work runs on
COMPUTE_TERMS = (*WORK_UNITS, "smem")


@dataclass
class Rates:
    """Per-SM rates (per second) the model uses."""
    tensor: float
    fp32: float
    exp: float
    smem: float
    hbm: float
    l2: float | None
    clock_hz: float
    hbm_latency: float | None = None   # s, measured (calibration); None: a small grid gets its SMs' share


def rates_for(spec: GpuSpec, cal: Calibration | None, plan: ExecutionPlan) -> Rates:
    """Datasheet rates, replaced by the calibration's measurements where it has them."""
    clock = cal.clock_hz if cal is not None and cal.clock_hz else spec.clock_hz
    dtype = plan.dtype if plan.dtype in spec.tensor_flops_per_clk_per_sm else "bf16"
    tensor_clk = spec.tensor_flops_per_clk_per_sm[dtype]   # dense
    if plan.tensor_instruction == "mma_sync" and spec.wgmma is not None:
        # Hopper runs mma.sync well below the wgmma datasheet rate: only a measurement says how far
        # (uncalibrated, the datasheet rate stays: optimistic)
        if cal is not None and cal.mma_sync_flops_per_clk_per_sm:
            tensor_clk = cal.mma_sync_flops_per_clk_per_sm
    elif plan.tensor_instruction == "wgmma" and spec.wgmma is None:
        raise ModelError(f"{spec.key} has no wgmma (it is {spec.arch}); use the mma_sync plan")
    elif cal is not None and cal.gemm_flops and plan.tensor_instruction == "wgmma":
        tensor_clk = min(tensor_clk, cal.gemm_flops / (spec.sm_count * clock))
    fma = cal.fp32_fma_per_clk_per_sm if cal is not None and cal.fp32_fma_per_clk_per_sm else spec.fp32_fma_per_clk_per_sm
    ex = cal.exp2_per_clk_per_sm if cal is not None and cal.exp2_per_clk_per_sm else spec.exp2_per_clk_per_sm
    hbm = cal.copy_bandwidth if cal is not None and cal.copy_bandwidth else spec.hbm_bandwidth
    # the L2's bandwidth: measured where the calibration has it, else the spec's estimate, if any
    l2 = getattr(cal, "l2_bandwidth", None) if cal is not None else None
    if not l2 and "l2_bandwidth" in spec.facts:
        l2 = spec.facts["l2_bandwidth"].value
    latency = getattr(cal, "hbm_latency_s", None) if cal is not None else None
    return Rates(tensor=tensor_clk * clock, fp32=fma * clock, exp=ex * clock,
                 smem=spec.smem_bytes_per_clk_per_sm * clock, hbm=hbm, l2=l2, clock_hz=clock, hbm_latency=latency)


class CompiledKernel:
    """Lambdified costs of one kernel: evaluate on arrays of symbol values."""

    def __init__(self, costs: KernelCosts):
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
            "hbm_bytes": costs.compulsory_bytes,
            "stages": costs.stream_stages,
            "smem_buffers": costs.smem_buffers,
            "frag_per_thread": costs.fragment_bytes_per_k / (4 * costs.unit_threads),
            "operand_regs": costs.register_operand_bytes / (4 * costs.unit_threads),
            "reread_bytes": costs.reread_bytes,
            "reread_span": costs.reread_span_per_unit,
            "runs": costs.runs,
        }
        for u in WORK_UNITS:
            exprs[f"work_{u}"] = costs.flops.get(u, sp.Integer(0))
        # the L2 reuse model's view (iomodel.traffic): each input's traffic and size, the grid's counts
        self.grid_keys = [f"grid:{a}" for a, _ in costs.grid]
        exprs.update({k: n for k, (_, n) in zip(self.grid_keys, costs.grid)})
        self.inputs = [(x, [a in axes for a, _ in costs.grid], costs.input_passes.get(x, 1))
                       for x, axes in costs.input_axes.items()]
        self.accumulated = set(costs.accumulated)
        for x, _, _ in self.inputs:
            exprs[f"in_traffic:{x}"] = costs.input_traffic(x)
            exprs[f"in_once:{x}"] = costs.input_nbytes[x]
        self.names, self.keys, self.fn = lambdify(exprs)

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


def _first_reason(reasons, broken, why: str):
    """Record `why` where `broken` and no earlier reason was found."""
    return np.where((reasons == "") & broken, why, reasons)


def _registers(v: Mapping[str, np.ndarray], spec: GpuSpec, plan: ExecutionPlan) -> np.ndarray:
    """Registers per thread ptxas allocates: the resident data, operand fragments and the plan's overhead."""
    k_inst = spec.mma_sync_shape[2] if plan.tensor_instruction == "mma_sync" or spec.wgmma is None else spec.wgmma.k
    data_regs = v["regs_raw"] + plan.fragment_buffers * k_inst * v["frag_per_thread"]
    if plan.register_operands:
        data_regs = data_regs + v["operand_regs"]
    squeeze = plan.reg_overhead if plan.min_reg_overhead is None else plan.min_reg_overhead
    # ptxas fills up to the cap before it spills: a kernel fits when its data plus the least overhead does
    fits_regs = data_regs + squeeze <= spec.regs_per_thread_max
    regs = _ceil_to(data_regs + plan.reg_overhead, 8)
    return np.where(fits_regs, np.minimum(regs, spec.regs_per_thread_max), regs)


SPILL_MAX_FRACTION = 0.25   # ptxas spills up to a quarter of the cap; a config past that is not built


def _spilled(need, spec: GpuSpec, plan: ExecutionPlan) -> np.ndarray:
    """Registers per thread that spill to local memory: what the data needs past the cap, when ptxas
    would still build it (at most SPILL_MAX_FRACTION of the cap; setmaxnreg code cannot spill, its
    budget is checked in `_fit`). Past that, nothing spills and the config is refused."""
    if plan.extra_thread_regs is not None:
        return np.zeros_like(need)
    over = need - spec.regs_per_thread_max
    return np.where((over > 0) & (over <= SPILL_MAX_FRACTION * spec.regs_per_thread_max), over, 0.0)


def _fit(v: Mapping[str, np.ndarray], spec: GpuSpec, plan: ExecutionPlan, threads, regs, smem):
    """Why each configuration does not fit ("" where it does), the registers per thread it runs with,
    its resident blocks per SM (at least 1) and what limits them."""
    reasons = np.full(v["blocks"].shape, "", dtype=object)
    reasons = _first_reason(reasons, smem > spec.smem_per_block, f"SMEM per block over {spec.smem_per_block} B")
    reasons = _first_reason(reasons, regs > spec.regs_per_thread_max, f"registers per thread over {spec.regs_per_thread_max}")
    reasons = _first_reason(reasons, threads > spec.max_threads_per_block,
                            f"threads per block over {spec.max_threads_per_block}")
    if plan.extra_thread_regs is not None:
        # setmaxnreg code claims the whole register file for one block: producers drop to their count and
        # the tile-holding threads get the rest; ptxas reports the even split at entry
        budget = np.floor((spec.regs_per_sm - plan.extra_threads * plan.extra_thread_regs) / v["threads"] / 8) * 8
        budget = np.minimum(budget, spec.regs_per_thread_max + 1)
        reasons = _first_reason(reasons, (regs > budget) & (regs <= spec.regs_per_thread_max),
                                "registers per consumer thread over the setmaxnreg budget")
        regs = np.floor(spec.regs_per_sm / threads / 8) * 8
        occ, occ_limit = occupancy(spec, threads, smem, regs)
    else:
        occ, occ_limit = occupancy(spec, threads, smem, np.minimum(regs, spec.regs_per_thread_max))
    reasons = _first_reason(reasons, occ < 1, "no block fits on an SM")
    return reasons, regs, np.maximum(occ, 1), occ_limit


def _compute_time(t: Mapping[str, np.ndarray], v: Mapping[str, np.ndarray], spec: GpuSpec, plan: ExecutionPlan,
                  threads, resident) -> np.ndarray:
    """Time of the busiest SM's compute units: between their max (fully overlapped) and their sum."""
    compute_sum = t["tensor"] + t["fp32"] + t["exp"] + (0.0 if plan.tensor_reads_smem else t["smem"])
    compute_max = np.maximum.reduce([t[u] for u in COMPUTE_TERMS])
    if plan.overlap == "sync":
        # phases in sequence; warps on a scheduler fill part of the gaps, of its own block (same barriers) less
        w = np.ceil(threads / 32) / spec.schedulers_per_sm
        peers = resident * (np.minimum(w, 1) + np.maximum(w - 1, 0) * plan.block_warp_overlap)
    else:
        # warp-specialized: loads overlap fully; consumer warpgroups hide each other's non-tensor work
        # behind their matrix products, each one more unit of overlap
        peers = resident * v["units"]
    hide = np.clip(1 + plan.interleave_slope * (peers - 1), 1, plan.interleave_max)
    # the first steps of each block's stream (its first chunk: nothing yet to overlap with) run unhidden
    fill = np.clip(plan.fill_steps * v["blocks"] / np.maximum(v["steps_total"], 1), 0, 1)
    return np.maximum(compute_max, compute_sum * (fill + (1 - fill) / hide))


#: a tail piece streams at least this many steps (shorter ones would be mostly prologue and epilogue)
TAIL_MIN_PIECE_STEPS = 4


def tail_pieces(blocks, concurrent, steps, overhead_steps: float, max_pieces: int):
    """The tail split of a grid of `blocks` equal blocks, `concurrent` at a time, each streaming `steps`
    steps: the pieces P (1 to `max_pieces`) each block of the last partial wave runs as, chosen for the
    shortest tail: its R = blocks mod concurrent blocks make R P pieces of 1/P of a block, which take
    ceil(R P / concurrent) rounds, each piece also paying `overhead_steps` (its prologue, epilogue and
    combine); pieces of fewer than TAIL_MIN_PIECE_STEPS steps are not made, and a split must save more than
    one piece's overhead (of a block) over none, the margin of that overhead's estimate.  Returns (P, the busiest
    SM's work in blocks, the blocks and pieces it starts); scalars or numpy arrays alike.  The kernel's
    launcher takes P from here, so the model and the kernel agree."""
    blocks, steps = np.asarray(blocks, dtype=np.float64), np.asarray(steps, dtype=np.float64)
    concurrent = np.asarray(concurrent, dtype=np.float64)
    rem = np.mod(blocks, concurrent)
    whole = (blocks - rem) / concurrent                    # full waves before the tail
    best_p, best_cost = np.ones_like(blocks + steps + concurrent), np.where(rem > 0, 1.0, 0.0)
    best_rounds = np.where(rem > 0, 1.0, 0.0)
    overhead = overhead_steps / np.maximum(steps, 1)       # a piece's, in blocks
    for p in range(2, max(int(max_pieces), 1) + 1):
        rounds = np.ceil(rem * p / concurrent)
        cost = rounds * (1.0 / p + overhead)
        better = (rem > 0) & (steps >= p * TAIL_MIN_PIECE_STEPS) & (cost < best_cost - 1e-9) & (cost < 1.0 - overhead)
        best_p = np.where(better, p, best_p)
        best_cost = np.where(better, cost, best_cost)
        best_rounds = np.where(better, rounds, best_rounds)
    work = whole + best_rounds / best_p
    starts = whole + best_rounds
    if np.ndim(work) == 0:
        return int(best_p), float(work), float(starts)
    return best_p, work, starts


def _sync_time(v: Mapping[str, np.ndarray], plan: ExecutionPlan, rates: Rates, share, resident,
               starts) -> np.ndarray:
    """The fixed synchronization latency of every stream step of the busiest SM, and of every block's
    (or tail piece's) prologue and epilogue (``block_latency_cycles``) on it: `starts` of them."""
    steps_busiest = v["steps_total"] * share
    block_latency = plan.step_latency_cycles
    if plan.latency_hidden_by_stages:
        block_latency = block_latency / np.maximum(v["stages"] - 1, 1)
    latency = block_latency + plan.step_latency_cycles_per_warp * np.ceil(v["threads"] / 32)
    ends = starts * plan.block_latency_cycles
    return (steps_busiest * latency + ends) / rates.clock_hz / resident


def _hbm_bytes(ck: "CompiledKernel", v: Mapping[str, np.ndarray], spec: GpuSpec, occ, resident) -> np.ndarray:
    """HBM bytes: the inputs' reads the L2 does not serve (iomodel.traffic), every other global byte
    (outputs, partials, read-modify-write), and the re-reads of later passes that miss L2."""
    concurrent = spec.sm_count * occ
    reads, others = hbm_bytes(v, ck.inputs, ck.grid_keys, concurrent, spec.l2_bytes, ck.accumulated)
    # a later pass re-reads from L2 only while everything the resident units touch in between fits in it
    span = spec.sm_count * resident * v["units"] * v["reread_span"]
    hit = np.where(span > 0, np.clip(spec.l2_bytes / np.maximum(span, 1), 0, 1), 1.0)
    return reads + others + v["reread_bytes"] * (1 - hit)


#: how sharply a read's bandwidth turns from latency-bound to the roof (``hbm_share``): fitted to the H100's
#: read at 0.03 to 16.5 MiB in flight (validation/results/profile-decode-h100-2026-11-24/inflight.json:
#: within 4% at every point, with the calibration's copy bandwidth and latency)
KNEE = 3.0


def pages_per_step(values: Mapping[str, object], plan: ExecutionPlan) -> np.ndarray | float:
    """The pages a stream step of a paged gather enters (``plan.paged_rows``): rows a step / rows a page
    (a quarter where a page holds four steps); 0 where the plan gathers nothing or the page size is 0 (a
    contiguous cache)."""
    if plan.paged_rows is None:
        return 0.0
    step, page = (np.asarray(values.get(name, 0.0), dtype=np.float64) for name in plan.paged_rows)
    return np.where(page > 0, step / np.maximum(page, 1.0), 0.0)


def gather_time(v: Mapping[str, np.ndarray], plan: ExecutionPlan, rates: Rates, share, resident,
                pages) -> np.ndarray | float:
    """The page walks of a paged gather on the busiest SM: each page a block's stream enters holds that
    block's loads for ``plan.page_wait`` HBM latencies, one page after another within a block (blocks
    resident together overlap theirs).  A floor under the stream's HBM time: with few blocks and small
    pages it, not the bytes in flight, sets the pace."""
    if not rates.hbm_latency or not plan.page_wait:
        return 0.0
    return v["steps_total"] * share * pages * plan.page_wait * rates.hbm_latency / resident


def hbm_share(v: Mapping[str, np.ndarray], spec: GpuSpec, rates: Rates, occ) -> np.ndarray:
    """The share of the HBM bandwidth a grid draws.  With a measured latency, Little's law: the blocks
    running at once keep (stages - 1) stream steps of loads in flight each (one without a pipeline), a
    step's bytes its share of the global traffic, each step's loads waiting the latency; x = bytes in
    flight / (bandwidth x latency) turns into a share x / (1 + x^k)^(1/k), linear while latency-bound,
    1 once busy.  Without one, a grid smaller than the chip gets its SMs' share."""
    blocks = v["blocks"]
    if not rates.hbm_latency:
        return np.minimum(blocks, spec.sm_count) / spec.sm_count
    running = np.minimum(blocks, spec.sm_count * occ)
    step_bytes = v["global_bytes"] / np.maximum(np.maximum(v["steps_total"], blocks), 1)
    in_flight = running * np.maximum(v["stages"] - 1, 1) * step_bytes
    x = in_flight / (rates.hbm * rates.hbm_latency)
    return np.clip(x / (1 + x ** KNEE) ** (1 / KNEE), 1e-6, 1.0)


def _body_time(busy, hbm, l2, stages, resident, plan: ExecutionPlan) -> np.ndarray:
    """Compute (with sync) and memory time combined: overlapped when the stream is pipelined or several
    blocks share an SM; otherwise the HBM time adds to the compute (the next chunk's load waits for
    it), and of the L2 time the share a chunk's load overlaps (the other operands' products: a plan's
    ``single_buffer_l2_overlap``) hides, the rest adds too, the L2 still bounding the whole."""
    memory, pipelined = np.maximum(hbm, l2), (stages >= 2) | (resident >= 2)
    overlapped = np.maximum(busy, memory) + (1 - plan.memory_overlap) * np.minimum(busy, memory)
    single = np.maximum(busy + hbm + (1 - plan.single_buffer_l2_overlap) * l2, l2)
    return np.where(pipelined, overlapped, single)


def evaluate_kernel(ck: CompiledKernel, values: Mapping[str, object], spec: GpuSpec, rates: Rates,
                    plan: ExecutionPlan) -> dict[str, np.ndarray]:
    """Every term of the model for one kernel, vectorized over configurations."""
    v = ck.evaluate(values, np.broadcast_shapes(*(np.shape(x) for x in values.values())))
    threads = v["threads"] + plan.extra_threads
    need = _registers(v, spec, plan)
    spill = _spilled(need, spec, plan)
    smem = v["smem_bytes"] + plan.sync_bytes_per_buffer * v["smem_buffers"] + plan.smem_slack_bytes
    blocks = v["blocks"]
    reasons, regs, occ, occ_limit = _fit(v, spec, plan, threads, need - spill, smem)

    per_sm_blocks = np.ceil(blocks / spec.sm_count)        # the busiest SM
    starts = per_sm_blocks                                  # the blocks (or tail pieces) it starts
    waves = np.ceil(blocks / (spec.sm_count * occ))
    if plan.tail_pieces_max > 1:   # the last wave's blocks split along their stream
        steps = v["steps_total"] / np.maximum(blocks, 1)
        slots = np.maximum(occ, 1)
        pieces, waves, _ = tail_pieces(blocks, spec.sm_count * slots, steps, plan.tail_overhead_steps,
                                       plan.tail_pieces_max)
        # the busiest SM: its whole waves' blocks, then its share of the last wave's pieces, spread over the SMs
        # as the blocks of a partial wave are (the plain count where there is no split)
        whole = np.floor(blocks / (spec.sm_count * slots)) * slots
        tail_starts = np.ceil((blocks - whole * spec.sm_count) * pieces / spec.sm_count)
        split = pieces > 1
        per_sm_blocks = np.where(split, whole + tail_starts / pieces, per_sm_blocks)
        starts = np.where(split, whole + tail_starts, starts)
    share = per_sm_blocks / blocks                          # its fraction of the work
    resident = np.minimum(occ, np.ceil(per_sm_blocks))      # blocks of the busiest SM running at once
    t = {u: v[f"work_{u}"] * share / getattr(rates, u) for u in WORK_UNITS}
    # spilled registers go to local memory through L1 (the SMEM's bandwidth): stored and reloaded by
    # every thread once per stream step
    spill_bytes = spill * 4 * 2 * v["threads"] * np.maximum(v["steps_total"], v["blocks"])
    t["smem"] = (v["smem_traffic"] + spill_bytes) * share / rates.smem
    compute = _compute_time(t, v, spec, plan, threads, resident)
    t["sync"] = _sync_time(v, plan, rates, share, resident, starts)
    hbm = _hbm_bytes(ck, v, spec, occ, resident)
    t["hbm"] = np.maximum(hbm / (rates.hbm * hbm_share(v, spec, rates, occ)),
                          gather_time(v, plan, rates, share, resident, pages_per_step(values, plan)))
    t["l2"] = v["global_bytes"] / rates.l2 if rates.l2 else np.zeros_like(t["hbm"])
    memory = np.maximum(t["hbm"], t["l2"])
    body = _body_time(compute + t["sync"], t["hbm"], t["l2"], v["stages"], resident, plan)
    names = np.array([*COMPUTE_TERMS, "hbm", "l2", "sync"])
    bott = names[np.stack(np.broadcast_arrays(*(t[k] for k in names))).argmax(axis=0)]
    t["launch"] = np.full(body.shape, spec.launch_overhead_s)
    # a kernel its program skips for these sizes (a combine kernel after a single part) costs nothing
    runs = v["runs"]
    total = (body + t["launch"]) * runs
    t = {k: x * runs for k, x in t.items()}
    reasons = np.where(runs > 0, reasons, "")
    return {"time_s": total, "terms": t, "compute_s": compute * runs, "memory_s": memory * runs, "occupancy": occ,
            "occupancy_limit": occ_limit, "regs": regs, "regs_needed": need, "spilled_regs": spill,
            "smem_bytes": smem, "threads": threads, "blocks": blocks * runs,
            "waves": waves * runs, "bottleneck": bott, "infeasible": reasons,
            "work": {u: v[f"work_{u}"] * runs for u in WORK_UNITS}, "hbm_bytes": hbm * runs,
            "global_bytes": v["global_bytes"] * runs}


@dataclass
class ProgramModel:
    """A derived program ready for fast evaluation on a spec."""
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


def build_model(program_costs: ProgramCosts, plans) -> ProgramModel:
    return ProgramModel([CompiledKernel(kc) for kc in program_costs.kernels], list(plans))
