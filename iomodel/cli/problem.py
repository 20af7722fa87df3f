"""The problem options (algorithm, GPU, kernel family, sizes, dtype, calibration) and the rules of their use.

A command gets only the options it reads (argparse refuses the rest).  Which sizes an algorithm reads
depends on the algorithm, so the sizes default to None in the parser: :func:`checked` refuses a size
the algorithm does not read (and the other rules below), then fills in the defaults of this table.
"""
from __future__ import annotations

import argparse

from ..boundary import UsageError
from ..problems import DTYPES
from .diagram_args import (DIAGRAM_ALGOS, FLAG_SYMBOLS, STYLE_NAMES, USER_ALGO, diagram_families, diagram_problem,
                           is_diagram_algo, parse_sizes, parse_softcap, parse_window, positive)

ATTENTION_ALGOS = ("flash-attention", "flash-attention-causal", "gqa", "attention-unfused")
BACKWARD_ALGOS = ("flash-attention-backward",)   # our kernels of the backward (the diagram's: attention-backward)
DECODE_ALGOS = ("flash-decode",)   # our decode kernel (the diagram's: attention-split-kv)
ALGOS = (*ATTENTION_ALGOS, *BACKWARD_ALGOS, *DECODE_ALGOS, *DIAGRAM_ALGOS, "softmax")
FLASH = ("flash_sm80", "flash_sm90")
DECODE = ("flash_decode_sm80",)
BACKWARD = ("flash_bwd_sm80", "flash_bwd_sm80_deterministic", "flash_bwd_sm90", "flash_bwd_sm90_deterministic")
# the algorithms whose shape takes a causal mask from --causal (flash-attention-causal is one already)
CAUSAL_ALGOS = ("flash-attention", "flash-attention-causal", "gqa", *BACKWARD_ALGOS, *DECODE_ALGOS)
ALGO_FAMILIES = {"flash-attention": FLASH, "flash-attention-causal": FLASH, "gqa": FLASH,
                 "flash-attention-backward": BACKWARD, "flash-decode": DECODE,
                 "attention-unfused": ("unfused",), "softmax": ("softmax",),
                 **{a: STYLE_NAMES for a in (*DIAGRAM_ALGOS, USER_ALGO)},
                 "matmul": ("matmul_sm80", *STYLE_NAMES)}   # our matmul kernel, and the diagram in each style
DEFAULT_GPU = "h100-sxm"

# dest -> (flag, default, help); a None default is derived from other options, as the help says
SIZES = {
    "batch": ("--batch", 4, "batch B"),
    "heads": ("--heads", 16, "query heads H"),
    "kv_heads": ("--kv-heads", None, "K/V heads H_kv for grouped-query attention (default: heads; heads/4 "
                                     "for --algo gqa and flash-decode)"),
    "seqlen": ("--seqlen", 4096, "query length N_q (--algo flash-decode: 1)"),
    "kv_seqlen": ("--kv-seqlen", None, "key length N_k; the columns of a softmax (default: seqlen; 8192 for "
                                       "--algo flash-decode)"),
    "head_dim": ("--head-dim", 128, "head dim d"),
    "m": ("--m", 8192, "matmul rows M"),
    "n": ("--n", 8192, "matmul columns N"),
    "k": ("--k", 8192, "matmul contraction K"),
    "window": ("--window", None, "sliding window W: keys each query sees (default: 1024)"),
}
ATTENTION_SIZES = ("batch", "heads", "kv_heads", "seqlen", "kv_seqlen", "head_dim")
MATMUL_SIZES = ("m", "n", "k")
ALGO_SIZES = {**{a: ATTENTION_SIZES for a in (*ATTENTION_ALGOS, *BACKWARD_ALGOS, *DECODE_ALGOS)},
              **{a: tuple(FLAG_SYMBOLS.get(a, {})) for a in (*DIAGRAM_ALGOS, USER_ALGO)},
              "softmax": ("batch", "heads", "seqlen", "kv_seqlen")}   # rows = B * H * N_q, columns = N_k
