"""Compilation: one path and one cache for every kernel.

Run time: :func:`build` takes a translation unit, inlines its local ``#include "..."`` lines (so the
cache key, a hash of the inlined text and the options, can never serve a module built from stale
headers, and NVRTC needs no include path), and compiles it with NVRTC (``libnvrtc`` through ctypes)
to a cubin for one architecture.  Templated kernels are found through NVRTC name expressions: each
expression (``iom::flash_fwd_kernel<...>``) is registered before the compile and its lowered
(mangled) name read back after it.  Modules are cached in memory and on disk
(``$IOMODEL_KERNEL_CACHE``, default ``~/.cache/iomodel/kernels``: the cubin and a JSON of the lowered
names).

Offline: :func:`run_nvcc` compiles a unit with the local ``nvcc`` (ptxas reports and SASS in
``kernels.reports``, and the tests).  Neither path needs a GPU.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import importlib
import json
import os
import re
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from .codegen import CSRC

__all__ = ["CSRC", "CompileError", "Module", "inline_includes", "kernel_source", "build", "nvrtc_options",
           "find_libnvrtc", "nvrtc_arch", "cache_dir", "precompile", "gencode", "run_nvcc"]

STD = "-std=c++17"
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)


class CompileError(RuntimeError):
    """The compiler rejected the source (the message holds its log)."""


# ------------------------------------------------------------------------------------ sources
def inline_includes(text: str) -> str:
    """`text` with each local ``#include "..."`` replaced by that file of csrc/, recursively (each file once)."""
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


