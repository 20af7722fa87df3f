"""The code's shape limits (issue 12): Python files at most 400 lines, functions at most 60 lines,
in every package. Generated and CUDA files are not Python and are not counted."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("diagrams", "iomodel", "kernels", "validation")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def _sources():
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_file_and_function_sizes(path):
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_FILE_LINES, f"{path.name}: {len(text.splitlines())} lines"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
            for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{path.name}: " + ", ".join(long)


def test_every_package_has_sources():
    for pkg in PACKAGES:
        assert list((ROOT / pkg).rglob("*.py")), pkg
