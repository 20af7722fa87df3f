"""Issue 18's "no shape where a peer wins" over every harness run of the kernels as on main since b2df656 (d = 32 in
64-byte rows): `python -m iomodel validate` over these files, its "Over the runs" table (iomodel.peer_ratios.parity:
a peer wins a shape when it is faster in every run of it, two or more, or by a median ratio below 0.99).
Usage, from the repository root: python3 validation/results/acceptance-h100-2026-12-06/parity.py [--json]"""
import dataclasses
import json
import os
import sys

from iomodel.accuracy import evaluate
from iomodel.accuracy_text import over_the_runs
from iomodel.peer_ratios import closest
from iomodel.results import load_results

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RUNS = [f"h100-sxm-2026-12-06-{name}.json" for name in
        ("leads-run5", "leads-run6", "leads-run7", "leads-run8", "leads-run9", "shapes-run2", "shapes-run3",
         "shapes-run4", "d256-seed414", "d256-seed415", "d256-seed425", "sweep-run3", "sweep-run4", "sm80-run2",
         "window-run2")]


def main(argv: list[str]) -> None:
    report = evaluate(load_results([os.path.join(RESULTS, f) for f in RUNS]))
    if "--json" in argv:
        rows = [dict(dataclasses.asdict(sp), sources=[os.path.basename(s) for s in sp.sources])
                for sp in closest(report.parity)]
        print(json.dumps({"files": RUNS, "closest_peers": rows}, indent=1))
        return
    print("\n".join(over_the_runs(report)).strip())


if __name__ == "__main__":
    main(sys.argv[1:])
