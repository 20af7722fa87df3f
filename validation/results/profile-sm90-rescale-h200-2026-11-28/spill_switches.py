"""Which wgmma forward variants spill with some compile-time switches set, against the family's `SPILLING` list: every
shipped config x causal or not x window or not x {none, softcap, ALiBi, both} (bf16) built by local nvcc with the
defines given, ptxas's report of each read (two compiles at a time).  Prints the variants that spill and are not
listed (NEW) and the listed ones that do not (GONE).  Without defines it is tests/kernels/test_build_variants.py's
check over all variants.  Run from the repository root, e.g.:
PYTHONPATH=. python3 validation/results/profile-sm90-rescale-h200-2026-11-28/spill_switches.py -DSM90_KV_TOGETHER"""
import itertools
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from iomodel.families import flash_sm90 as family
from kernels import codegen, compile, reports

MODS = {0: (), 1: ("softcap",), 2: ("alibi",), 3: ("softcap", "alibi")}


def features(causal, local, mods) -> frozenset:
    return frozenset((("causal",) if causal else ()) + (("window",) if local else ()) + MODS[mods])


def spilled(defines: tuple[str, ...]) -> set:
    variants = [(cfg, c, w, m) for cfg in family.SHIPPED
                for c, w, m in itertools.product((False, True), (False, True), MODS)]
    tmp = tempfile.mkdtemp()
    units = [codegen.sm90_unit([(cfg, "bf16", c, False, w, m) for cfg, c, w, m in variants[i::4]]) for i in range(4)]

    def one(i_unit):
        i, unit = i_unit
        return reports.parse_ptxas(compile.run_nvcc(unit, "sm_90a", tmp, f"v{i}", ("-Xptxas", "-v") + defines)[1])

    ptxas = {}
    with ThreadPoolExecutor(max_workers=2) as ex:
        for rep in ex.map(one, enumerate(units)):
            ptxas.update(rep)
    out = set()
    for cfg, c, w, m in variants:
        r = ptxas[codegen.sm90_kernel(cfg, "bf16", c, False, w, m)]
        if r["spill_stores"] or r["stack"]:
            out.add((cfg, features(c, w, m)))
    return out


def main():
    got, listed = spilled(tuple(sys.argv[1:])), set(family.FAMILY.spilling_variants)
    for tag, items in (("NEW ", got - listed), ("GONE", listed - got)):
        for cfg, f in sorted(items, key=str):
            print(tag, f"{cfg.block_m}x{cfg.block_n} s{cfg.stages} d{cfg.head_dim}", " ".join(sorted(f)))
    print(f"{len(got)} variants spill, {len(listed)} listed")


if __name__ == "__main__":
    main()
