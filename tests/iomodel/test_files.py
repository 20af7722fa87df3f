"""The one writer of every output (iomodel.files): atomic, never replaces what is not a regular file, every
failure one OutputError line naming the path; and the preflight the command lines run before any work."""

from __future__ import annotations

import errno
import os
import random
import socket
import stat
import string
from pathlib import Path

import pytest

from iomodel import files
from iomodel.files import OutputError, check_output, write_text_atomic

PICTURES = {".svg": "svg", ".html": "html"}
SEED = random.randrange(2**32)   # fresh inputs every run; the seed is in every failure message
RNG = random.Random(SEED)


def _text() -> str:
    """Random content, some of it outside ASCII, so the writer's encoding is exercised too (read back as
    bytes: text mode would turn a random carriage return into a newline)."""
    alphabet = string.printable + "äöü→∑π😀"
    return "".join(RNG.choice(alphabet) for _ in range(RNG.randrange(0, 4000)))


def _name(suffix: str = ".svg") -> str:
    return "".join(RNG.choice(string.ascii_letters + string.digits + "-_") for _ in range(RNG.randrange(1, 40))) + suffix


def _refused(path, match: str, **kw) -> str:
    """The preflight and the writer alone both refuse ``path`` with one line naming it."""
    with pytest.raises(OutputError, match=match) as pre:
        check_output(path, what="--out", **kw)
    with pytest.raises(OutputError, match=match) as low:
        write_text_atomic(path, _text())
    for msg in (str(pre.value), str(low.value)):
        assert "\n" not in msg and str(path) in msg, (SEED, msg)
    assert str(pre.value).startswith(f"--out {path}")
    return str(pre.value)


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_writes_atomically_and_keeps_the_file_mode(tmp_path):
    target = tmp_path / _name(".json")
    first, second = _text(), _text()
    assert write_text_atomic(target, first) == target
    assert target.read_bytes().decode("utf-8") == first, SEED
    target.chmod(0o640)
    write_text_atomic(target, second)
    assert target.read_bytes().decode("utf-8") == second, SEED
    assert stat.S_IMODE(target.stat().st_mode) == 0o640   # a rewrite keeps the permission bits
    assert _listing(tmp_path) == [target.name]             # no temp file left


def test_fifo_is_refused_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe.svg"
    os.mkfifo(fifo)
    assert "a named pipe (FIFO), not a regular file" in _refused(fifo, "named pipe")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert _listing(tmp_path) == ["pipe.svg"]


def test_directory_is_refused(tmp_path):
    folder = tmp_path / "out.svg"
    folder.mkdir()
    _refused(folder, "a directory, not a regular file; refusing to replace it")
    assert folder.is_dir() and _listing(folder) == []
    with pytest.raises(OutputError, match="names a folder"):
        check_output(f"{tmp_path}/sub/")


def test_device_is_refused():
    if not os.path.exists(os.devnull):
        pytest.skip("no /dev/null here")
    _refused(os.devnull, "a character device")


def test_socket_is_refused(tmp_path):
    path = tmp_path / "s.svg"
    if len(os.fsencode(path)) >= 100:
        pytest.skip("temp path too long for an AF_UNIX socket")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        _refused(path, "a socket")


