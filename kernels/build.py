"""Sources of the CUDA kernels, and an offline nvcc build that reports resources.

Two consumers:

* the run-time paths (``kernels.flash_sm80`` / ``kernels.unfused`` through CuPy,
  ``kernels.sm90`` through its own NVRTC call) take ``kernel_source(...)`` /
  ``inline_includes(...)``: the source with local ``#include "..."`` lines
  inlined, so that a compile cache keyed on the source text can never serve a
  module built from stale headers;
* ``resource_report(arch)`` writes one ``.cu`` file that explicitly
  instantiates every shipped configuration, compiles it with
  ``nvcc -cubin -gencode=arch=compute_XX,code=sm_XX -Xptxas -v`` (one nvcc call
  per architecture, ``run_nvcc``; ``kernels.sm90`` uses the same driver and
  ``parse_ptxas``) and parses registers, spills and static shared memory per
  kernel from ptxas' report.  ptxas reports static shared memory only; the
  kernels use dynamic shared memory exclusively, whose size is
  ``config.smem_bytes(elem_bytes)`` (see ``kernels.configs``).

Run ``python -m kernels.build [sm_80|sm_90a ...]`` for a table.
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .configs import SHIPPED_FLASH, SHIPPED_MATMUL, SOFTMAX_SMEM_BYTES, FlashConfig, MatmulConfig

__all__ = [
    "CSRC",
    "ARCHS",
    "CompileError",
    "kernel_source",
    "inline_includes",
    "instantiation_unit",
    "gencode",
    "run_nvcc",
    "compile_report",
    "resource_report",
    "parse_ptxas",
]

CSRC = Path(__file__).resolve().parent / "csrc"
#: architectures every shipped configuration is built for
ARCHS: tuple[str, ...] = ("sm_80", "sm_90a")

_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)

# Parameter lists of the kernels, for explicit instantiation (must match the headers).
_FLASH_PARAMS = ("const {T}*, const {T}*, const {T}*, {T}*, float*, "
                 + "long long, " * 12 + "int, int, int, int, float, float")
_MATMUL_PARAMS = ("const {T}*, const {T}*, void*, int, int, int, int, "
                  + "long long, " * 9 + "int, int, float")
_SOFTMAX_PARAMS = "const float*, {T}*, long long, int, int, int, int, int"

FLASH_DTYPES = ("bf16", "fp16")


class CompileError(RuntimeError):
    """The compiler rejected the source (the message holds its log)."""


def inline_includes(text: str) -> str:
    """`text` with each local ``#include "..."`` replaced by that file of csrc/, recursively
    (each file once)."""
    seen: set[str] = set()

    def include(name: str) -> str:
        if name in seen:
            return ""
        seen.add(name)
        return expand((CSRC / name).read_text())

    def expand(src: str) -> str:
        return _INCLUDE_RE.sub(lambda m: include(m.group(1)), src)

    return expand(text)


def kernel_source(header: str) -> str:
    """Text of ``csrc/<header>`` with local includes inlined (each file once)."""
    return inline_includes(f'#include "{header}"')


def _flash_variants(configs=None):
    for cfg in (SHIPPED_FLASH if configs is None else configs):
        for dtype in FLASH_DTYPES:
            for causal in (False, True):
                yield cfg, dtype, causal


def _matmul_variants(configs=None):
    for cfg in (SHIPPED_MATMUL if configs is None else configs):
        for dtype in FLASH_DTYPES:
            yield cfg, dtype, True, True     # S = scale * Q K^T  (fp32 out)
            yield cfg, dtype, False, False   # O = P V            (elem out)


def instantiation_unit(flash_configs=None, matmul_configs=None) -> str:
    """A .cu translation unit that explicitly instantiates every variant."""
    lines = ['#include "flash_fwd_sm80.cuh"', '#include "unfused.cuh"', ""]
    for cfg, dtype, causal in _flash_variants(flash_configs):
        t = f"iom::{dtype}"
        lines.append(f"template __global__ void iom::flash_fwd_kernel<{cfg.template_args(dtype, causal)}>"
                     f"({_FLASH_PARAMS.format(T=t)});")
    for cfg, dtype, kmajor, f32 in _matmul_variants(matmul_configs):
        t = f"iom::{dtype}"
        lines.append(f"template __global__ void iom::matmul_kernel<{cfg.template_args(dtype, kmajor, f32)}>"
                     f"({_MATMUL_PARAMS.format(T=t)});")
    for dtype in FLASH_DTYPES:
        t = f"iom::{dtype}"
        lines.append(f"template __global__ void iom::softmax_rows_kernel<{t}>({_SOFTMAX_PARAMS.format(T=t)});")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# ptxas report parsing
# ---------------------------------------------------------------------------

_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_SPILL_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")


def parse_ptxas(text: str) -> dict[str, dict]:
    """Map mangled kernel name -> {registers, spill_stores, spill_loads, stack, static_smem}."""
    out: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        m = _ENTRY_RE.search(line) or _PROPS_RE.search(line)
        if m:
            current = m.group(1)
            out.setdefault(current, {"registers": None, "spill_stores": 0, "spill_loads": 0,
                                     "stack": 0, "static_smem": 0,
                                     "arch": m.group(2) if m.re is _ENTRY_RE else None})
            continue
        if current is None:
            continue
        m = _SPILL_RE.search(line)
        if m:
            rec = out[current]
            rec["stack"], rec["spill_stores"], rec["spill_loads"] = map(int, m.groups())
            continue
        m = _USED_RE.search(line)
        if m:
            rec = out[current]
            rec["registers"] = int(m.group(1))
            s = _SMEM_RE.search(line)
            rec["static_smem"] = int(s.group(1)) if s else 0
    return out


_TARG_RE = re.compile(r"L([ib])(\d+)E")


def demangle(name: str) -> tuple[str, dict] | None:
    """Map a mangled kernel name back to (kind, description) or None if unknown.

    Handles exactly the instantiations of this package: the template arguments
    are ``iom::bf16|fp16`` followed by integer and bool literals (``Li128E``,
    ``Lb1E``) in declaration order.
    """
    for kind, tag in (("flash_fwd", "16flash_fwd_kernel"), ("matmul", "13matmul_kernel"),
                      ("softmax", "19softmax_rows_kernel")):
        if tag in name:
            break
    else:
        return None
    targs = name.split(tag, 1)[1]
    dtype = "bf16" if "4bf16" in targs else ("fp16" if "4fp16" in targs else None)
    ints = [int(v) for _, v in _TARG_RE.findall(targs.split("EEv", 1)[0] + "E")]
    if kind == "flash_fwd":
        bm, bn, w, st, d, causal = ints[:6]
        return kind, {"config": FlashConfig(bm, bn, w, st, d), "dtype": dtype, "causal": bool(causal)}
    if kind == "matmul":
        bm, bn, bk, w, st, kmaj, f32 = ints[:7]
        return kind, {"config": MatmulConfig(bm, bn, bk, w, st), "dtype": dtype,
                      "b_kmajor": bool(kmaj), "out_f32": bool(f32)}
    return kind, {"config": None, "dtype": dtype}


# ---------------------------------------------------------------------------
# nvcc driver
# ---------------------------------------------------------------------------

def gencode(arch: str) -> str:
    """nvcc's option that builds SASS for `arch` (``sm_80``, ``sm_90a``)."""
    num = arch.removeprefix("sm_")
    return f"-gencode=arch=compute_{num},code=sm_{num}"


