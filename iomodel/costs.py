"""What the derivation returns: transfers across memory boundaries, residents of each level, and the
costs of a kernel and of a program (the model, the pseudocode and the reports read these)."""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp


@dataclass
class Transfer:
    array: str
    boundary: str            # global->smem, smem->reg, global->reg, reg->global or smem->global
    tile_elements: sp.Expr   # one tile, as moved by one unit
    count: sp.Expr           # how many times such a tile moves (units x loop trips)
    itemsize: int

    @property
    def elements(self) -> sp.Expr:
        return self.tile_elements * self.count

    @property
    def nbytes(self) -> sp.Expr:
        return self.elements * self.itemsize


@dataclass
class Resident:
    array: str
    level: str
    tile_elements: sp.Expr   # per unit of the level (block for smem, warp/warpgroup for reg)
    copies: sp.Expr          # pipeline stages
    itemsize: int
    staged_input: bool = False  # an input brought in from global memory
    # SMEM liveness: "all" (the whole kernel), "stream" (an input streamed through the block-level loops: its
    # ring is free once they end) or "after" (made after the streams end: it can take the ring's place)
    phase: str = "all"

    @property
    def elements(self) -> sp.Expr:
        return self.tile_elements * self.copies

    @property
    def nbytes(self) -> sp.Expr:
        return self.elements * self.itemsize


@dataclass
class KernelCosts:
    name: str
    blocks: sp.Expr
    units_per_block: sp.Expr      # register-level units (warps or warpgroups) in a block
    unit_threads: int
    threads_per_block: sp.Expr
    steps_total: sp.Expr          # sum over blocks of the innermost block-level stream steps
    flops: dict[str, sp.Expr]     # unit -> operations over the whole kernel
    transfers: list[Transfer]
    residents: list[Resident]
    stream_stages: sp.Expr
    compulsory_bytes: sp.Expr     # each input read once, each output written once: the HBM floor
    fragment_bytes_per_k: sp.Expr    # operand bytes per unit of contracted extent, per unit
    register_operand_bytes: sp.Expr  # per unit: on-chip operands produced in registers
    reread_bytes: sp.Expr            # global bytes read again by later passes of multi-pass ops
    reread_span_per_unit: sp.Expr    # bytes one unit touches between a read and its re-read
    runs: sp.Expr = sp.Integer(1)    # times the kernel runs in its program (0 where the program skips it)
    # the grid and what each input carries of it, for the L2 reuse model (iomodel.traffic)
    grid: list[tuple[str, sp.Expr]] = field(default_factory=list)   # block-level groups, outermost first
    input_axes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    input_nbytes: dict[str, sp.Expr] = field(default_factory=dict)  # each input once (its compulsory bytes)
    input_passes: dict[str, int] = field(default_factory=dict)      # reads of multi-pass consumers
    accumulated: tuple[str, ...] = ()   # outputs added with atomics: their reads and writes meet in L2

    def input_traffic(self, name: str) -> sp.Expr:
        """Global bytes fetched for input `name`, every pass (what the L2 serves)."""
        return sp.Add(*[t.nbytes for t in self.transfers if t.array == name and t.boundary.startswith("global->")])

    def _moved(self, where: str, attr: str) -> sp.Expr:
        """Sum of `attr` over the transfers across boundary `where`, or touching level `where`."""
        return sp.Add(*[getattr(t, attr) for t in self.transfers
                        if where == t.boundary or where in t.boundary.split("->")])

    def _held(self, level: str, attr: str) -> sp.Expr:
        """What the residents of `level` hold at their peak: those held all along, plus the larger of the
        streamed inputs' ring and what is made after the streams end (it reuses the ring's SMEM)."""
        held = [r for r in self.residents if r.level == level]
        total = sp.Add(*[getattr(r, attr) for r in held if r.phase == "all"])
        ring = sp.Add(*[getattr(r, attr) for r in held if r.phase == "stream"])
        after = [getattr(r, attr) for r in held if r.phase == "after"]
        return total + (sp.Max(ring, sp.Add(*after)) if after else ring)

    def bytes_at(self, boundary: str) -> sp.Expr:
        return self._moved(boundary, "nbytes")

    def elements_at(self, boundary: str) -> sp.Expr:
        return self._moved(boundary, "elements")

    @property
    def global_bytes(self) -> sp.Expr:
        """Bytes read from or written to global memory."""
        return self._moved("global", "nbytes")

    @property
    def global_elements(self) -> sp.Expr:
        return self._moved("global", "elements")

    @property
    def smem_bytes(self) -> sp.Expr:
        """SMEM footprint of one block."""
        return self._held("smem", "nbytes")

    @property
    def smem_elements(self) -> sp.Expr:
        return self._held("smem", "elements")

    @property
    def smem_buffers(self) -> sp.Expr:
        """SMEM tile buffers (counting pipeline copies) of staged inputs: each needs a 'full' signal."""
        return sp.Add(*[r.copies for r in self.residents if r.level == "smem" and r.staged_input])

    @property
    def smem_traffic_bytes(self) -> sp.Expr:
        """Bytes written into and read out of SMEM (for the SMEM bandwidth term)."""
        return self._moved("smem", "nbytes")

    @property
    def regs_per_thread(self) -> sp.Expr:
        """32-bit registers per thread for the resident tiles (no addressing or loop overhead)."""
        return self._held("reg", "nbytes") / (4 * self.unit_threads)


@dataclass
class ProgramCosts:
    name: str
    kernels: list[KernelCosts] = field(default_factory=list)

    @property
    def global_bytes(self) -> sp.Expr:
        return sp.Add(*[k.global_bytes for k in self.kernels])

    @property
    def global_elements(self) -> sp.Expr:
        return sp.Add(*[k.global_elements for k in self.kernels])
