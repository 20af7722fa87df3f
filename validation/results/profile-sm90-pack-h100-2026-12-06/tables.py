"""This record's tables, no GPU: each probe run's A/B pairs (the untagged build's time over the tagged one's: above 1
it is the slower; untagged is the new packing in pack, pack96 and chains, the patch's stale test in stale, the shipped
kernel in rowstale) and, from ncu/sass/, the d = 32 loop's warp stall samples by phase, ours beside FlashAttention-4's.
From the repository root: python3 validation/results/profile-sm90-pack-h100-2026-12-06/tables.py"""
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "profile-sm90-softmax-h100-2026-12-06"))
import sass_ops  # noqa: E402


def pairs(path: str) -> list[str]:
    """Per shape and tile: the untagged build's median over the tagged one's (tags " late", " ch2", " ch4", " row")."""
    rows = json.load(open(path))["rows"]
    med = {(r["d"], r["N"], r["causal"], r["impl"]): r["median_ms"] for r in rows if "median_ms" in r}
    out = []
    for (d, n, causal, impl), ms in med.items():
        for tag in (" late", " ch2", " ch4", " row"):
            other = med.get((d, n, causal, impl + tag))
            if other:
                out.append(f"  d{d} N{n}{' causal' if causal else ''} {impl}: untagged/{tag.strip()} {ms / other:.3f}")
    return out


def phases(path: str) -> dict:
    """The steady loop's (the most executed MUFU count's rows) samples: before the S product, its issue with P V's, the
    wait on S, the row maxima, the exponentials, and what follows the last one."""
    rs = sass_ops.rows(path)
    n = max(sass_ops.count(r, "Instructions Executed") for r in rs if "MUFU.EX2" in r["Source"])
    rs = [r for r in rs if sass_ops.count(r, "Instructions Executed") == n]
    last = max(i for i, r in enumerate(rs) if "MUFU" in r["Source"])
    got, state = dict.fromkeys(("pre-S", "issue", "S wait", "max", "exp", "tail"), 0), "pre-S"
    for i, r in enumerate(rs):
        src = r["Source"]
        if state == "pre-S" and "HGMMA" in src:
            state = "issue"
        if "DEPBAR.LE gsb0, 0x1" in src:
            state = "S wait"
        elif state == "S wait" and "FMNMX" in src:
            state = "max"
        if state == "max" and "FFMA" in src and "UR" in src:
            state = "exp"
        if state == "exp" and i > last:
            state = "tail"
        got[state] += sass_ops.count(r, "Warp Stall Sampling (All Samples)")
    return got


def main():
    for path in sorted(glob.glob(os.path.join(HERE, "*-run*.json"))):
        lines = pairs(path)
        if lines:
            print(os.path.basename(path))
            print("\n".join(lines))
    old = os.path.join(HERE, "..", "profile-sm90-softmax-h100-2026-12-06", "ncu", "ours_d32_192x128_sass.csv")
    for label, path in (("ours, P packed last (softmax record)", old),
                        ("ours, P packed first", os.path.join(HERE, "ncu", "sass", "ours_d32_192x128_sass.csv")),
                        ("FlashAttention-4", os.path.join(HERE, "ncu", "sass", "fa4_d32_sass.csv"))):
        p = phases(path)
        print(f"{label}: loop {sum(p.values())} samples; " + ", ".join(f"{k} {v}" for k, v in p.items()))


if __name__ == "__main__":
    main()
