"""ptxas -v (local nvcc 13.0, sm_90a) of d = 32's three-warpgroup wgmma builds with wider key chunks than the shipped
192x144 s4 (192x160, 192x176, 192x192), plain (paired and not) and causal: registers and spill bytes.  No GPU.
From the repository root: PYTHONPATH=. python3 <this file>  (-> spill-d32.log)"""
import tempfile
from concurrent.futures import ThreadPoolExecutor

from iomodel.families.flash_sm90 import Sm90Config
from kernels import codegen, compile, reports
from kernels.sm90_schedule import CLUSTER, DEFAULT_DEFINES

JOBS = [(Sm90Config(192, bn, st, 32, 3), causal, cl)
        for bn, st in [(144, 4), (160, 3), (160, 4), (176, 3), (192, 2), (192, 3)]
        for causal in (False, True) for cl in (((), (CLUSTER,)) if not causal else ((),))]


def one(job, out_dir):
    i, (cfg, causal, cl) = job
    flags = ("-Xptxas", "-v") + tuple(f"-D{x}" for x in tuple(DEFAULT_DEFINES) + cl)
    log = compile.run_nvcc(codegen.sm90_unit([(cfg, "bf16", causal, False, False, 0)]), "sm_90a", out_dir, f"t{i}",
                           flags)[1]
    return cfg.name, causal, cl, list(reports.parse_ptxas(log).values())[0]


def main():
    out_dir = tempfile.mkdtemp()
    with ThreadPoolExecutor(2) as ex:
        for name, causal, cl, r in ex.map(lambda j: one(j, out_dir), enumerate(JOBS)):
            print(name, "causal" if causal else "plain", " ".join(cl) or "-", f"registers {r['registers']}",
                  f"spill stores {r['spill_stores']} loads {r['spill_loads']}", flush=True)


if __name__ == "__main__":
    main()
