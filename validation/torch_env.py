"""``TorchEnv``: the sweep's real device: torch tensors, the ``kernels`` package, the SDPA peers.

It implements the environment interface described in validation/fake_env.py.  torch is imported
when a TorchEnv is made, never at module import, so ``--help`` and dry runs work without it.
"""
from __future__ import annotations

from typing import Any, Callable

from iomodel import families as _registry
from iomodel.accuracy import OUR_KERNELS
from iomodel.boundary import UsageError

from .plan import SWEEP_KERNELS, KernelFamily
from .records import short_error

__all__ = ["TorchEnv"]


def _runner(run: Callable[..., Any], family: str) -> Callable[..., Any]:
    """``fn(config, q, k, v, causal, **features)`` calling ``kernels.run`` for one family (features: a
    window and score modifiers, ``validation.features``)."""
    return lambda cfg, q, k, v, causal=False, **feat: run(family, q, k, v, causal=causal, config=cfg, **feat)


class TorchEnv:
    """The real device: torch tensors, the ``kernels`` package, SDPA peers."""

    def __init__(self, *, min_repeats: int = 20, target_s: float = 0.12):
        import torch

        if not torch.cuda.is_available():  # the user's machine, not a bug: one line (iomodel.boundary)
            raise UsageError("no CUDA device visible to torch (use --dry-run to check the sweep on a CPU)")
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
        """The registry's shipped configs of every family, run through ``kernels.run``; the Hopper
        family only on sm_90 (its wgmma and TMA code is built for sm_90a)."""
        try:
            from kernels import run
        except Exception as exc:  # noqa: BLE001 - a broken kernels package skips our families, not the peers
            why = f"import kernels failed: {short_error(exc)}"
            return {name: KernelFamily(name, skip=why) for name in SWEEP_KERNELS}
        fams = {name: KernelFamily.shipped(name, _runner(run, name)) for name in SWEEP_KERNELS}
        from kernels.dispatch import runs_here

        major, minor = self.compute_capability
        for name in SWEEP_KERNELS:
            if not runs_here(name, (major, minor)):
                fams[name] = KernelFamily(name, skip=f"needs sm_90a; this device is sm_{major}{minor}")
        return fams

    def peers(self):
        from .peers import peer_runners

        return peer_runners(self.torch)

    def algorithms(self):
        """The algorithm peers (validation/algorithms.py): inputs, runners and checks on this device."""
        from .algo_torch import TorchAlgorithms

        return TorchAlgorithms(self.torch)

    def decode(self):
        """The decode rows (validation/decode.py): KV caches, our kernel and SDPA's, the read roof."""
        from .decode_torch import TorchDecode

        return TorchDecode(self.torch)

    def varlen(self):
        """The varlen rows (validation/varlen.py): packed inputs, our varlen and dense kernels, torch's varlen."""
        from .varlen_torch import TorchVarlen

        return TorchVarlen(self.torch)

    def make_inputs(self, shape, n_sets: int, seed: int):
        """``n_sets`` (q, k, v) of standard normal values, drawn in float32 then cast."""
        torch = self.torch
        g = torch.Generator(device="cuda")
        g.manual_seed(seed)
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[shape["dtype"]]
        B, H, Hk, Nq, Nk, d = (shape[k] for k in ("B", "H", "H_kv", "N_q", "N_k", "d"))

        def randn(*size):
            return torch.randn(size, generator=g, device="cuda", dtype=torch.float32).to(dt)

        return [(randn(B, H, Nq, d), randn(B, Hk, Nk, d), randn(B, Hk, Nk, d)) for _ in range(n_sets)]

    def reference(self, q, k, v, causal, features=None):
        """float32 attention, chunked over query rows so the scores stay under ~512 MiB; `features`: the
        shape's window and score modifiers (``features``)."""
        from .reference import attention_reference

        return attention_reference(q, k, v, causal, **(features or {}))[0]

    def features(self, shape) -> dict:
        """The shape's window and score modifiers as the kernels and the reference take them ({} without)."""
        from .features import feature_args

        return feature_args(self.torch, shape, "cuda")

    def check(self, out, ref) -> tuple[float, bool]:
        """(max |out - ref| / max |ref|, whether the output is all finite)."""
        from .reference import relative_error

        return relative_error(self.torch, out, ref)

    def memory_problem(self, kernel: str, shape) -> str | None:
        """Why the row cannot run in the free memory (what the family's kernel allocates for itself,
        e.g. the unfused kernel's N x N scores), or None."""
        fam = _registry.FAMILIES.get(kernel)   # peers are not families
        if fam is None or fam.workspace_bytes is None:
            return None
        free, _total = self.torch.cuda.mem_get_info()
        need = fam.workspace_bytes(shape)
        if need > 0.85 * free:
            return (f"skipped: the {kernel} kernel needs ~{need / 2**30:.1f} GiB of its own "
                    f"({free / 2**30:.1f} GiB free)")
        return None

    def checking(self, kernel: str):
        """For the correctness call of our kernels: the kernels' debug mode, which
        NaN-poisons the output first (unwritten tiles show up) and synchronizes
        after each launch (errors surface at their launch).  Off for timing."""
        from kernels.runtime import debugging

        return debugging(kernel in OUR_KERNELS)

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def release(self) -> None:
        self.torch.cuda.empty_cache()
