"""Where global traffic is served: the L2 reuse model that splits derived traffic into L2 and HBM bytes.

The derivation counts every tile a block fetches from global memory (its `global->` transfers): that
is the traffic the L2 serves. How much of it reaches HBM depends on who else needs the same tile
while it is still in L2. The model (docs/derivation.md, "Traffic"):

* Blocks run in waves of `concurrent` blocks (SMs x resident blocks per SM), in grid order: the last
  block-level group varies fastest, as blockIdx.x does (the derivation keeps the groups in the order
  the relabelings applied them). Blocks of one wave that need the same tile of an input (the same
  index along every grouped axis the input carries) fetch it from HBM once; the others hit in L2.
  This is the argument behind grouped (swizzled) block orders in tiled GEMMs (CUTLASS's threadblock
  swizzle, Triton's grouped ordering): a wave spanning r block-rows and c block-columns reads r A-tiles
  and c B-tiles from HBM, not one pair per block.
* Across waves, a tile is reused by the next block that needs it, `distance` blocks later in grid
  order (the stride of the fastest grouped axis the input does not carry). Between the two uses the
  blocks in flight touch the distinct tiles of every input over `distance + concurrent` blocks; when
  that footprint fits in L2 (an LRU stack-distance argument), the input is read from HBM once.
* A block that re-reads its own tiles (once per chunk of an outer stream) finds them in L2 when what
  the wave touches between two reads, its footprint over the re-read count, fits.
* An input small enough to stay in L2 on its own (at most half the L2) is read from HBM once.
* An input is never read from HBM less than once (its compulsory bytes), nor more than its traffic.
* Outputs and partial results go to HBM in full: writes are not merged across blocks. An output
  accumulated with atomic adds (read-modify-write, performed in L2) is treated like an input for its
  reads, and its writes reach HBM as often as its reads do.
* Re-reads of multi-pass operations are left to the derivation's span rule (`reread_bytes`).

Everything here is numpy over configurations; the inputs are evaluated expressions of KernelCosts.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

L2_RESIDENT_FRACTION = 0.5   # an input at most this fraction of L2 stays there across waves


def distinct_tiles(counts: Sequence[np.ndarray], carried: Sequence[bool], concurrent: np.ndarray) -> np.ndarray:
    """Distinct tiles of an input among `concurrent` consecutive blocks of the grid: along each grouped
    axis it carries, the number of that axis's indices a window of `concurrent` blocks spans (the
    fastest axis first; an axis of stride s sees concurrent / s indices, at least one, at most all)."""
    stride = np.ones_like(concurrent, dtype=np.float64)
    distinct = np.ones_like(concurrent, dtype=np.float64)
    for count, carries in zip(reversed(list(counts)), reversed(list(carried))):
        span = np.clip(concurrent / stride, 1.0, count)
        if carries:
            distinct = distinct * span
        stride = stride * count
    return distinct


def reuse_distance(counts: Sequence[np.ndarray], carried: Sequence[bool]) -> np.ndarray:
    """Blocks between two uses of one tile of an input, in grid order: the stride of the fastest grouped
    axis it does not carry (infinite when it carries them all: no block shares its tiles)."""
    stride = np.ones_like(np.asarray(counts[0], dtype=np.float64)) if counts else np.float64(1.0)
    for count, carries in zip(reversed(list(counts)), reversed(list(carried))):
        if not carries:
            return stride
        stride = stride * count
    return np.full_like(stride, np.inf)


def hbm_bytes(v: Mapping[str, np.ndarray], inputs: Sequence[tuple[str, Sequence[bool], int]],
              grid_keys: Sequence[str], concurrent: np.ndarray, l2_bytes: float,
              accumulated: frozenset | set = frozenset()) -> tuple[np.ndarray, np.ndarray]:
    """(HBM bytes of the inputs' first passes, global bytes that are not input reads: outputs, partials,
    read-modify-write). `v` holds `in_traffic:<x>` (every pass), `in_once:<x>` and the grid counts
    `grid_keys`; `inputs` are (name, which grid axes it carries, passes of its consumer)."""
    counts = [v[k] for k in grid_keys]
    blocks = np.maximum(v["blocks"], 1.0)
    window = np.maximum(np.minimum(concurrent, blocks), 1.0)
    first = {name: v[f"in_traffic:{name}"] / passes for name, _, passes in inputs}

    def footprint(n_blocks):
        """Bytes the inputs' distinct tiles over `n_blocks` consecutive blocks occupy."""
        n = np.minimum(n_blocks, blocks)
        return sum(np.minimum(distinct_tiles(counts, carried, n), n) * first[name] / blocks
                   for name, carried, _ in inputs)

    total = np.zeros_like(blocks)
    read = np.zeros_like(blocks)
    for name, carried, _ in inputs:
        traffic, once = first[name], v[f"in_once:{name}"]
        share = np.minimum(distinct_tiles(counts, carried, window) / window, 1.0)
        dist = reuse_distance(counts, carried)
        shared = np.isfinite(dist)
        reused = shared & (footprint(np.where(shared, dist, 0) + window) <= l2_bytes)
        # an input no two blocks share may still be re-read by its own block (once per chunk of an outer
        # stream): between two reads the wave touches 1/rereads of its whole footprint
        rereads = np.maximum(traffic / np.maximum(once, 1.0), 1.0)
        reused = reused | (~shared & (rereads > 1) & (footprint(window) / rereads <= l2_bytes))
        reused = reused | (once <= L2_RESIDENT_FRACTION * l2_bytes)
        hbm = np.where(reused, once, np.maximum(once, traffic * share))
        # an atomic add reads and writes the same bytes: both halves meet (or miss) in L2 together
        both = 2.0 if name in accumulated else 1.0
        total = total + both * np.minimum(hbm, np.maximum(traffic, once))
        read = read + both * v[f"in_traffic:{name}"]
    return total, np.maximum(v["global_bytes"] - read, 0.0)
