"""The static walk's rounds against the lpt walk's table for the window shapes of this record, on paper: each CTA's
load (a tile costs its chunks, kernels.sm90_schedule.tile_chunks, and LPT_TILE_OVERHEAD_CHUNKS) under the kernel's
snake rounds (tile_of_round: round k's CTA i takes tile k G + i, odd rounds reversed) and under lpt_order's table,
in sections of two heads (TileInfo's order: longest first within each); the share of the busiest CTA's time the
average CTA is busy.  No GPU: PYTHONPATH=. python3 <this file>  (-> rounds-sim.log)"""
from kernels.sm90_schedule import LPT_TILE_OVERHEAD_CHUNKS, lpt_order, tile_chunks
from kernels.window import Window

SHAPES = [  # (d, H, B, N, left, block_m, block_n): the launcher's picks on the H200
    (128, 16, 1, 32768, 1024, 128, 128), (128, 16, 1, 32768, 2048, 128, 128), (128, 16, 1, 32768, 4096, 128, 128),
    (128, 16, 1, 32768, 8192, 128, 176), (128, 16, 2, 16384, 2048, 128, 128), (128, 16, 2, 8192, 1024, 128, 128),
    (64, 32, 1, 32768, 4096, 192, 128), (64, 32, 1, 16384, 8192, 192, 128)]
CTAS, SECTIONS = 132, 2


def costs(s, block_m, block_n, window) -> list[int]:
    """Tile t's cost in TileInfo's order (sections of SECTIONS heads, m_block descending within each)."""
    chunks = tile_chunks(s, block_m, block_n, window)
    num_m, heads = len(chunks), s["B"] * s["H"]
    out = []
    for t in range(num_m * heads):
        base = (t // (SECTIONS * num_m)) * SECTIONS
        out.append(chunks[num_m - 1 - (t - base * num_m) // min(SECTIONS, heads - base)] + LPT_TILE_OVERHEAD_CHUNKS)
    return out


def busy_share(loads) -> float:
    return sum(loads) / len(loads) / max(loads)


def main():
    for d, H, B, N, left, bm, bn in SHAPES:
        s = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": True}
        cost = costs(s, bm, bn, Window(left, 0))
        rounds = [0] * CTAS
        for t, c in enumerate(cost):
            k, r = divmod(t, CTAS)
            rounds[CTAS - 1 - r if k % 2 else r] += c
        table = lpt_order(s, bm, bn, CTAS, SECTIONS, Window(left, 0))
        lpt = [sum(cost[table[k * CTAS + i]] for k in range(len(table) // CTAS) if table[k * CTAS + i] >= 0)
               for i in range(CTAS)]
        print(f"d{d} N{N} B{B} ({left}, 0) {bm}x{bn}: rounds {busy_share(rounds):.3f}  lpt table {busy_share(lpt):.3f}")


if __name__ == "__main__":
    main()