def test_read_only_file_is_refused_even_for_root(tmp_path):
    """A rename replaces a file whatever its bits, so the writer honours them itself: the rule holds for
    root too (where the bits alone would stop nothing)."""
    ro = tmp_path / "ro.svg"
    ro.write_text("keep me\n")
    ro.chmod(0o444)
    _refused(ro, "read-only file")
    assert ro.read_text() == "keep me\n" and _listing(tmp_path) == ["ro.svg"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder whatever its bits")
def test_folder_without_write_permission_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        _refused(locked / "x.svg", "is not writable")
    finally:
        locked.chmod(0o755)


def test_symlink_to_a_regular_file_is_written_through(tmp_path):
    real = tmp_path / "real.svg"
    real.write_text("old\n")
    link = tmp_path / "link.svg"
    link.symlink_to(real)
    text = _text()
    out = check_output(link, PICTURES)
    assert out.format == "svg" and not out.stdout
    assert out.write(text) == link
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes().decode("utf-8") == text, SEED
    assert _listing(tmp_path) == ["link.svg", "real.svg"]


def test_symlink_to_a_directory_and_dangling_symlink_are_refused(tmp_path):
    (tmp_path / "adir").mkdir()
    dirlink = tmp_path / "dirlink.svg"
    dirlink.symlink_to(tmp_path / "adir")
    _refused(dirlink, "symbolic link to .*adir, a directory")
    dangling = tmp_path / "dangling.svg"
    dangling.symlink_to(tmp_path / "nowhere.svg")
    _refused(dangling, "which does not exist")
    assert dangling.is_symlink() and not (tmp_path / "nowhere.svg").exists()


def test_missing_parent_is_refused_unless_the_folder_is_owned(tmp_path):
    target = tmp_path / "missing" / "deeper" / _name()
    _refused(target, "does not exist")
    assert _listing(tmp_path) == []
    assert check_output(target, PICTURES, create_parent=True).create_parent
    assert _listing(tmp_path) == []    # the preflight creates nothing
    write_text_atomic(target, "x", create_parent=True)
    assert target.read_text() == "x"
    (tmp_path / "file").write_text("")
    _refused(tmp_path / "file" / "x.svg", "Not a directory")


def test_name_too_long(tmp_path):
    long = tmp_path / ("x" * 300 + ".svg")
    assert "file name too long (304 bytes" in _refused(long, "too long")
    assert _listing(tmp_path) == []
    # a name just under the limit still fits, although its temp file's name is longer
    fits = tmp_path / ("y" * 251 + ".svg")
    write_text_atomic(fits, "ok")
    assert fits.read_text() == "ok" and _listing(tmp_path) == [fits.name]


def test_dash_is_standard_output(capsys):
    text = _text()
    out = check_output("-", PICTURES, what="--out")
    assert out.stdout and out.format == "svg" and str(out) == "standard output"
    assert out.write(text) is None
    assert capsys.readouterr().out == text
    with pytest.raises(OutputError, match=r"^--out '-' \(standard output\) is not accepted here"):
        check_output("-", what="--out", stdout_ok=False)
    assert not Path("-").exists()


@pytest.mark.parametrize("name, message", [
    ("x.png", r"unknown suffix '\.png'; use \.svg, \.html"), ("x", "no suffix; use .svg, .html"),
    ("", r"^--out '': empty file name"), (".svg", "no suffix"),
])
def test_suffix_decides_the_format(tmp_path, name, message):
    with pytest.raises(OutputError, match=message):
        check_output(str(tmp_path / name) if name else name, PICTURES, what="--out")
    assert check_output(tmp_path / "PAGE.HTML", PICTURES).format == "html"
    assert check_output(tmp_path / "any.thing").format is None   # no formats: any suffix


@pytest.mark.parametrize("fail_in", ["fsync", "write"])
def test_full_disk_keeps_the_old_file(tmp_path, monkeypatch, fail_in):
    target = tmp_path / "results.json"
    old = _text()
    target.write_bytes(old.encode("utf-8"))

    def full(*_args, **_kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if fail_in == "fsync":
        monkeypatch.setattr(files.os, "fsync", full)
    else:
        monkeypatch.setattr(files.os, "replace", full)
    with pytest.raises(OutputError) as exc:
        check_output(target, what="--out").write(_text())
    msg = str(exc.value)
    assert msg == f"--out {target}: cannot write (No space left on device); the old file is unchanged", SEED
    assert target.read_bytes().decode("utf-8") == old, SEED
    assert _listing(tmp_path) == ["results.json"]
    with pytest.raises(OutputError, match="nothing written"):
        write_text_atomic(tmp_path / "new.json", "x")
    assert _listing(tmp_path) == ["results.json"]


def test_interrupt_mid_write_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    target.write_text("old")

    def interrupted(_fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(target, "new")
    assert target.read_text() == "old" and _listing(tmp_path) == ["r.json"]
