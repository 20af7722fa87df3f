"""The datasheet facts of one GPU as a frozen dataclass, with the device-level rates they imply."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .facts import Fact, HardwareError

__all__ = ["WgmmaShape", "GpuSpec"]


@dataclass(frozen=True)
class WgmmaShape:
    """Hopper ``wgmma.mma_async`` shape: m64 nN k16, N a multiple of 8 up to 256."""

    m: int = 64
    k: int = 16
    n_multiple: int = 8
    n_max: int = 256

    def valid_n(self, n: int) -> bool:
        return 0 < n <= self.n_max and n % self.n_multiple == 0


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet facts of one GPU, in base units (bytes, Hz, bytes/s, FLOP/s, s).

    Per-SM rates are per clock; multiply by ``sm_count * clock_hz`` for a
    device rate (see the ``peak_*`` helpers).  ``facts`` keeps every number
    with its unit and source, keyed by field name (``group.dtype`` for the
    per-dtype tables).
    """

    key: str
    name: str
    arch: str
    compute_capability: tuple[int, int]
    aliases: tuple[str, ...]
    sm_count: int
    clock_hz: float
    hbm_bandwidth: float
    hbm_bytes: int
    l2_bytes: int
    smem_per_sm: int
    smem_per_block: int
    smem_reserved_per_block: int
    regs_per_sm: int
    regs_per_block: int
    regs_per_thread_max: int
    reg_alloc_unit: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    schedulers_per_sm: int
    # dicts cannot be hashed: a spec hashes by its scalar fields, so it can key caches
    tensor_flops_per_clk_per_sm: dict[str, float] = field(hash=False)
    fp32_fma_per_clk_per_sm: float
    exp2_per_clk_per_sm: float
    smem_bytes_per_clk_per_sm: float
    mma_sync_shape: tuple[int, int, int]
    wgmma: WgmmaShape | None
    launch_overhead_s: float
    facts: dict[str, Fact] = field(hash=False, repr=False, compare=False)
    path: Path | None = field(default=None, compare=False)

    # -- device-level rates ------------------------------------------------
    def peak_tensor_flops(self, dtype: str = "bf16") -> float:
        """Dense tensor-core FLOP/s for ``dtype`` at ``clock_hz`` (datasheet)."""
        try:
            per_clk = self.tensor_flops_per_clk_per_sm[dtype]
        except KeyError:
            known = ", ".join(sorted(self.tensor_flops_per_clk_per_sm))
            raise HardwareError(
                f"{self.key}: no tensor-core rate for dtype '{dtype}': known are {known}"
            ) from None
        return per_clk * self.sm_count * self.clock_hz

    @property
    def peak_exp2_per_s(self) -> float:
        """MUFU ``ex2`` operations per second over the whole device."""
        return self.exp2_per_clk_per_sm * self.sm_count * self.clock_hz

    @property
    def peak_fp32_flops(self) -> float:
        """FP32 FLOP/s counting an FMA as two FLOPs."""
        return 2.0 * self.fp32_fma_per_clk_per_sm * self.sm_count * self.clock_hz

    @property
    def peak_smem_bandwidth(self) -> float:
        """Shared-memory bytes/s summed over all SMs."""
        return self.smem_bytes_per_clk_per_sm * self.sm_count * self.clock_hz

    @property
    def max_warps_per_scheduler(self) -> int:
        return self.max_warps_per_sm // self.schedulers_per_sm

    def summary(self) -> str:
        """A few lines a person can read."""
        bf16 = self.tensor_flops_per_clk_per_sm.get("bf16")
        lines = [
            f"{self.name} ({self.key}, sm_{self.compute_capability[0]}{self.compute_capability[1]}, {self.arch})",
            f"  {self.sm_count} SMs at {self.clock_hz / 1e6:.0f} MHz; HBM {self.hbm_bandwidth / 1e12:.2f} TB/s, "
            f"{self.hbm_bytes / 2**30:.0f} GiB; L2 {self.l2_bytes / 2**20:.0f} MiB",
            f"  SMEM {self.smem_per_sm // 1024} KiB/SM, {self.smem_per_block // 1024} KiB/block; "
            f"{self.regs_per_sm} regs/SM; {self.max_warps_per_sm} warps/SM",
        ]
        if bf16:
            lines.append(
                f"  bf16 tensor {bf16:.0f} FLOP/clk/SM = {self.peak_tensor_flops('bf16') / 1e12:.1f} TFLOP/s; "
                f"exp2 {self.peak_exp2_per_s / 1e12:.2f} T/s; fp32 {self.peak_fp32_flops / 1e12:.1f} TFLOP/s"
            )
        return "\n".join(lines)
