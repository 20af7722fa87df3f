"""This record's table from its JSON: each build's median over the launcher's (the pick on the lpt walk) and
FlashAttention-4's over it, by run, then the sustained calls, clocks and power.  Usage: python3 tables.py"""
import glob
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    for path in sorted(glob.glob(os.path.join(HERE, "wide-*.json"))):
        print(os.path.basename(path))
        rows = json.load(open(path))["rows"]
        for shape in sorted({(r["d"], r["N"], r["B"]) for r in rows}, reverse=True):
            group = [r for r in rows if (r["d"], r["N"], r["B"]) == shape and "median_ms" in r]
            base = next(r["median_ms"] for r in group if r["impl"].startswith("pick") and r["impl"].count(" ") == 3)
            for r in group:
                runs = r.get("sustained_ms_runs", [])
                sus = "/".join(f"{x:.3f}" for x in runs)
                mhz = "/".join(f"{x:.0f}" for x in r.get("sm_mhz_runs", []))
                w = "/".join(f"{x:.0f}" for x in r.get("power_w_runs", []))
                print(f"  d{shape[0]} N{shape[1]} B{shape[2]}  {r['impl']:28} {r['median_ms']:7.4f} ms"
                      f"  /launcher {r['median_ms'] / base:6.3f}  {sus:20} {mhz:15} {w}")


if __name__ == "__main__":
    main()
