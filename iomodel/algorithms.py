"""Any algorithm, from a diagram to a predicted time: the library's by name, or the user's own.

An algorithm is a function of a kernel style and a dtype that returns a relabeled diagram (or
program) whose sizes and tiles are symbols; :mod:`iomodel.diagram_family` turns it into a kernel
family (tiles to search, their build check, FLOPs from the derivation) and the model does the rest.
Nothing below states a FLOP count, a search space or a plan: the entries only say which library
function draws the algorithm and which sizes it is shown with by default.

A user's algorithm is a Python file with a function returning a Diagram or Program, or a pair
(diagram, {size symbol: value}); :func:`load_user_diagram` loads it (``--diagram path.py:function``).
"""
from __future__ import annotations

import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from diagrams import library
from diagrams.core import DiagramError

from . import families
from .diagram_family import check_program, diagram_family
from .errors import ModelError
from .styles import STYLES, KernelStyle, get_style

__all__ = ["Algorithm", "LIBRARY", "get_algorithm", "family_for", "best_prediction", "load_user_diagram",
           "UserDiagram"]


@dataclass(frozen=True)
class Algorithm:
    name: str
    description: str
    draw: Callable[[KernelStyle, str], object]     # (style, dtype) -> relabeled Diagram or Program
    sizes: Mapping[str, int]                       # default value of every size symbol
    dtypes: tuple[str, ...] = ("bf16", "fp16")
    variants: tuple[str, ...] = ()   # other library algorithms computing the same function (same sizes)


def _matmul(style, dtype):
    return library.tiled_matmul(tile_a="Ba", tile_c="Bc", chunk_b="Bk", stages="st", warps="w", warps_c="wc",
                                unit_threads=style.unit_threads, raster="G", a="M", b="K", c="N", dtype=dtype)


def _mlp(fused):
    def draw(style, dtype):
        # unfused, each matmul kernel has a 2-D grid of units; fused, units split the tokens
        grid = {} if fused else {"warps_c": "wc"}
        return library.mlp(fused=fused, stages="st", unit_threads=style.unit_threads, dtype=dtype, **grid)
    return draw


def _units(fn, **kw):
    """A library function drawn with the style's units and searched stages."""
    def draw(style, dtype):
        return fn(stages="st", unit_threads=style.unit_threads, dtype=dtype, **kw)
    return draw


def _sliding_window(style, dtype):
    return library.sliding_window_attention(window="W", stages="st", unit_threads=style.unit_threads,
                                            skip_per_unit=style.unit_threads > 32, dtype=dtype)


def _split_kv(style, dtype):
    return library.attention_split_kv(parts="sp", stages="st", unit_threads=style.unit_threads, dtype=dtype)


LLM = {"T": 16384, "D": 4096}
BACKWARD = {"B": 4, "H": 16, "N": 4096, "M": 4096, "d": 128}   # non-GQA, not causal
LIBRARY: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("matmul", "C = A.B, output tiles over blocks, K streamed, a 2-D grid of units", _matmul,
              {"M": 8192, "N": 8192, "K": 8192}, variants=("matmul-split-k",)),
    Algorithm("matmul-split-k", "C = A.B with K split over blocks, the fp32 partial tiles summed by a second "
              "kernel", _units(library.split_k_matmul), {"M": 1024, "N": 1024, "K": 65536}, variants=("matmul",)),
    # fused, a block holds a whole output row in registers: a narrow model (where fusing pays) by default
    Algorithm("mlp", "Y = gelu(X.W1).W2 fused: the hidden axis streamed, the inner product nested", _mlp(True),
              {"T": 65536, "D": 128, "F": 512}, variants=("mlp-unfused",)),
    Algorithm("mlp-unfused", "Y = gelu(X.W1).W2 as two matmul kernels through global memory", _mlp(False),
              {**LLM, "F": 14336}, variants=("mlp",)),
    Algorithm("rmsnorm-matmul", "Y = rmsnorm(X).W, the row scale moved past the contraction",
              _units(library.rmsnorm_matmul), {**LLM, "N": 4096}),
    Algorithm("cross-entropy", "loss = logsumexp(H.W) - target logit, the vocabulary streamed (online LSE)",
              _units(library.cross_entropy), {"T": 8192, "D": 4096, "V": 128256}, variants=("cross-entropy-split",)),
    Algorithm("cross-entropy-split", "cross-entropy with the vocabulary split over blocks, the parts' LSEs merged "
              "by a second kernel", _units(library.cross_entropy_split), {"T": 8192, "D": 4096, "V": 128256},
              variants=("cross-entropy",)),
    Algorithm("chained-matmul", "E = (A.B).C fused, the intermediate in registers",
              _units(library.chained_matmul), {"M": 16384, "K": 128, "N": 16384, "P": 128}),
    Algorithm("sliding-window-attention", "FlashAttention forward, causal with a window of W keys",
              _sliding_window, {"B": 1, "H": 16, "N": 16384, "M": 16384, "d": 128, "W": 1024}),
    Algorithm("attention-split-kv", "decode attention split over the keys, parts merged by LSE", _split_kv,
              {"B": 1, "Hk": 8, "g": 4, "N": 1, "M": 32768, "d": 128}),
    Algorithm("attention-backward", "FlashAttention-2 backward: K/V tiles own blocks, dQ accumulated atomically",
              _units(library.attention_backward), BACKWARD, variants=("attention-backward-deterministic",)),
    Algorithm("attention-backward-saved-p", "FlashAttention-2 backward reading the probabilities the forward saved "
              "instead of recomputing them (its forward writes P: not a variant, it takes other inputs)",
              _units(library.attention_backward, save_p=True), BACKWARD),
    Algorithm("attention-backward-deterministic", "attention backward without atomics: dK/dV by key tiles, then "
              "dQ by query tiles (S, P, dP recomputed)", _units(library.attention_backward_deterministic), BACKWARD,
              variants=("attention-backward",)),
)}


