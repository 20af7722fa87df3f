"""The error boundary of both command lines (iomodel.boundary): one line and exit 2 for a user's mistake,
one line and 130 for Ctrl-C, quiet 141 for a closed pipe, a traceback and a report request for a bug."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from diagrams.core import DiagramError
from iomodel import boundary
from iomodel.boundary import UsageError, run_main
from iomodel.cli import main
from iomodel.errors import ModelError
from iomodel.files import OutputError
from iomodel.hardware import HardwareError
from iomodel.results import ResultsError

REPO = Path(__file__).resolve().parents[2]
RUN11 = str(REPO / "validation" / "results" / "h100-sxm-2026-11-22-run11.json")


def _raise(exc):
    def body() -> int:
        raise exc
    return body


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


@pytest.mark.parametrize("exc", [UsageError("bad flag"), ModelError("bad shape\nsecond line"),
                                 HardwareError("bad spec"), DiagramError("bad diagram"),
                                 OutputError("bad path"), ResultsError("bad file")])
def test_typed_error_is_one_line_exit_2(capsys, exc):
    assert run_main("iomodel", _raise(exc)) == 2
    out, err = capsys.readouterr()
    assert out == "" and _lines(err) == [f"iomodel: error: {str(exc).splitlines()[0]}"]


def test_plain_interrupt_says_interrupted(capsys):
    assert run_main("validation", _raise(KeyboardInterrupt())) == 130
    assert _lines(capsys.readouterr().err) == ["validation: interrupted"]


def test_interrupt_with_a_message_says_what_was_saved(capsys):
    class Saved(KeyboardInterrupt):
        pass
    msg = "interrupted: 37 of 154 rows saved to run.json (marked incomplete)"
    assert run_main("validation", _raise(Saved(msg))) == 130
    assert _lines(capsys.readouterr().err) == [f"validation: {msg}"]


def test_broken_pipe_is_quiet(capsys):
    assert run_main("iomodel", _raise(BrokenPipeError())) == boundary.EXIT_BROKEN_PIPE == 141
    assert capsys.readouterr().err == ""


def test_closed_pipe_on_a_real_command():
    """`iomodel validate --json ... | head -1`: the reader goes away after one line; no second error at exit."""
    proc = subprocess.Popen([sys.executable, "-m", "iomodel", "validate", "--stored", "--json", RUN11],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == ""


@pytest.mark.parametrize("bug", [KeyError("shape"), TypeError("unsupported operand"), AttributeError("x")])
def test_a_bug_is_a_traceback_and_a_report_request(monkeypatch, capsys, bug):
    """A bug raised inside a command is not dressed up as bad input."""
    from iomodel.cli import parser

    monkeypatch.setattr(parser, "cmd_gpus", _raise_args(bug))
    code = main(["gpus"])
    err = capsys.readouterr().err
    assert code == 1 and code != 2
    assert "Traceback" in err and type(bug).__name__ in err
    assert _lines(err)[-1].startswith("iomodel: this is a bug in iomodel") and "report" in _lines(err)[-1]


def _raise_args(exc):
    def command(args) -> int:
        raise exc
    return command


def test_interrupt_inside_a_command(monkeypatch, capsys):
    from iomodel.cli import parser

    monkeypatch.setattr(parser, "cmd_gpus", _raise_args(KeyboardInterrupt()))
    assert main(["gpus"]) == 130
    assert _lines(capsys.readouterr().err) == ["iomodel: interrupted"]


def test_argument_errors_are_one_line_without_usage(capsys):
    assert main(["predcit"]) == 2
    err = capsys.readouterr().err
    assert _lines(err) == [err.strip()] and "usage:" not in err and "did you mean predict?" in err


def test_success_returns_the_command_status(capsys):
    assert run_main("iomodel", lambda: 0) == 0
    assert capsys.readouterr().err == ""
