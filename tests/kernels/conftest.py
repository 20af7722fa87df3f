"""Fixtures of the kernel tests."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def kernels_debug():
    """The kernels' debug mode for a whole module of GPU tests: NaN-poisoned outputs, a synchronize and
    error check after every launch."""
    from kernels.runtime import debugging

    with debugging():
        yield