# the options that depend on the GPU; --symbolic pseudocode reads none of them
GPU_OPTIONS = {"gpu": ("--gpu", DEFAULT_GPU), "dtype": ("--dtype", "bf16"), "calibration": ("--calibration", "auto")}
# sizes whose default depends on the algorithm: a decode is a few query rows over a long cache
ALGO_DEFAULTS = {"seqlen": {"flash-decode": 1}, "kv_seqlen": {"flash-decode": 8192}}


def _shown(default) -> str:
    return f" (default: {default})" if default is not None else ""


def add_problem_args(p: argparse.ArgumentParser, *, algos=ALGOS, kernel: bool = True, gpu: bool = True,
                     sizes=tuple(SIZES)) -> None:
    """The problem options a command reads: always --algo; --kernel, the GPU options and `sizes` when
    the command reads them."""
    p.add_argument("--algo", choices=algos, help=f"algorithm (default: {algos[0]})")
    p.add_argument("--diagram", metavar="FILE.py:FUNCTION",
                   help="your own algorithm: a function returning a relabeled Diagram or Program, or one "
                        "with its sizes as (diagram, {symbol: value}) (docs/cli.md)")
    if kernel:
        from .. import families

        p.add_argument("--kernel", default="auto", choices=("auto", *families.FAMILIES, *STYLE_NAMES),
                       help="kernel family, one of the algorithm's, or for a diagram algorithm the kernel "
                            "style (auto: every one the GPU runs); without --algo, a family picks its "
                            "algorithm")
        p.add_argument("--causal", action="store_true",
                       help=f"causal mask (bottom-right), for --algo {', '.join(CAUSAL_ALGOS)}")
        p.add_argument("--window-size", dest="window_size", type=parse_window, metavar="LEFT,RIGHT",
                       help="a kernel's sliding window, FlashAttention's window_size: query i sees keys "
                            "i + N_k - N_q - LEFT .. i + N_k - N_q + RIGHT (-1: unbounded; --causal sets RIGHT = 0)")
        p.add_argument("--softcap", type=parse_softcap, metavar="CAP",
                       help="FlashAttention's softcap: logits CAP * tanh(logit / CAP) (a MUFU op per score)")
        p.add_argument("--alibi", action="store_true",
                       help="FlashAttention's ALiBi: logits minus a per-head slope times the distance to the diagonal")
    if not gpu:
        return
    p.add_argument("--gpu", metavar="KEY|NAME|PATH",
                   help=f"spec key (iomodel gpus), device name, or a spec TOML path{_shown(DEFAULT_GPU)}")
    for dest in sizes:
        flag, default, text = SIZES[dest]
        p.add_argument(flag, dest=dest, type=positive, metavar="N", help=text + _shown(default))
    p.add_argument("--size", type=parse_sizes, metavar="NAME=N,...",
                   help="sizes of a diagram algorithm by their symbols, e.g. T=8192,V=32000 (iomodel algos)")
    p.add_argument("--dtype", choices=DTYPES, help="element type (default: bf16)")
    p.add_argument("--calibration", metavar="auto|none|KEY|PATH",
                   help="measured ceilings: auto (iomodel/calibration/<gpu>.toml when there is one), none "
                        "(datasheet rates), a calibration key or a TOML path (default: auto)")
    p.add_argument("--force-calibration", action="store_true",
                   help="use a --calibration measured on another GPU than --gpu")


def _given(args, dests) -> list[str]:
    return [d for d in dests if getattr(args, d, None) is not None]


def _flags(dests) -> str:
    return ", ".join({**SIZES, **GPU_OPTIONS}[d][0] for d in dests)


def _algo(args, default: str) -> str:
    """--algo, or `diagram` with --diagram (the two exclude each other); without either, the default
    unless --kernel names a family of another algorithm: then its first (--kernel flash_bwd_sm80 alone
    predicts the backward, as --kernel flash_sm80 alone predicts the forward)."""
    diagram = getattr(args, "diagram", None)
    if diagram is not None and args.algo is not None:
        raise UsageError("--algo and --diagram both name the algorithm; give one")
    if diagram is not None:
        return USER_ALGO
    if args.algo is not None:
        return args.algo
    kernel = getattr(args, "kernel", "auto")
    if kernel in ("auto", *STYLE_NAMES, *ALGO_FAMILIES[default]):
        return default
    return next((a for a, fams in ALGO_FAMILIES.items() if kernel in fams), default)


