"""`python -m iomodel` / `iomodel`: predict, tiles, pseudocode, draw, roofline, validate, gpus.

Modules: ``parser`` (the commands and their options), ``problem`` (the problem options, the rules of
which options a command and algorithm use, the calibration choice), ``predict`` (predict, tiles),
``pictures`` (pseudocode, draw, roofline), ``reports`` (validate, gpus, JSON output).  Errors go through
:mod:`iomodel.boundary`: a user's mistake is one line and exit status 2 (docs/cli.md).
"""
from __future__ import annotations

import sys

from ..boundary import UsageError, run_main
from .parser import build_parser

__all__ = ["main", "build_parser", "UsageError"]


def main(argv=None) -> int:
    """The command line's exit status (0 success, 2 a user error, 130 interrupted, 141 pipe closed)."""
    def body() -> int:
        args = build_parser().parse_args(argv)
        return args.func(args)
    return run_main("iomodel", body)


if __name__ == "__main__":
    sys.exit(main())
