"""Finding a GPU spec: by key, device alias, TOML path or torch device name.

Shipped specs live in ``iomodel/hardware_data/<key>.toml`` and are cached by key; a user's
file is cached by path and modification time, so an edited file is read again.
"""

from __future__ import annotations

import os
from pathlib import Path

from .facts import HardwareError
from .gpu_spec import GpuSpec
from .spec_schema import parse_spec
from ..names import closest
from .toml_io import read_toml

__all__ = ["DATA_DIR", "UnknownGpuError", "list_specs", "load_spec", "spec_for_device", "resolve_gpu"]

DATA_DIR = Path(__file__).resolve().parent.parent / "hardware_data"


class UnknownGpuError(HardwareError):
    """A name that is neither a shipped key, an alias nor a spec file."""


_SPEC_CACHE: dict[str, GpuSpec] = {}
_PATH_CACHE: dict[tuple[str, int], GpuSpec] = {}


def list_specs() -> list[str]:
    """Keys of the GPU specs shipped with iomodel, sorted."""
    return sorted(p.stem for p in DATA_DIR.glob("*.toml"))


def _norm(name: str) -> str:
    """How names are compared: case, '_' versus ' ' and runs of whitespace do not matter."""
    return " ".join(name.strip().lower().replace("_", " ").split())


def _load_builtin(key: str) -> GpuSpec:
    spec = _SPEC_CACHE.get(key)
    if spec is None:
        path = DATA_DIR / f"{key}.toml"
        spec = parse_spec(read_toml(path), path.name, path)
        if spec.key != key:
            raise HardwareError(
                f"{path.name}: field 'key' is {spec.key!r} but the file is named {key}.toml"
            )
        _SPEC_CACHE[key] = spec
    return spec


def _load_path(text: str) -> GpuSpec:
    p = Path(text).expanduser()
    if not os.path.lexists(p):
        raise HardwareError(f"{text}: no such file")
    if not p.is_file():
        read_toml(p)  # says what it is instead (a folder, a named pipe, a dangling link)
    st = p.stat()
    ck = (str(p.resolve()), st.st_mtime_ns)
    spec = _PATH_CACHE.get(ck)
    if spec is None:
        spec = parse_spec(read_toml(p), p.name, p.resolve())
        _PATH_CACHE[ck] = spec
    return spec


def _alias_index() -> dict[str, str]:
    """Normalized key, product name and alias -> key, over the shipped specs."""
    index: dict[str, str] = {}
    for key in list_specs():
        spec = _load_builtin(key)
        for alias in (spec.key, spec.name, *spec.aliases):
            index.setdefault(_norm(alias), key)
    return index


def load_spec(name_or_path: str | os.PathLike | GpuSpec) -> GpuSpec:
    """Load a GPU spec by key (``"h100-sxm"``), device alias or TOML path.

    A :class:`GpuSpec` passes through unchanged.
    """
    if isinstance(name_or_path, GpuSpec):
        return name_or_path
    text = os.fspath(name_or_path)
    if text in list_specs():
        return _load_builtin(text)
    if text.endswith(".toml") or os.sep in text or Path(text).expanduser().is_file():
        return _load_path(text)
    key = _alias_index().get(_norm(text))
    if key is not None:
        return _load_builtin(key)
    raise UnknownGpuError(f"unknown GPU {text!r}: known are {', '.join(list_specs())}")


def spec_for_device(device_name: str) -> GpuSpec:
    """The shipped spec whose aliases include ``device_name`` (as torch reports it)."""
    key = _alias_index().get(_norm(device_name))
    if key is None:
        known = [alias for k in list_specs() for alias in _load_builtin(k).aliases]
        raise UnknownGpuError(
            f"unknown GPU device {device_name!r}: known devices are {', '.join(known)}; "
            f"pass --gpu KEY or a TOML path"
        )
    return _load_builtin(key)


def resolve_gpu(gpu: str | os.PathLike | GpuSpec) -> GpuSpec:
    """The one way a tool turns what a user typed into a spec.

    A :class:`GpuSpec` passes through; otherwise ``gpu`` is tried as a spec key, alias or
    TOML path (:func:`load_spec`; a torch device name is an alias).
    An unknown name raises :class:`UnknownGpuError` with one line listing the known keys and,
    when one is close, a "did you mean" suggestion.  A spec file that exists but is broken
    raises its own error (naming the file and field).
    """
    if isinstance(gpu, GpuSpec):
        return gpu
    text = os.fspath(gpu)
    try:
        return load_spec(text)  # keys, aliases (torch's device names among them) and paths
    except UnknownGpuError:
        raise UnknownGpuError(_unknown_gpu_message(text)) from None


def _unknown_gpu_message(text: str) -> str:
    message = f"unknown GPU {text!r}: known are {', '.join(list_specs())}"
    # a short name ("h100") that starts several keys is ambiguous: name them all, keys first
    prefixed = [k for k in list_specs() if _norm(text) and _norm(k).startswith(_norm(text))]
    if prefixed:
        return message + f"; did you mean {' or '.join(repr(k) for k in prefixed)}?"
    # else a key or alias exactly as written in the spec, matched as names are compared
    names = [name for key in list_specs() for name in (key, *_load_builtin(key).aliases)]
    close = closest(text, names, normalize=_norm)
    return message + (f"; did you mean {close!r}?" if close else "")
