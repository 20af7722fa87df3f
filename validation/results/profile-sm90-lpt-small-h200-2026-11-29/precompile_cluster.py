"""The modules test_gpu_cluster_sm90.py and probe_cluster.py load, compiled concurrently first (the tests would
build them one at a time).  Run from the repository root: PYTHONPATH=. python3 <this file>"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "kernels"))
from kernels import compile as kcompile, flash_sm90  # noqa: E402
from validation import probe_record  # noqa: E402

import test_gpu_cluster_sm90 as t  # noqa: E402

probe = probe_record.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe_cluster.py"))
builds = {(c[0], "bf16" if c[6] == t.torch.bfloat16 else "fp16", df)
          for c in t.CASES for df in (t.CLUSTER, t.NO_SPLIT, (flash_sm90.NO_SPLIT,))}
builds |= {(c, "bf16", df) for s in probe.SHAPES for c in probe.configs(*s) for df in probe.BUILDS.values()}
t0 = time.time()
print(kcompile.precompile([(lambda c, dt, df: lambda: flash_sm90.module(c, dt, False, df))(*b) for b in builds]),
      f"modules in {time.time() - t0:.0f} s")