def run_nvcc(source: str, arch: str, out_dir: str | Path, stem: str, flags: tuple[str, ...] = (), *,
             nvcc: str = "nvcc") -> tuple[Path, str]:
    """Write `source` to ``out_dir/<stem>.cu`` and compile it with nvcc (C++17, csrc/ on the include
    path) to ``out_dir/<stem>.cubin`` for `arch`.  Returns (cubin path, nvcc's stdout + stderr);
    raises CompileError with that output if nvcc fails, RuntimeError if there is no nvcc."""
    exe = shutil.which(nvcc)
    if exe is None:
        raise RuntimeError(f"{nvcc} not found on PATH")
    cu = Path(out_dir) / f"{stem}.cu"
    cubin = Path(out_dir) / f"{stem}.cubin"
    cu.write_text(source)
    cmd = [exe, "-std=c++17", "-cubin", gencode(arch), f"-I{CSRC}", *flags, "-o", str(cubin), str(cu)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise CompileError(f"nvcc failed for {stem} ({' '.join(cmd)}):\n{log}")
    return cubin, log


def compile_report(arch: str, flash_configs=None, matmul_configs=None, *, nvcc: str = "nvcc",
                   extra_flags: tuple[str, ...] = ()) -> str:
    """Compile the instantiation unit for one arch; return ptxas' verbose report."""
    with tempfile.TemporaryDirectory(prefix="iom_build_") as tmp:
        return run_nvcc(instantiation_unit(flash_configs, matmul_configs), arch, tmp, "iom_kernels",
                        ("-Xptxas", "-v", *extra_flags), nvcc=nvcc)[1]


@functools.lru_cache(maxsize=None)
def resource_report(arch: str = "sm_80") -> list[dict]:
    """Per-kernel resources of every shipped configuration for ``arch``.

    Returns a list of dicts with keys ``kind`` ('flash_fwd', 'matmul',
    'softmax'), ``config`` (FlashConfig / MatmulConfig / None), ``dtype``,
    ``causal`` (flash) or ``b_kmajor``/``out_f32`` (matmul), ``registers``,
    ``spill_stores``, ``spill_loads``, ``stack``, ``static_smem`` (bytes, from
    ptxas) and ``dynamic_smem`` (bytes, from the config formula), ``arch``.
    """
    text = compile_report(arch)
    rows = []
    for name, rec in parse_ptxas(text).items():
        dm = demangle(name)
        if dm is None:
            continue
        kind, desc = dm
        cfg = desc["config"]
        dyn = cfg.smem_bytes(2) if cfg is not None else SOFTMAX_SMEM_BYTES
        rows.append({"kind": kind, **desc, "registers": rec["registers"],
                     "spill_stores": rec["spill_stores"], "spill_loads": rec["spill_loads"],
                     "stack": rec["stack"], "static_smem": rec["static_smem"],
                     "dynamic_smem": dyn, "arch": arch, "mangled": name})
    order = {"flash_fwd": 0, "matmul": 1, "softmax": 2}
    rows.sort(key=lambda r: (order[r["kind"]], str(r["config"]), r["dtype"] or "",
                             r.get("causal", False), r.get("b_kmajor", False)))
    return rows


def _main(argv: list[str]) -> int:
    archs = argv or list(ARCHS)
    for arch in archs:
        print(f"== {arch}")
        for r in resource_report(arch):
            cfg = r["config"].short() if r["config"] is not None else "-"
            extra = (f"causal={int(r['causal'])}" if r["kind"] == "flash_fwd" else
                     (f"kmajor={int(r['b_kmajor'])} f32={int(r['out_f32'])}" if r["kind"] == "matmul" else ""))
            print(f"{r['kind']:9s} {cfg:22s} {r['dtype']:4s} {extra:18s} regs={r['registers']:3d} "
                  f"spill={r['spill_stores']}/{r['spill_loads']} static_smem={r['static_smem']} "
                  f"dyn_smem={r['dynamic_smem']}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
