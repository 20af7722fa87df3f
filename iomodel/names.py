"""The one "did you mean": the known name closest to what a user typed (difflib), for GPU, family,
command, option, choice and calibration names alike."""
from __future__ import annotations

import difflib
from typing import Callable, Iterable


def closest(name: str, known: Iterable[str], normalize: Callable[[str], str] = str.lower) -> str | None:
    """The entry of `known` closest to `name` when compared through `normalize` (case does not count by
    default: a shift key held too long is the commonest typo of all), or None when none is close."""
    by_norm: dict[str, str] = {}
    for k in known:
        by_norm.setdefault(normalize(str(k)), str(k))
    close = difflib.get_close_matches(normalize(str(name)), list(by_norm), n=1, cutoff=0.6)
    return by_norm[close[0]] if close else None


def suggest(name: str, known: Iterable[str]) -> str:
    """' (did you mean X?)' when `name` is close to one of `known`, else ''."""
    close = closest(name, known)
    return f" (did you mean {close}?)" if close else ""
