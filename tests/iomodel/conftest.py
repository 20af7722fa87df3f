"""Fixtures of the model's tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def cli(capsys):
    """``cli(*argv)`` runs ``python -m iomodel`` in process: (exit code, stdout, stderr)."""
    from iomodel.cli import main

    def run(*argv):
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run
