"""Writing the files the tools produce (results JSON, calibrations, pictures, pages): one writer for
all of them, and the check a command line runs on an output path before any work starts.

The rules (docs/cli.md, "Files the tools write"):

* **Atomic.**  The text goes to a temp file in the target's folder, is synced, then ``os.replace``d
  over the target, so a reader (or a run interrupted mid-write) never sees half a file, and a failed
  write (disk full) leaves the old file whole.
* **Only regular files are replaced.**  A directory, a device, a named pipe, a socket, or a file
  whose permission bits grant no write (``chmod 444``, refused even for root, because the rename
  would replace it whatever its bits) is refused with an :class:`OutputError`.
* **A symbolic link is written through**: when it points to a regular file, that file is replaced
  atomically (the temp file goes beside the target, not beside the link) and the link stays as it
  is.  A link to anything else, or a dangling one, is refused.
* **Folders are not created silently**: a missing folder is refused unless the caller owns it
  (``create_parent=True``, e.g. the harness's default results folder).
* Every ``OSError`` of a write (permission, name too long, disk full) becomes one
  :class:`OutputError` line naming the path.

``check_output`` applies these rules (and the choice of format by suffix) to a path without touching
anything; ``write_text_atomic`` applies them again when it writes, so a caller that skips the check
still cannot clobber a device or a directory.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

__all__ = ["STDOUT", "OutputError", "Output", "check_output", "write_text_atomic", "not_regular"]

#: the output name that means standard output
STDOUT = "-"

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_NAME_MAX = 255  # when the file system does not say (os.pathconf): the common limit


class OutputError(ValueError):
    """A path the user asked a tool to write cannot be written as asked (one line naming it)."""


def not_regular(mode: int) -> str | None:
    """What a file of ``mode`` (an ``os.stat`` mode) is when it is not a regular file; None when it is."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _check_folder(p: Path, create_parent: bool) -> None:
    """The folder a new file ``p`` goes in exists (or, when the caller owns it, its nearest existing
    ancestor does), is a folder and can be written; and ``p``'s name fits the file system."""
    folder = p.parent
    if create_parent:
        while not os.path.lexists(folder) and folder != folder.parent:
            folder = folder.parent
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        raise OutputError(f"{p}: folder {folder} does not exist (create it first)") from None
    except OSError as exc:
        raise OutputError(f"{p}: cannot use folder {folder} ({_reason(exc)})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{p}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{p}: folder {folder} is not writable")
    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = _NAME_MAX
    if len(os.fsencode(p.name)) > name_max:
        raise OutputError(f"{p}: file name too long ({len(os.fsencode(p.name))} bytes; the limit is {name_max})")


def _replaceable(p: Path, shown: Path) -> None:
    """``p`` (an existing file, named ``shown`` in errors) is a regular file the user may write."""
    st = os.stat(p)
    kind = not_regular(st.st_mode)
    if kind is not None:
        via = f"symbolic link to {p}, " if p != shown else ""
        raise OutputError(f"{shown}: {via}{kind}, not a regular file; refusing to replace it")
    # the rename would replace the file whatever its bits: honour them ourselves
    if not st.st_mode & 0o222 or not os.access(p, os.W_OK):
        raise OutputError(f"{shown}: read-only file; refusing to replace it")
    _check_folder(p, create_parent=False)


