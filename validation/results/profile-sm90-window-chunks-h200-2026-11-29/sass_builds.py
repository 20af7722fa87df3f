"""The cubins whose steady chunk loops ../profile-sm90-fa4-gap-h200-2026-11-28/sass_loops.py counts: d = 128 128x128
s3 bf16 without a mask, causal (the claims) and the window kernel (static walk).  Run from the repository root:
PYTHONPATH=. python3 <this file> DIR, then nvdisasm -c DIR/<name>.cubin > DIR/<name>.sass for each."""
import sys

from iomodel.families.flash_sm90 import Sm90Config
from kernels import codegen, compile as kcompile

CFG = Sm90Config(128, 128, 3, 128, 2)
for name, causal, local, defines in [("plain", False, False, ()), ("causal", True, False, ()),
                                     ("window", True, True, ("-DSM90_STATIC_SCHEDULE",))]:
    kcompile.run_nvcc(codegen.sm90_unit([(CFG, "bf16", causal, False, local, 0)]), "sm_90a", sys.argv[1], name, defines)
