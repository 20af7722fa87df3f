"""The options of algorithms drawn as diagrams (the library's by name, or ``--diagram FILE.py:FUNCTION``).

Their sizes are the diagram's size symbols: ``--size NAME=VALUE,...`` sets any of them, and the usual
size flags set the ones they name (``--m`` sets M of a matmul, ``--seqlen`` N of an attention). Their
kernel families are the kernel styles (``--kernel mma_sync`` or ``wgmma``), each the diagram run in that
style's code (iomodel.styles).
"""
from __future__ import annotations

import argparse

from ..boundary import UsageError

STYLE_NAMES = ("mma_sync", "wgmma")   # iomodel.styles.STYLES, without importing the model
# the library's algorithms (iomodel.algorithms.LIBRARY; a test keeps the two the same)
DIAGRAM_ALGOS = ("matmul", "matmul-split-k", "mlp", "mlp-unfused", "rmsnorm-matmul", "cross-entropy",
                 "cross-entropy-split", "chained-matmul", "sliding-window-attention", "attention-split-kv",
                 "attention-backward", "attention-backward-saved-p", "attention-backward-deterministic")
USER_ALGO = "diagram"   # what --algo becomes with --diagram
# size flag (its dest) -> the size symbol it sets, per algorithm
_ATTENTION = {"batch": "B", "heads": "H", "seqlen": "N", "kv_seqlen": "M", "head_dim": "d"}
FLAG_SYMBOLS = {
    "matmul": {"m": "M", "n": "N", "k": "K"},
    "matmul-split-k": {"m": "M", "n": "N", "k": "K"},
    "sliding-window-attention": {**_ATTENTION, "window": "W"},
    "attention-split-kv": {**_ATTENTION, "heads": "g", "kv_heads": "Hk"},  # g = heads / kv heads
    "attention-backward": dict(_ATTENTION),
    "attention-backward-deterministic": dict(_ATTENTION),
    "attention-backward-saved-p": dict(_ATTENTION),
}


def positive(text: str) -> int:
    """A positive integer option value (argparse turns the error into one line)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def parse_window(text: str) -> tuple[int, int]:
    """'4096,0' -> (4096, 0): FlashAttention's window_size (left, right), -1 unbounded."""
    parts = text.replace(" ", "").split(",")
    try:
        left, right = (int(x) for x in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LEFT,RIGHT (integers >= -1, -1: unbounded), got {text!r}") from None
    if left < -1 or right < -1:
        raise argparse.ArgumentTypeError(f"window sides must be >= -1 (-1: unbounded), got {text!r}")
    return left, right


def parse_softcap(text: str) -> float:
    """A softcap value: a finite number >= 0 (0: none)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not 0.0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0 (0: none), got {text!r}")
    return v


def parse_sizes(text: str) -> dict[str, int]:
    """'T=8192,V=32000' -> {'T': 8192, 'V': 32000}."""
    out: dict[str, int] = {}
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep or not name:
            raise argparse.ArgumentTypeError(f"expected NAME=VALUE pairs like T=8192, got {part!r}")
        try:
            out[name] = positive(value)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{name}: {exc}") from None
    if not out:
        raise argparse.ArgumentTypeError("expected NAME=VALUE pairs like T=8192")
    return out


def is_diagram_algo(algo: str) -> bool:
    return algo in DIAGRAM_ALGOS or algo == USER_ALGO


def user_diagram(args):
    """The user's `--diagram`, loaded and checked once per command."""
    from ..algorithms import load_user_diagram

    if getattr(args, "user_diagram", None) is None:
        args.user_diagram = load_user_diagram(args.diagram)
    return args.user_diagram


def _defaults(args):
    """(algorithm name, default sizes, dtypes) of the library algorithm or the user's diagram."""
    from ..algorithms import get_algorithm

    if args.algo == USER_ALGO:
        user = user_diagram(args)
        return user.name, dict(user.sizes), user.dtypes
    entry = get_algorithm(args.algo)
    return entry.name, dict(entry.sizes), entry.dtypes


def _flag_sizes(args, sizes: dict) -> dict:
    """The size flags given, as the symbols they set (heads / kv heads as g for a grouped decode)."""
    out = {}
    for dest, symbol in FLAG_SYMBOLS.get(args.algo, {}).items():
        value = getattr(args, f"_given_{dest}", None)
        if value is not None:
            out[symbol] = value
    if args.algo == "attention-split-kv" and "g" in out:
        kv = out.get("Hk", sizes.get("Hk"))
        if out["g"] % kv:
            raise UsageError(f"--heads ({out['g']}) must be a multiple of --kv-heads ({kv})")
        out["g"] = out["g"] // kv
    return out


def diagram_problem(args) -> dict:
    """The shape of a diagram algorithm: its default sizes, then the size flags, then --size; checked
    against the diagram's size symbols."""
    name, sizes, dtypes = _defaults(args)
    given = {**_flag_sizes(args, sizes), **(getattr(args, "size", None) or {})}
    fam = diagram_families(args, None)[0]
    from .. import families
    known = families.get(fam).shape_fields
    unknown = sorted(set(given) - set(known))
    if unknown:
        from ..names import suggest
        raise UsageError(f"--size {unknown[0]}: {name} has no size {unknown[0]!r}{suggest(unknown[0], known)}; "
                         f"its sizes: {', '.join(known) or 'none (all fixed in the diagram)'}")
    sizes.update(given)
    missing = [k for k in known if k not in sizes]
    if missing:
        raise UsageError(f"{name} needs a value for {', '.join(missing)}: give --size {missing[0]}=N")
    dtype = getattr(args, "dtype", None) or dtypes[0]
    if dtype not in dtypes:
        raise UsageError(f"--dtype {dtype}: {name} is drawn in {', '.join(dtypes)}")
    return {**{k: sizes[k] for k in known}, "dtype": dtype}


def diagram_families(args, spec) -> list[str]:
    """The registered families of the algorithm in each style `spec` runs (every style when None)."""
    from ..algorithms import family_for

    kernel = getattr(args, "kernel", "auto")
    styles = [kernel] if kernel in STYLE_NAMES else list(STYLE_NAMES)
    out = []
    for style in styles:
        if args.algo == USER_ALGO:
            user = user_diagram(args)
            fam = family_for(user.name, style, draw=user.draw, dtypes=user.dtypes)
        else:
            fam = family_for(args.algo, style)
        why = fam.gpu_problem(spec) if spec is not None else ""
        if why and kernel in STYLE_NAMES:
            raise UsageError(f"--kernel {style} cannot run on {spec.key}: {why}")
        if not why:
            out.append(fam.name)
    return out