def _target(p: Path, create_parent: bool) -> Path:
    """The file a write to ``p`` creates or replaces: ``p``, or the regular file a link at ``p``
    points to.  Raises OutputError for every path the rules refuse; touches nothing."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        _check_folder(p, create_parent)
        return p
    except OSError as exc:  # a component that is a file, a name too long, a folder not searchable
        if exc.errno == errno.ENAMETOOLONG:
            _check_folder(p, create_parent)  # says which name is too long, and by how much
        raise OutputError(f"{p}: cannot write ({_reason(exc)})") from None
    target = Path(os.path.realpath(p)) if stat.S_ISLNK(st.st_mode) else p
    if target != p and not os.path.exists(target):
        raise OutputError(f"{p}: symbolic link to {target}, which does not exist; refusing to follow it")
    _replaceable(target, p)
    return target


def _temp_name(target: Path) -> Path:
    # a long target name must not make the temp name too long: keep its first 64 bytes
    stem = os.fsencode(target.name)[:64].decode(errors="ignore")
    return target.with_name(f".{stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def write_text_atomic(path: str | os.PathLike, text: str, *, create_parent: bool = False) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a synced temp file in the same folder and
    ``os.replace``; returns ``path``.  Refuses what the module's rules refuse (OutputError naming the
    path); on any failure the old file stays whole and the temp file is removed.  ``create_parent``:
    the folder belongs to the tools and may be created."""
    p = Path(path)
    target = _target(p, create_parent)
    old = os.stat(target) if os.path.lexists(target) else None
    tmp = _temp_name(target)
    try:
        if create_parent:
            target.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if old is not None:  # a rewrite keeps the file's permission bits
            os.chmod(tmp, stat.S_IMODE(old.st_mode))
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            kept = "the old file is unchanged" if old is not None else "nothing written"
            raise OutputError(f"{p}: cannot write ({_reason(exc)}); {kept}") from None
        raise
    return p


@dataclass(frozen=True)
class Output:
    """A checked output: a file (``path``) or standard output (``path`` None), and its format."""

    path: Path | None
    format: str | None = None
    what: str = ""
    create_parent: bool = False

    @property
    def stdout(self) -> bool:
        return self.path is None

    def __str__(self) -> str:
        return "standard output" if self.path is None else str(self.path)

    def write(self, text: str) -> Path | None:
        """Write ``text`` to standard output or (atomically) to the file; the file's path, or None."""
        if self.path is None:
            sys.stdout.write(text)
            sys.stdout.flush()
            return None
        try:
            return write_text_atomic(self.path, text, create_parent=self.create_parent)
        except OutputError as exc:
            raise OutputError(_named(self.what, str(exc))) from None


def _named(what: str, message: str) -> str:
    return f"{what} {message}" if what else message


def _format(p: Path, formats: Mapping[str, str]) -> str:
    """The format the suffix of ``p`` names; an unknown or missing suffix is refused naming the allowed."""
    by_suffix = {s.lower(): fmt for s, fmt in formats.items()}
    fmt = by_suffix.get(p.suffix.lower())
    if fmt is None:
        got = f"unknown suffix {p.suffix!r}" if p.suffix else "no suffix"
        raise OutputError(f"{p}: {got}; use {', '.join(formats)}")
    return fmt


def check_output(path: str | os.PathLike | None, formats: Mapping[str, str] | None = None, *, what: str = "",
                 stdout_ok: bool = True, create_parent: bool = False) -> Output:
    """Check an output path before any work starts and say how it will be written; touches nothing.

    ``formats``: suffix -> format name (``{".svg": "svg", ".html": "html"}``); the suffix decides
    ``.format`` (case does not matter) and any other suffix is refused; standard output gets the
    first format.  ``-`` means standard output when ``stdout_ok``.  ``what`` (``"--out"``) starts
    every error line.  Raises :class:`OutputError`."""
    text = "" if path is None else os.fspath(path)
    try:
        if text == STDOUT:
            if not stdout_ok:
                raise OutputError("'-' (standard output) is not accepted here; give a file name")
            return Output(None, next(iter(formats.values()), None) if formats else None, what)
        if not text.strip():
            raise OutputError("'': empty file name")
        if text.endswith(("/", os.sep)):
            raise OutputError(f"{text}: names a folder (ends in '/'); give a file name")
        p = Path(text)
        fmt = _format(p, formats) if formats is not None else None
        _target(p, create_parent)
    except OutputError as exc:
        raise OutputError(_named(what, str(exc))) from None
    return Output(p, fmt, what, create_parent)