def checked(args, reads_sizes=None, default_algo: str = ALGOS[0]) -> argparse.Namespace:
    """`args` after the option rules, with defaults filled in.  `reads_sizes`: the sizes the command
    reads besides the algorithm's (roofline's matmul point reads --m --n --k)."""
    algo = args.algo = _algo(args, default_algo)
    if getattr(args, "size", None) is not None and not is_diagram_algo(algo):
        raise UsageError(f"--size not used by --algo {algo}, which reads {_flags(ALGO_SIZES[algo])}")
    reads = set(ALGO_SIZES[algo]) | set(reads_sizes or ())
    extra = [d for d in _given(args, SIZES) if d not in reads]
    if extra:
        raise UsageError(f"{_flags(extra)} not used by --algo {algo}, which reads {_flags(ALGO_SIZES[algo])}")
    if getattr(args, "causal", False) and algo not in CAUSAL_ALGOS:
        raise UsageError(f"--causal not used by --algo {algo}; it masks {', '.join(CAUSAL_ALGOS)}")
    kernel = getattr(args, "kernel", "auto")
    if kernel != "auto" and kernel not in ALGO_FAMILIES[algo]:
        serves = [a for a, fams in ALGO_FAMILIES.items() if kernel in fams]
        raise UsageError(f"--kernel {kernel} serves --algo {' or '.join(serves)}, not {algo} "
                         f"(which runs on {' or '.join(ALGO_FAMILIES[algo])})")
    check_force(args)
    for dest in SIZES:  # what was given, before the defaults: a diagram algorithm has its own defaults
        setattr(args, f"_given_{dest}", getattr(args, dest, None))
    for dest, (_flag, default) in GPU_OPTIONS.items():
        if hasattr(args, dest) and getattr(args, dest) is None:
            setattr(args, dest, default)
    for dest in SIZES:
        if hasattr(args, dest) and getattr(args, dest) is None:
            setattr(args, dest, ALGO_DEFAULTS.get(dest, {}).get(algo, SIZES[dest][1]))
    return args


def refuse_gpu_options(args, why: str) -> None:
    """UsageError when a GPU option or size was given to a command that, as called, reads none."""
    given = _given(args, [*GPU_OPTIONS, *SIZES])
    if given or getattr(args, "force_calibration", False):
        raise UsageError(f"{_flags(given) or '--force-calibration'} not used: {why}")


