"""Offline reports of the shipped kernels, built with the local nvcc (no GPU): ptxas resources
(registers, spills, static shared memory) and SASS instruction counts; and the CLI.

* :func:`sm80_resources` (arch): the mma.sync unit (every shipped flash_sm80 and matmul config, both
  dtypes, causal or not / both operand layouts, and the softmax) for ``sm_80`` or ``sm_90a``;
* :func:`sm90_resources`: the Hopper kernel's shipped variants for ``sm_90a``, with ptxas' performance
  notes (C75xx: setmaxnreg ignored, wgmma serialised);
* :func:`sass_counts` / :func:`sass_report`: HGMMA / HMMA / LDL / STL per kernel (``cuobjdump``).

ptxas reports static shared memory only; the kernels use dynamic shared memory exclusively, whose size
is ``config.smem_bytes(2)``.  ``python -m kernels.reports [resources [sm_80|sm_90a|sm90 ...] | sass |
gen-wgmma]``.
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
import tempfile

from iomodel import families
from iomodel.families import flash_sm90 as _flash_sm90
from iomodel.families import softmax as _softmax
from iomodel.families.flash_sm80 import FlashConfig
from iomodel.families.matmul_sm80 import MatmulConfig

from . import codegen
from .compile import run_nvcc

__all__ = ["ARCHS", "parse_ptxas", "demangle", "compile_report", "sm80_resources", "sm90_resources",
           "sass_counts", "sass_report", "main"]

#: architectures every shipped mma.sync configuration is built for
ARCHS: tuple[str, ...] = ("sm_80", "sm_90a")
SASS_OPS = ("HGMMA", "HMMA", "LDL", "STL")

_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_SPILL_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_TARG_RE = re.compile(r"L([ib])(\d+)E")
_PTXAS_WARN = re.compile(r"\((C75\d\d)\)[^\n]*?function '(\w+)'")


def parse_ptxas(text: str) -> dict[str, dict]:
    """Map mangled kernel name -> {registers, spill_stores, spill_loads, stack, static_smem, arch}."""
    out: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        m = _ENTRY_RE.search(line) or _PROPS_RE.search(line)
        if m:
            current = m.group(1)
            out.setdefault(current, {"registers": None, "spill_stores": 0, "spill_loads": 0, "stack": 0,
                                     "static_smem": 0, "arch": m.group(2) if m.re is _ENTRY_RE else None})
            continue
        if current is None:
            continue
        rec = out[current]
        m = _SPILL_RE.search(line)
        if m:
            rec["stack"], rec["spill_stores"], rec["spill_loads"] = map(int, m.groups())
            continue
        m = _USED_RE.search(line)
        if m:
            rec["registers"] = int(m.group(1))
            s = _SMEM_RE.search(line)
            rec["static_smem"] = int(s.group(1)) if s else 0
    return out


def demangle(name: str) -> tuple[str, dict] | None:
    """Map a mangled mma.sync kernel name back to (kind, description), None if unknown.

    Handles exactly the instantiations of this package: the template arguments are ``iom::bf16|fp16``
    followed by integer and bool literals (``Li128E``, ``Lb1E``) in declaration order.
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
        q_regs = ints[10] if len(ints) > 10 else 0   # the twelfth template argument (codegen.flash_sm80_kernel)
        return kind, {"config": FlashConfig(bm, bn, w, st, d, q_regs), "dtype": dtype, "causal": bool(causal)}
    if kind == "matmul":
        bm, bn, bk, w, st, kmaj, f32 = ints[:7]
        return kind, {"config": MatmulConfig(bm, bn, bk, w, st), "dtype": dtype,
                      "b_kmajor": bool(kmaj), "out_f32": bool(f32)}
    return kind, {"config": None, "dtype": dtype}


