"""Sympy helpers: the masked-tile counter and vectorized evaluation of derived expressions."""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import sympy as sp


def _ceil_div(a, b):
    return -(-a // b)


def triangle_tiles_numeric(rows, row_tile, col_chunk, cols, offset):
    """Count (row tile, column chunk) pairs holding at least one live point of col <= row + offset.

    Row tile i covers rows [i*row_tile, min((i+1)*row_tile, rows)); its last row sees columns up to
    row + offset, so it visits ceil((last_row + 1 + offset) / col_chunk) chunks, clipped to [0, chunks].
    Vectorized over numpy arrays of any broadcastable shapes.
    """
    rows, row_tile, col_chunk, cols, offset = (np.asarray(x, dtype=np.int64) for x in
                                               (rows, row_tile, col_chunk, cols, offset))
    tiles = _ceil_div(rows, row_tile)
    chunks = _ceil_div(cols, col_chunk)
    shape = np.broadcast(rows, row_tile, col_chunk, cols, offset).shape
    total = np.zeros(shape, dtype=np.int64)
    for i in range(int(np.max(tiles))):
        end = np.minimum((i + 1) * row_tile, rows)
        visited = np.clip(_ceil_div(end + offset, col_chunk), 0, chunks)
        total = total + np.where(i < tiles, visited, 0)
    return total


class TriangleTiles(sp.Function):
    """TriangleTiles(rows, row_tile, col_chunk, cols, offset): tile pairs a triangular mask keeps.

    Stays symbolic while any argument is a symbol; with numbers it evaluates exactly.
    Its leading term is rows*cols/(2*row_tile*col_chunk) when offset = cols - rows = 0.
    """
    nargs = 5

    @classmethod
    def eval(cls, rows, row_tile, col_chunk, cols, offset):
        args = (rows, row_tile, col_chunk, cols, offset)
        if all(a.is_Integer for a in args):
            return sp.Integer(int(triangle_tiles_numeric(*[int(a) for a in args])))
        return None


def band_tiles_numeric(rows, row_tile, col_chunk, cols, lower, upper):
    """Count (row tile, column chunk) pairs holding at least one live point of row + lower <= col <= row + upper.

    Row r sees columns [max(0, r + lower), min(cols - 1, r + upper)]; both ends grow with r and the
    ranges of consecutive live rows touch, so a row tile sees one contiguous range, from its first live
    row's lower end to its last live row's upper end. Live rows: r >= -upper and r <= cols - 1 - lower.
    Vectorized over numpy arrays of any broadcastable shapes.
    """
    rows, row_tile, col_chunk, cols, lower, upper = (np.asarray(x, dtype=np.int64) for x in
                                                     (rows, row_tile, col_chunk, cols, lower, upper))
    tiles = _ceil_div(rows, row_tile)
    shape = np.broadcast(rows, row_tile, col_chunk, cols, lower, upper).shape
    total = np.zeros(shape, dtype=np.int64)
    for i in range(int(np.max(tiles))):
        first = np.maximum(i * row_tile, -upper)
        last = np.minimum(np.minimum((i + 1) * row_tile, rows) - 1, cols - 1 - lower)
        lo = np.maximum(first + lower, 0)
        hi = np.minimum(last + upper, cols - 1)
        live = (i < tiles) & (first <= last) & (lo <= hi) & (lower <= upper)
        total = total + np.where(live, hi // col_chunk - lo // col_chunk + 1, 0)
    return total


class BandTiles(sp.Function):
    """BandTiles(rows, row_tile, col_chunk, cols, lower, upper): tile pairs a band mask keeps.

    Symbolic while any argument is a symbol; exact with numbers. Its leading term, for a band of
    width W much wider than the tiles, is rows*W/(row_tile*col_chunk)."""
    nargs = 6

    @classmethod
    def eval(cls, rows, row_tile, col_chunk, cols, lower, upper):
        args = (rows, row_tile, col_chunk, cols, lower, upper)
        if all(a.is_Integer for a in args):
            return sp.Integer(int(band_tiles_numeric(*[int(a) for a in args])))
        return None


def mask_pairs(rows, row_tile, col_chunk, cols, lower, upper) -> sp.Expr:
    """(row tile, column chunk) pairs of a band mask holding a live point; `lower`/`upper` None: unbounded.
    A mask with only an upper bound is a triangle (`TriangleTiles`)."""
    if lower is None:
        return TriangleTiles(rows, row_tile, col_chunk, cols, upper)
    return BandTiles(rows, row_tile, col_chunk, cols, lower, cols if upper is None else upper)


NUMERIC_MODULES = [{"TriangleTiles": triangle_tiles_numeric, "BandTiles": band_tiles_numeric, "ceiling": np.ceil, "Max": np.maximum,
                    "Min": np.minimum}, "numpy"]


def sym(name: str) -> sp.Symbol:
    return sp.Symbol(name, positive=True, integer=True)


def free_names(exprs: Iterable[sp.Expr]) -> set[str]:
    return {s.name for e in exprs for s in sp.sympify(e).free_symbols}


def lambdify(exprs: Mapping[str, sp.Expr]):
    """One numpy function for all named expressions, common subexpressions (mask counts) evaluated once.
    Returns the symbol names it takes (in order), the keys of its results (in order) and the function."""
    names = sorted(free_names(exprs.values()))
    keys = list(exprs)
    fn = sp.lambdify([sym(n) for n in names], [sp.sympify(exprs[k]) for k in keys], modules=NUMERIC_MODULES, cse=True)
    return names, keys, fn


def evaluate(exprs: Mapping[str, sp.Expr], values: Mapping[str, object]) -> dict[str, np.ndarray]:
    """Evaluate named expressions on numpy arrays of symbol values (vectorized lambdify)."""
    names, keys, fn = lambdify(exprs)
    missing = [n for n in names if n not in values]
    if missing:
        raise KeyError(f"no value for {', '.join(missing)}")
    vals = fn(*[np.asarray(values[n]) for n in names])
    return {k: np.asarray(v, dtype=float) for k, v in zip(keys, vals)}
