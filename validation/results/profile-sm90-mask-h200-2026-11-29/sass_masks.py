"""The masked and unmasked chunk loops of the wgmma forward under each SM90_MASK build, by size: every loop of an
nvdisasm listing (a backward branch to a label above it) that issues an HGMMA and more than 8 MUFUs, its
instruction count and how many of them are ISETP, FSEL, R2P, LOP3, PLOP3 and IMAD/IADD3.
Usage: PYTHONPATH=. python3 <this file> DIR  (builds DIR/<build>.cubin with local nvcc for d = 128 128x128 s3,
causal and the (static) window kernel; run nvdisasm -c on each and then this file with --count DIR/*.sass)."""
import collections
import re
import sys

SASS_LOOPS = "validation/results/profile-sm90-fa4-gap-h200-2026-11-28/sass_loops.py"


def loops(path):
    from validation.probe_record import load

    ins, labels = load(SASS_LOOPS).parse(path)   # (its listing parser: instructions, label -> index)
    for i, text in enumerate(ins):
        m = re.search(r"BRA\s+(?:`\()?(\.L_x_\d+)", text)
        if m and m.group(1) in labels and labels[m.group(1)] <= i:
            body = ins[labels[m.group(1)]:i + 1]
            if any("HGMMA" in x for x in body) and sum("MUFU" in x for x in body) > 8:
                yield body


def opcode(text):
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def build(out):
    import os

    from iomodel.families.flash_sm90 import Sm90Config
    from kernels import codegen, compile as kcompile

    cfg = Sm90Config(128, 128, 3, 128, 2)
    os.makedirs(out, exist_ok=True)
    for mask in (0, 1, 2):
        for name, local, extra in (("causal", False, ()), ("window", True, ("-DSM90_STATIC_SCHEDULE",))):
            kcompile.run_nvcc(codegen.sm90_unit([(cfg, "bf16", True, False, local, 0)]), "sm_90a", out,
                              f"{name}-mask{mask}", (f"-DSM90_MASK={mask}", *extra))


def count(paths):
    for path in paths:
        for body in loops(path):
            c = collections.Counter(opcode(x) for x in body)
            keys = ("ISETP", "FSEL", "R2P", "LOP3", "PLOP3", "IMAD", "IADD3", "VIADD", "SEL")
            print(f"{path}: {len(body)} " + " ".join(f"{k}:{c[k]}" for k in keys if c[k]))


if __name__ == "__main__":
    count(sys.argv[2:]) if sys.argv[1] == "--count" else build(sys.argv[1])