def compile_report(arch: str, flash_configs=None, matmul_configs=None, *, nvcc: str = "nvcc",
                   extra_flags: tuple[str, ...] = ()) -> str:
    """Compile the mma.sync instantiation unit for one arch; return ptxas' verbose report."""
    with tempfile.TemporaryDirectory(prefix="iom_build_") as tmp:
        return run_nvcc(codegen.sm80_unit(flash_configs, matmul_configs), arch, tmp, "iom_kernels",
                        ("-Xptxas", "-v", *extra_flags), nvcc=nvcc)[1]


@functools.lru_cache(maxsize=None)
def sm80_resources(arch: str = "sm_80") -> list[dict]:
    """Per-kernel resources of every shipped mma.sync configuration for ``arch``.

    One dict per kernel: ``kind`` ('flash_fwd', 'matmul', 'softmax'), ``config`` (FlashConfig /
    MatmulConfig / None), ``dtype``, ``causal`` (flash) or ``b_kmajor``/``out_f32`` (matmul),
    ``registers``, ``spill_stores``, ``spill_loads``, ``stack``, ``static_smem`` (bytes, from ptxas),
    ``dynamic_smem`` (bytes, from the config formula), ``arch``, ``mangled``.
    """
    rows = []
    for name, rec in parse_ptxas(compile_report(arch)).items():
        dm = demangle(name)
        if dm is None:
            continue
        kind, desc = dm
        cfg = desc["config"]
        rows.append({"kind": kind, **desc, "registers": rec["registers"], "spill_stores": rec["spill_stores"],
                     "spill_loads": rec["spill_loads"], "stack": rec["stack"], "static_smem": rec["static_smem"],
                     "dynamic_smem": cfg.smem_bytes(2) if cfg is not None else _softmax.SMEM_BYTES,
                     "arch": arch, "mangled": name})
    order = {"flash_fwd": 0, "matmul": 1, "softmax": 2}
    rows.sort(key=lambda r: (order[r["kind"]], str(r["config"]), r["dtype"] or "",
                             r.get("causal", False), r.get("b_kmajor", False)))
    return rows


def sm90_resources(configs=_flash_sm90.SHIPPED, dtypes=codegen.DTYPES, causal=(False, True),
                   keep_dir: str | None = None, varlen: bool = False) -> dict:
    """Compile every (config, dtype, causal) variant of the Hopper kernel (``varlen``: their packed
    variable-length forms) with the local nvcc in one invocation (``nvcc -cubin
    -gencode=arch=compute_90a,code=sm_90a -Xptxas -v``) and parse ptxas' report.

    Returns {kernel_name: {config, dtype, causal, registers, spill_stores, spill_loads, stack_frame,
    static_smem, dynamic_smem, ptxas_codes}} plus '_log' and '_cubin' (path)."""
    variants = {codegen.sm90_kernel(c, dt, ca, varlen): (c, dt, ca) for c in configs for dt in dtypes
                for ca in causal}
    cubin, log = run_nvcc(codegen.sm90_unit([(*v, varlen) for v in variants.values()]), "sm_90a",
                          keep_dir or tempfile.mkdtemp(prefix="sm90_report_"), "sm90_all", ("-Xptxas", "-v"))
    report: dict = {}
    for name, rec in parse_ptxas(log).items():
        if name not in variants:
            continue
        c, dt, ca = variants[name]
        report[name] = dict(config=c, dtype=dt, causal=ca, registers=rec["registers"],
                            spill_stores=rec["spill_stores"], spill_loads=rec["spill_loads"],
                            stack_frame=rec["stack"], static_smem=rec["static_smem"],
                            dynamic_smem=c.smem_bytes(2), ptxas_codes=[])
    for m in _PTXAS_WARN.finditer(log):
        if m.group(2) in report:
            report[m.group(2)]["ptxas_codes"].append(m.group(1))
    report["_log"] = log
    report["_cubin"] = str(cubin)
    return report