# ------------------------------------------------------------------------------------ NVRTC
def driver_cuda_version() -> int | None:
    """The CUDA version the installed driver supports (libcuda's cuDriverGetVersion: 12040 for 12.4; it
    needs no context), or None where there is no driver (a CPU machine)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    v = ctypes.c_int()
    return v.value if lib.cuDriverGetVersion(ctypes.byref(v)) == 0 else None


#: NVIDIA's NVRTC wheels: (package, library, CUDA major); the extras gpu-cu13 and gpu-cu12 install them
NVRTC_WHEELS = (("nvidia.cu13", "libnvrtc.so.13", 13), ("nvidia.cuda_nvrtc", "libnvrtc.so.12", 12))


def find_libnvrtc(prefer_major: int | None = None) -> str | None:
    """libnvrtc: $IOMODEL_LIBNVRTC, NVIDIA's pip wheel (as installed next to torch; the one of the
    driver's CUDA major first, ``prefer_major``), the loader's path."""
    env = os.environ.get("IOMODEL_LIBNVRTC")
    if env:
        return env
    wheels = sorted(NVRTC_WHEELS, key=lambda w: w[2] != prefer_major)   # stable: the matching one first
    for package, lib, _major in wheels:
        # nvidia-cuda-nvrtc (CUDA 13) installs under the nvidia.cu13 namespace package,
        # nvidia-cuda-nvrtc-cu12 under nvidia.cuda_nvrtc: the extras gpu-cu13 and gpu-cu12
        try:
            mod = importlib.import_module(package)
        except ImportError:
            continue
        for base in getattr(mod, "__path__", []):
            p = Path(base) / "lib" / lib
            if p.exists():
                return str(p)
    sonames = sorted(("libnvrtc.so.13", "libnvrtc.so.12"), key=lambda n: not n.endswith(f".{prefer_major}"))
    for cand in (*sonames, "libnvrtc.so"):
        try:
            ctypes.CDLL(cand)
            return cand
        except OSError:
            continue
    return ctypes.util.find_library("nvrtc")


class _Nvrtc:
    """The few NVRTC entry points used here, typed (ctypes)."""

    def __init__(self, path: str):
        # libnvrtc dlopens its builtins library by soname at compile time; a wheel's lib folder is not
        # on the loader's path, so load the one beside it first (dlopen then finds it loaded)
        for builtins in sorted(Path(path).parent.glob("libnvrtc-builtins.so.*")) if os.path.isabs(path) else ():
            ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
        self.lib = lib = ctypes.CDLL(path)
        vp, cp, sz, i32 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int
        lib.nvrtcGetErrorString.restype = cp
        lib.nvrtcCreateProgram.argtypes = [ctypes.POINTER(vp), cp, cp, i32, vp, vp]
        lib.nvrtcAddNameExpression.argtypes = [vp, cp]
        lib.nvrtcCompileProgram.argtypes = [vp, i32, ctypes.POINTER(cp)]
        lib.nvrtcGetProgramLogSize.argtypes = [vp, ctypes.POINTER(sz)]
        lib.nvrtcGetProgramLog.argtypes = [vp, cp]
        lib.nvrtcGetCUBINSize.argtypes = [vp, ctypes.POINTER(sz)]
        lib.nvrtcGetCUBIN.argtypes = [vp, cp]
        lib.nvrtcGetLoweredName.argtypes = [vp, cp, ctypes.POINTER(cp)]
        lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(vp)]
        lib.nvrtcGetNumSupportedArchs.argtypes = [ctypes.POINTER(i32)]
        lib.nvrtcVersion.argtypes = [ctypes.POINTER(i32), ctypes.POINTER(i32)]
        lib.nvrtcGetSupportedArchs.argtypes = [ctypes.POINTER(i32)]

    def check(self, res: int, what: str) -> None:
        if res != 0:
            raise RuntimeError(f"{what} failed: {self.lib.nvrtcGetErrorString(res).decode()} ({res})")

    def version(self) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        return major.value, minor.value

    def supported_archs(self) -> list[int]:
        n = ctypes.c_int()
        self.check(self.lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs")
        archs = (ctypes.c_int * n.value)()
        self.check(self.lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
        return list(archs)

    def _log(self, prog) -> str:
        size = ctypes.c_size_t()
        self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        self.lib.nvrtcGetProgramLog(prog, log)
        return log.value.decode(errors="replace")

    def _lowered(self, prog, names) -> dict[str, str]:
        out = {}
        for n in names:
            low = ctypes.c_char_p()
            self.check(self.lib.nvrtcGetLoweredName(prog, n.encode(), ctypes.byref(low)), f"nvrtcGetLoweredName({n})")
            out[n] = low.value.decode()
        return out

    def compile(self, src: str, label: str, opts: list[str], names) -> tuple[bytes, dict[str, str]]:
        """(cubin, {name expression: lowered name}); CompileError with NVRTC's log if the source fails."""
        L, prog = self.lib, ctypes.c_void_p()
        self.check(L.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), f"{label}.cu".encode(), 0, None, None),
                   "nvrtcCreateProgram")
        try:
            for n in names:
                self.check(L.nvrtcAddNameExpression(prog, n.encode()), f"nvrtcAddNameExpression({n})")
            copts = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
            res = L.nvrtcCompileProgram(prog, len(opts), copts)
            if res != 0:
                raise CompileError(f"NVRTC failed for {label} ({' '.join(opts)}):\n{self._log(prog)}")
            size = ctypes.c_size_t()
            self.check(L.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
            buf = ctypes.create_string_buffer(size.value)
            self.check(L.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
            return buf.raw, self._lowered(prog, names)
        finally:
            L.nvrtcDestroyProgram(ctypes.byref(prog))


@functools.cache
def _get_nvrtc() -> _Nvrtc:
    """The process's NVRTC, loaded on first use (a failed lookup is not cached: the next call tries again)."""
    version = driver_cuda_version()
    major = version // 1000 if version else None
    path = find_libnvrtc(major)
    if path is None:
        from .cuda_versions import extra_for

        extra = extra_for(major) if major else "gpu-cu13"
        raise RuntimeError(f"libnvrtc not found: pip install 'iomodel[{extra}]' or set IOMODEL_LIBNVRTC")
    return _Nvrtc(path)


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) CUDA version of the process's NVRTC."""
    return _get_nvrtc().version()


def nvrtc_arch(capability: tuple[int, int]) -> str:
    """``sm_XY`` of a device for the mma.sync kernels: its own, or the newest this NVRTC knows when the
    device is newer (a cubin of an older arch of the same major runs on it; CuPy chose the same way)."""
    cc = 10 * capability[0] + capability[1]
    archs = _get_nvrtc().supported_archs()
    return f"sm_{max((a for a in archs if a <= cc), default=cc)}"


#: Flush denormals to zero in the mma.sync kernels' float math: they were built so (CuPy's default)
#: for every measured run up to the restructuring, and keeping it keeps the instructions they run.
#: The offline nvcc reports build without it; the Hopper kernel never had it.
MMA_SYNC_FLAGS = ("-ftz=true",)


def nvrtc_options(arch: str, defines: Iterable[str] = (), flags: Iterable[str] = ()) -> list[str]:
    """NVRTC's options for one build: C++17, the architecture (``sm_80``, ``sm_90a``), -D switches,
    then any other flags."""
    return [STD, f"--gpu-architecture={arch}", *(f"-D{d}" for d in defines), *flags]


# ------------------------------------------------------------------------------------ cache
@dataclass(frozen=True)
class Module:
    """A compiled translation unit: its cubin and the symbol of each name expression."""

    key: str
    cubin: bytes = field(repr=False)
    lowered: dict = field(default_factory=dict)

    def symbol(self, name: str) -> str:
        """The cubin's symbol of `name` (an extern "C" name is its own symbol)."""
        return self.lowered.get(name, name)


_lock = threading.Lock()
_modules: dict[str, Module] = {}


def cache_dir() -> Path:
    return Path(os.environ.get("IOMODEL_KERNEL_CACHE", Path.home() / ".cache" / "iomodel" / "kernels"))


def _key(src: str, opts: list[str], names) -> str:
    h = hashlib.sha256()
    for part in (src, "\0".join(opts), "\0".join(names)):
        h.update(part.encode())
        h.update(b"\1")
    return h.hexdigest()[:32]


def _load(stem: Path) -> tuple[bytes, dict] | None:
    try:
        return stem.with_suffix(".cubin").read_bytes(), json.loads(stem.with_suffix(".json").read_text())
    except (OSError, ValueError):
        return None


def _store(stem: Path, cubin: bytes, lowered: dict) -> None:
    """Write the names first and the cubin last, each by rename: a reader that finds the cubin finds both."""
    try:
        stem.parent.mkdir(parents=True, exist_ok=True)
        for suffix, data in ((".json", json.dumps(lowered).encode()), (".cubin", cubin)):
            tmp = stem.with_suffix(f"{suffix}.tmp{os.getpid()}.{threading.get_ident()}")
            tmp.write_bytes(data)
            tmp.replace(stem.with_suffix(suffix))
    except OSError:  # a read-only or full cache directory only costs a recompile next time
        pass


def build(source: str, arch: str, names: Iterable[str] = (), defines: Iterable[str] = (),
          label: str = "kernels", flags: Iterable[str] = ()) -> Module:
    """`source` (local includes inlined here) compiled by NVRTC for `arch`, with `names` (template-ids
    of the kernels to launch) registered as name expressions.  Cached in memory and on disk."""
    src = inline_includes(source)
    names = tuple(names)
    opts = nvrtc_options(arch, defines, flags)
    key = _key(src, opts, names)
    with _lock:
        mod = _modules.get(key)
    if mod is not None:
        return mod
    stem = cache_dir() / f"{label}-{key}"
    hit = _load(stem)
    if hit is None or set(hit[1]) != set(names):
        hit = _get_nvrtc().compile(src, label, opts, names)
        _store(stem, *hit)
    mod = Module(key, *hit)
    with _lock:
        _modules.setdefault(key, mod)
    return mod


def precompile(jobs: Iterable[Callable[[], object]], workers: int | None = None) -> int:
    """Run module-building callables concurrently (NVRTC programs compile independently)."""
    jobs = list(jobs)
    with ThreadPoolExecutor(max_workers=workers or min(16, os.cpu_count() or 1)) as ex:
        for f in [ex.submit(j) for j in jobs]:
            f.result()
    return len(jobs)


# ------------------------------------------------------------------------------------ nvcc (offline)
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
    cmd = [exe, STD, "-cubin", gencode(arch), f"-I{CSRC}", *flags, "-o", str(cubin), str(cu)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise CompileError(f"nvcc failed for {stem} ({' '.join(cmd)}):\n{log}")
    return cubin, log
