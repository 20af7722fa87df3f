"""The error boundary of the command lines (``python -m iomodel`` and ``python -m validation``): what a
person sees when a command cannot do what was asked, in one place for both.

The contract (docs/cli.md, "Errors and exit codes"):

* a mistake the user can make (a typed error the code raises, :func:`user_errors`) is one line on
  stderr, ``NAME: error: MESSAGE``, and exit status 2; so is every argument the parser refuses;
* Ctrl-C is one line, ``NAME: interrupted`` or the interrupt's own message when it says what was saved,
  and exit status 130 (128 + SIGINT, what a shell reports for a process Ctrl-C stopped);
* standard output closed early (``| head``) ends quietly with exit status 141 (128 + SIGPIPE, what a
  process killed by the closed pipe would report): the output was cut, so it is not a success;
* anything else is a bug in the project: its traceback, then one line asking for a report, exit 1.
  Only the typed errors are caught, so a KeyError or TypeError is never dressed up as bad input.

It also holds what both parsers share: one-line argument errors with "did you mean", help that shows
defaults and keeps examples as written, and the package version.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Callable

__all__ = ["UsageError", "EXIT_USAGE", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE", "EXIT_BUG", "user_errors",
           "run_main", "ArgParser", "HelpFormatter", "package_version"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
EXIT_BUG = 1
REPORT_REQUEST = ("this is a bug in iomodel, not in your input: please report it, with the command and the "
                  "traceback above, as an issue in the project's tracker")


class UsageError(ValueError):
    """A command line the tools cannot carry out as written (a flag the command does not use, values
    that contradict each other), in one line."""


def user_errors() -> tuple[type[BaseException], ...]:
    """The typed errors a user can cause; everything else is a bug.  Imported here, not at the top,
    so the boundary costs nothing until something fails."""
    from diagrams.core import DiagramError

    from .errors import ModelError
    from .files import OutputError
    from .hardware import HardwareError
    from .results import ResultsError
    return (UsageError, ModelError, HardwareError, DiagramError, OutputError, ResultsError)


def _say(name: str, text: str) -> None:
    print(f"{name}: {text}", file=sys.stderr, flush=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _stdout_gone() -> int:
    """Point stdout at /dev/null, so the interpreter's flush at exit does not raise a second
    BrokenPipeError into stderr."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no file descriptor (captured by a test): nothing to flush
        pass
    finally:
        os.close(devnull)
    return EXIT_BROKEN_PIPE


def run_main(name: str, body: Callable[[], int]) -> int:
    """Run a command line's ``body`` inside the boundary; its exit status."""
    try:
        code = body()
        sys.stdout.flush()  # a pipe closed early shows here, not at the interpreter's exit
        return code
    except user_errors() as exc:
        _say(name, f"error: {_first_line(exc)}")
        return EXIT_USAGE
    except KeyboardInterrupt as exc:  # the sweep's interrupt says what it saved; a plain one says nothing
        _say(name, _first_line(exc) if str(exc).strip() else "interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _stdout_gone()
    except Exception:  # noqa: BLE001 - a bug: shown whole, then the request to report it
        traceback.print_exc()
        _say(name, REPORT_REQUEST)
        return EXIT_BUG


# --------------------------------------------------------------------------- the parsers' shared conventions

class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows every option's default and prints epilogs (the examples) as written.  An option
    whose default is None states its own default in its text (it depends on other options)."""

    def _get_help_string(self, action):
        if action.default is None or isinstance(action.default, bool) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class ArgParser(argparse.ArgumentParser):
    """argparse that raises each refused argument as one UsageError (the boundary prints it: no usage
    block), says "did you mean" for a mistyped choice, command or option, and names the commands
    that take an option this command does not."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(message)

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            from .names import suggest

            known = [str(c) for c in action.choices]
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}{suggest(value, known)}; choose from {', '.join(known)}")

    def parse_args(self, args=None, namespace=None):
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}{self._unrecognized_hint(extra, ns)}")
        return ns

    def _unrecognized_hint(self, extra: list[str], ns) -> str:
        """For the first unknown option: the command's own option it is close to, or the commands
        that do take it."""
        option = next((a.split("=", 1)[0] for a in extra if a.startswith("--")), None)
        commands = _commands(self)
        if option is None or not commands:
            return ""
        cmd = getattr(ns, "cmd", None)
        own = _option_strings(commands[cmd]) if cmd in commands else _option_strings(self)
        close = _close_option(option, own)
        if close:
            return f" (did you mean {close}?)"
        others = [name for name, p in commands.items() if name != cmd and option in _option_strings(p)]
        if cmd and others:
            return f" ({cmd} takes no {option}; {', '.join(others)} {'does' if len(others) == 1 else 'do'})"
        return ""


def _close_option(option: str, known: list[str]) -> str | None:
    """The long option closest to `option`, compared without the dashes every option shares (with
    them any two look alike)."""
    from .names import closest

    return closest(option, [o for o in known if o.startswith("--")], normalize=lambda o: o.lstrip("-"))


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subcommands nowhere public
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [s for action in parser._actions if action.help != argparse.SUPPRESS for s in action.option_strings]


def package_version() -> str:
    """The installed package's version; in a checkout that was never installed, pyproject's."""
    from importlib import metadata

    try:
        return metadata.version("iomodel")
    except metadata.PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    try:
        found = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(encoding="utf-8"), re.MULTILINE)
    except OSError:
        found = None
    return found.group(1) if found else "unknown"