def sass_counts(cubin_path: str) -> dict[str, dict[str, int]] | None:
    """{kernel: {HGMMA, HMMA, LDL, STL: count}} of a cubin (``cuobjdump --dump-sass``); None without cuobjdump."""
    tool = shutil.which("cuobjdump")
    if tool is None:
        return None
    res = subprocess.run([tool, "--dump-sass", cubin_path], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"cuobjdump failed:\n{res.stderr}")
    counts: dict[str, dict[str, int]] = {}
    current = None
    for line in res.stdout.splitlines():
        m = re.search(r"Function : (\w+)", line)
        if m:
            current = m.group(1)
            counts[current] = dict.fromkeys(SASS_OPS, 0)
        elif current is not None:
            for op in SASS_OPS:
                if re.search(rf"\b{op}\b", line):
                    counts[current][op] += 1
    return counts


def sass_report(cubin_path: str | None = None) -> dict | None:
    """SASS counts of a cubin, by default of every shipped bf16 Hopper kernel (compiled first).
    None if cuobjdump is absent."""
    if shutil.which("cuobjdump") is None:
        return None
    return sass_counts(cubin_path or sm90_resources(dtypes=("bf16",))["_cubin"])


def _label(row: dict) -> str:
    """A report row's config in a few characters, e.g. ``128x64 w4 s2 d128`` (flash), '-' (softmax)."""
    cfg = row["config"]
    if row["kind"] == "flash_fwd":
        return f"{families.get('flash_sm80').label(cfg)} d{cfg.head_dim}"
    return families.get("matmul_sm80").label(cfg) if cfg is not None else "-"


def _print_sm80(arch: str) -> None:
    print(f"== {arch}")
    for r in sm80_resources(arch):
        cfg = _label(r)
        extra = (f"causal={int(r['causal'])}" if r["kind"] == "flash_fwd" else
                 (f"kmajor={int(r['b_kmajor'])} f32={int(r['out_f32'])}" if r["kind"] == "matmul" else ""))
        print(f"{r['kind']:9s} {cfg:22s} {r['dtype']:4s} {extra:18s} regs={r['registers']:3d} "
              f"spill={r['spill_stores']}/{r['spill_loads']} static_smem={r['static_smem']} "
              f"dyn_smem={r['dynamic_smem']}")


def _print_sm90() -> None:
    print("== sm90 (sm_90a)")
    for k, r in sm90_resources().items():
        if not k.startswith("_"):
            print(f"{k:55s} regs={r['registers']:4d} spill={r['spill_stores']}/{r['spill_loads']} "
                  f"static_smem={r['static_smem']} dyn_smem={r['dynamic_smem']} {' '.join(r['ptxas_codes'])}")


def main(argv=None) -> int:
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m kernels.reports", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    res = sub.add_parser("resources", help="ptxas registers / spills / static smem of every shipped kernel")
    res.add_argument("targets", nargs="*", metavar="{sm_80,sm_90a,sm90}",
                     help="sm_80 / sm_90a: the mma.sync kernels for that arch; sm90: the Hopper kernel (default: all)")
    sub.add_parser("sass", help="HGMMA / HMMA / LDL / STL per shipped bf16 Hopper kernel (cuobjdump)")
    sub.add_parser("gen-wgmma", help=f"write csrc/{codegen.WGMMA_HEADER}")
    a = ap.parse_args(argv)
    targets = (a.targets or [*ARCHS, "sm90"]) if a.cmd == "resources" else []
    bad = [t for t in targets if t not in (*ARCHS, "sm90")]
    if bad:
        ap.error(f"unknown target {bad[0]!r}: choose from {', '.join(ARCHS)}, sm90")
    if a.cmd == "gen-wgmma":
        print(codegen.write_wgmma_header())
    elif a.cmd == "sass":
        print(json.dumps(sass_report(), indent=1))
    else:
        for t in targets:
            _print_sm90() if t == "sm90" else _print_sm80(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
