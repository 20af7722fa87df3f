"""What a kernel family's code does that its diagram does not say: the execution plan.

Kept apart from the model (`perf`) so that family modules, and the kernels that import their config
types, load without sympy.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ModelError

OVERLAP_MODES = ("sync", "warp-specialized")


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
    block_latency_cycles: float = 0.0      # per block: its prologue (first loads) and epilogue (stores) that
    #                                        no other work of the block overlaps (one block an SM: none at all)
    interleave_max: float = 2.0            # sync code: how far co-resident warps hide each other's phases
    interleave_slope: float = 1.0          # overlap gained per extra co-resident warp (sync) or warpgroup (ws)
    block_warp_overlap: float = 1.0        # sync: a warp of the same block on a scheduler as a share of one of another block
    memory_overlap: float = 1.0            # fraction of the shorter of compute and memory time hidden under the longer
    single_buffer_l2_overlap: float = 1.0  # one stage, one block an SM: the share of the L2 time hidden under the
    #                                        compute (a chunk's load overlaps only the other operands' products)
    fill_steps: float = 0.0                # stream steps per block that run without that overlap (pipeline fill)
    dtype: str = "bf16"
    # SMEM the code adds to the diagram's tiles: mbarriers of a TMA ring and alignment slack
    sync_bytes_per_buffer: int = 0         # mbarriers per staged buffer (full, and empty for a ring)
    smem_slack_bytes: int = 0              # alignment slack requested on top
    fragment_buffers: int = 0              # k-steps of SMEM operand fragments held in registers
    register_operands: bool = False        # on-chip operands held whole in registers (wgmma with A from registers)
    tensor_reads_smem: bool = False        # the tensor instruction reads its SMEM operands itself (wgmma): that
    #                                        traffic runs under the matrix product instead of as a phase of its own
    # a stream whose rows are gathered page by page (a paged KV cache): the symbols of the rows a step
    # loads and of the rows a page holds (its value 0: not paged), and the HBM latencies a block's loads
    # wait for each page its stream enters, one page after another (``perf.gather_time``; fitted)
    paged_rows: tuple[str, str] | None = None
    page_wait: float = 0.0
    # the tail split (``perf.tail_pieces``): the kernel may run each block of its grid's last partial wave
    # as up to this many pieces along its stream, each piece's accumulators combined by the last piece to
    # finish, so that the last wave fills the SMs; 1: never.  A piece costs the block's prologue and
    # epilogue again, counted as `tail_overhead_steps` stream steps when the kernel picks the count.  Only
    # where every block streams the same steps: without a mask (``api.family_model``)
    tail_pieces_max: int = 1
    tail_overhead_steps: float = 0.0

    def __post_init__(self):
        if self.overlap not in OVERLAP_MODES:
            raise ModelError(f"unknown overlap mode {self.overlap!r}; known: {', '.join(OVERLAP_MODES)}")
