"""The steady chunk loop of the launcher's d = 64 and d = 128 builds (bf16, clusters) with and without the
exponential emulation, counted by opcode (../profile-sm90-fa4-gap-h200-2026-11-28/sass_loops.py) from local nvcc
builds disassembled with nvdisasm -c.  Needs nvdisasm; no GPU.
Run from the repository root: python3 <this file> [outdir]  -> a line a build"""
import collections
import os
import subprocess
import sys

from iomodel.families.flash_sm90 import Sm90Config
from kernels import codegen, compile
from validation import probe_record

HERE = os.path.dirname(os.path.abspath(__file__))
LOOPS = probe_record.load(os.path.join(HERE, "..", "profile-sm90-fa4-gap-h200-2026-11-28", "sass_loops.py"))
BUILDS = [(Sm90Config(192, 128, 2, 64, 3), k) for k in (0, 8, 4, 2)] + [(Sm90Config(128, 128, 3, 128, 2), k)
                                                                       for k in (0, 4)]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "/tmp")
    for cfg, k in BUILDS:
        stem = f"d{cfg.head_dim}_emu{k}"
        cubin, _ = compile.run_nvcc(codegen.sm90_unit([(cfg, "bf16", False)]), "sm_90a", out, stem,
                                    ("-DSM90_CLUSTER", f"-DSM90_EXP_EMU={k}", "-DSM90_EXP_EMU_MAX=256"))
        sass = os.path.join(out, stem + ".sass")
        with open(sass, "w") as f:
            subprocess.run(["nvdisasm", "-c", str(cubin)], stdout=f, check=True)
        body = LOOPS.steady_loop(sass)
        counts = collections.Counter(LOOPS.opcode(x) for x in body)
        print(f"{stem}: {len(body)} a warp a chunk: " + " ".join(f"{o}:{n}" for o, n in counts.most_common(14)),
              flush=True)


if __name__ == "__main__":
    main()
