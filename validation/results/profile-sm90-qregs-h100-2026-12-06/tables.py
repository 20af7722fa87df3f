"""This record's table from its JSON: each tile's median with Q held over its median with Q read (same group), and
at d = 32 the held 192x128 s3 over the read 192x144 s4 (the model's pick there).  Usage: python3 tables.py"""
import glob
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    print("run  shape                  tile             held/read   d32: held 192x128 / read 192x144")
    for path in sorted(glob.glob(os.path.join(HERE, "qregs-*.json"))):
        run = path.rsplit("run", 1)[1][:-5]
        rows = json.load(open(path))["rows"]
        by = {(r["d"], r["N"], r["B"], r["causal"], r["impl"]): r.get("median_ms") for r in rows}
        for (d, N, B, causal, impl), ms in by.items():
            held = by.get((d, N, B, causal, impl + " qregs"))
            if held is None or ms is None:
                continue
            shape = f"d{d} N{N} B{B}{' causal' if causal else ''}"
            cross = ""
            if d == 32 and impl.startswith("192x128"):
                cross = f"{held / by[(d, N, B, causal, '192x144 c3 s4')]:10.3f}"
            print(f"{run:4} {shape:22} {impl:15} {held / ms:9.3f}   {cross}")


if __name__ == "__main__":
    main()