def get_algorithm(name: str) -> Algorithm:
    algo = LIBRARY.get(name)
    if algo is None:
        from .names import suggest
        raise ModelError(f"unknown algorithm {name!r}{suggest(name, LIBRARY)}; known: {', '.join(LIBRARY)}")
    return algo


def family_for(algo: str, style: str, draw=None, dtypes=None) -> families.Family:
    """The (registered) family of library algorithm `algo` (or of `draw`, a user's) in `style`."""
    s = get_style(style)
    name = f"{algo}/{s.name}"
    try:
        return families.get(name)
    except ModelError:
        pass
    entry = None if draw is not None else get_algorithm(algo)
    fn = draw or entry.draw
    return families.register(diagram_family(name, lambda dtype: fn(s, dtype), s,
                                            dtypes=dtypes or entry.dtypes))


def best_prediction(algo: str, gpu, shape: Mapping, calibration="auto", variants: bool = True):
    """The model's fastest configuration for a library algorithm and a shape of its size symbols
    (missing ones take the algorithm's defaults) and ``dtype``: over every style `gpu` runs and, with
    `variants`, over the library's other ways to compute it (a split-K matmul, an unfused MLP). The
    prediction's ``kernel`` says which (``mlp-unfused/wgmma``). ModelError when none fits."""
    from .hardware import resolve_gpu
    from .tiles import search

    spec = resolve_gpu(gpu)
    entry = get_algorithm(algo)
    best, why = None, []
    for name in (algo, *(entry.variants if variants else ())):
        full = {**get_algorithm(name).sizes, **shape}
        full.setdefault("dtype", "bf16")
        for style in STYLES:
            fam = family_for(name, style)
            if fam.gpu_problem(spec):
                continue
            try:
                top = search(fam.name, spec, full, calibration=calibration, top=1).ranked[0]
            except ModelError as exc:   # nothing of this way fits: the others may
                why.append(str(exc))
                continue
            best = top if best is None or top.time_s < best.time_s else best
    if best is None:
        raise ModelError("; ".join(why) or f"no kernel style runs {algo} on {spec.key}")
    return best


@dataclass(frozen=True)
class UserDiagram:
    """A user's diagram: where it came from, how to draw it in a style, and the sizes it gave."""
    name: str
    draw: Callable[[KernelStyle, str], object]
    sizes: Mapping[str, int]
    dtypes: tuple[str, ...]


def _load_function(spec: str) -> tuple[Path, Callable]:
    path_text, sep, fn_name = spec.rpartition(":")
    if not sep or not path_text or not fn_name:
        raise ModelError(f"--diagram takes FILE.py:FUNCTION, got {spec!r}")
    path = Path(path_text)
    if not path.is_file():
        raise ModelError(f"--diagram: no file {path_text!r}")
    mod_name = f"iomodel_user_{abs(hash(str(path.resolve())))}"
    loader = importlib.util.spec_from_file_location(mod_name, path)
    if loader is None or loader.loader is None:
        raise ModelError(f"--diagram: {path_text} is not a Python file")
    module = importlib.util.module_from_spec(loader)
    sys.modules[mod_name] = module
    try:
        loader.loader.exec_module(module)
    except Exception as exc:  # the user's code: any failure is theirs, said in one line
        raise ModelError(f"--diagram: {path_text} failed to load: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise ModelError(f"--diagram: {path_text} has no function {fn_name!r}")
    return path, fn


def _call(fn, where: str, style: KernelStyle | None):
    """fn's result as (program, sizes); `unit_threads` is passed when fn takes it."""
    kw = {"unit_threads": style.unit_threads} if style and "unit_threads" in inspect.signature(fn).parameters else {}
    try:
        out = fn(**kw)
    except DiagramError as exc:
        raise ModelError(f"{where}: invalid diagram: {exc}") from None
    except Exception as exc:
        raise ModelError(f"{where} failed: {type(exc).__name__}: {exc}") from None
    sizes = {}
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], Mapping):
        out, sizes = out
    prog = check_program(out, where)
    bad = [k for k, v in sizes.items() if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, int) or v <= 0]
    if bad:
        raise ModelError(f"{where}: sizes must map symbol names to positive integers; bad: {bad[0]!r}")
    return prog, dict(sizes)


def load_user_diagram(spec: str) -> UserDiagram:
    """The function `FILE.py:FUNCTION` names, checked: it returns a Diagram or Program (or one with its
    sizes) whose relabelings derive. ModelError, one line, otherwise."""
    path, fn = _load_function(spec)
    where = f"--diagram {spec}"
    prog, sizes = _call(fn, where, None)
    dtypes = tuple(sorted({x.dtype for k in prog.kernels for x in k.arrays().values()} & {"bf16", "fp16"})) or ("bf16",)
    try:
        from .derive import derive
        derive(prog)
    except DiagramError as exc:
        raise ModelError(f"{where}: invalid relabelings: {exc}") from None

    def draw(style, dtype):
        return _call(fn, where, style)[0]
    return UserDiagram(f"{path.stem}.{fn.__name__}", draw, sizes, dtypes[:1])