def problem(args) -> tuple[tuple[str, ...], dict]:
    """Kernel families of the algorithm and its shape, from checked args."""
    fams = ALGO_FAMILIES[args.algo]
    no_attention_options(args)
    if uses_diagram(args):
        return fams, diagram_problem(args)
    if args.algo == "matmul":
        return fams, dict(M=args.m, N=args.n, K=args.k, dtype=args.dtype)
    if args.algo == "softmax":
        return fams, dict(rows=args.batch * args.heads * args.seqlen, cols=args.kv_seqlen or args.seqlen,
                          dtype=args.dtype)
    kv = args.kv_heads or (max(1, args.heads // 4) if args.algo in ("gqa", *DECODE_ALGOS) else args.heads)
    if args.heads % kv:
        raise UsageError(f"--heads ({args.heads}) must be a multiple of --kv-heads ({kv})")
    shape = dict(B=args.batch, H=args.heads, H_kv=kv, N_q=args.seqlen, N_k=args.kv_seqlen or args.seqlen,
                 d=args.head_dim, causal=is_causal(args), dtype=args.dtype)
    return fams, {**shape, **window_fields(args), **score_mod_fields(args)}


def no_attention_options(args) -> None:
    """An algorithm without attention's scores (matmul, softmax, a diagram algorithm) takes no window and no score
    modifier: one line, not ignored (the attention algorithms' families check theirs)."""
    if not (uses_diagram(args) or args.algo in ("matmul", "softmax")):
        return
    given = [flag for flag, attr in (("--window-size", "window_size"), ("--softcap", "softcap"), ("--alibi", "alibi"))
             if getattr(args, attr, None)]
    if given:
        raise UsageError(f"{given[0]} applies to attention forwards, not --algo {args.algo}")


def score_mod_fields(args) -> dict:
    """The shape's softcap and alibi from --softcap and --alibi."""
    fields = {}
    if getattr(args, "softcap", None):
        fields["softcap"] = args.softcap
    if getattr(args, "alibi", False):
        fields["alibi"] = True
    if fields and args.algo in DECODE_ALGOS:
        flag = "--softcap" if "softcap" in fields else "--alibi"
        raise UsageError(f"{flag} applies to attention forwards, not --algo {args.algo}")
    return fields


def window_fields(args) -> dict:
    """The shape's window_left, window_right from --window-size (--causal sets the right side to 0)."""
    window = getattr(args, "window_size", None)
    if window is None:
        return {}
    if args.algo in DECODE_ALGOS:
        raise UsageError(f"--window-size applies to attention forwards, not --algo {args.algo}")
    left, right = window
    return {"window_left": left, "window_right": 0 if is_causal(args) else right}


def is_causal(args) -> bool:
    """The causal mask: --algo flash-attention-causal or --causal."""
    return args.algo == "flash-attention-causal" or getattr(args, "causal", False)


def is_gqa(args) -> bool:
    """Grouped KV heads: --algo gqa, or --kv-heads other than --heads (a command with sizes)."""
    kv = getattr(args, "kv_heads", None)
    return args.algo == "gqa" or (kv is not None and kv != getattr(args, "heads", kv))


def shipped_families(algo: str) -> list[str]:
    """The algorithm's kernel families that are ours (not a kernel style of its diagram)."""
    return [f for f in ALGO_FAMILIES[algo] if f not in STYLE_NAMES]


def uses_diagram(args) -> bool:
    """Whether the algorithm runs as its diagram in a kernel style: a diagram algorithm, unless --kernel
    names one of its shipped families (`matmul --kernel matmul_sm80`)."""
    return is_diagram_algo(args.algo) and getattr(args, "kernel", "auto") not in shipped_families(args.algo)


def families_for(args, spec) -> list[str]:
    """The families to run: --kernel (which must run on the GPU), else every family of the algorithm
    that does."""
    from .. import families

    kernel = getattr(args, "kernel", "auto")
    if is_diagram_algo(args.algo) and kernel in ("auto", *STYLE_NAMES):
        ours = [f for f in shipped_families(args.algo) if kernel == "auto" and not families.get(f).gpu_problem(spec)]
        return ours + diagram_families(args, spec)   # our kernels beside the diagram's styles
    if args.kernel != "auto":
        why = families.get(args.kernel).gpu_problem(spec)
        if why:
            raise UsageError(f"--kernel {args.kernel} cannot run on {spec.key}: {why}")
        return [args.kernel]
    return [f for f in ALGO_FAMILIES[args.algo] if not families.get(f).gpu_problem(spec)]


def check_force(args) -> None:
    """--force-calibration only means something beside a calibration named by key or path."""
    if getattr(args, "force_calibration", False) and args.calibration in (None, "auto", "none"):
        raise UsageError("--force-calibration goes with a --calibration KEY or PATH measured on another GPU")


def check_calibration_gpu(cal, gpu_key: str, force: bool, what: str = "--calibration") -> None:
    """A calibration's rates belong to the GPU they were measured on: another GPU's is refused unless
    forced."""
    if cal is not None and cal.gpu_key != gpu_key and not force:
        raise UsageError(f"{what}: that calibration was measured on {cal.gpu_key}, not {gpu_key}; "
                         f"pass --force-calibration to use it anyway")


def calibration_for(text, spec, force: bool):
    """The Calibration (or None: datasheet rates) `text` names for `spec`, checked against its GPU."""
    from ..api import resolve_calibration

    cal = resolve_calibration(spec, text)
    check_calibration_gpu(cal, spec.key, force)
    return cal
