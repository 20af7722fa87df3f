"""ptxas's registers a thread for every shipped mma.sync forward config (bf16, causal and not, sm_80, nvcc on this
machine; no GPU) with K's fragments in the B^T order (shipped), in the A order (IOM_BT_A_ORDER) and with Q's
fragments in registers (IOM_FWD_Q_REGS=1: the warps of one m16 tile), beside the model's estimate.  Run from the repository root:
PYTHONPATH=. python3 validation/results/profile-pipes-h100-2026-11-25/bt_registers.py  (writes bt-registers.json here)"""
import json
import os
import tempfile
from iomodel.api import predict
from iomodel.families.flash_sm80 import SHIPPED
from kernels import codegen, compile, reports

HERE = os.path.dirname(os.path.abspath(__file__))
COMMAND = "PYTHONPATH=. python3 validation/results/profile-pipes-h100-2026-11-25/bt_registers.py"
BUILDS = {"B^T order": (), "A order": ("-DIOM_BT_A_ORDER",), "Q in registers": ("-DIOM_FWD_Q_REGS=1",)}
names = [codegen.flash_sm80_kernel(cfg, "bf16", causal) for cfg in SHIPPED for causal in (False, True)]
unit = '#include "flash_fwd_sm80.cuh"\n' + "".join(
    f"template __global__ void {n}({codegen._FLASH_PARAMS.format(T='iom::bf16')});\n" for n in names)
regs = {}
with tempfile.TemporaryDirectory() as tmp:
    for tag, defines in BUILDS.items():
        log = compile.run_nvcc(unit, "sm_80", tmp, "bt", ("-Xptxas", "-v", *defines))[1]
        for name, rec in reports.parse_ptxas(log).items():
            desc = reports.demangle(name)[1]
            regs.setdefault((desc["config"], desc["causal"]), {})[tag] = (rec["registers"], rec["spill_stores"])
rows = []
for (cfg, causal), r in regs.items():
    model = predict("flash_sm80", "h100-sxm", dict(B=1, H=1, N_q=4096, d=cfg.head_dim, dtype="bf16"), cfg).regs_per_thread
    rows.append({"config": cfg.as_dict(), "causal": causal, "regs_bt_order": r["B^T order"][0],
                 "spill_bt_order": r["B^T order"][1], "regs_a_order": r["A order"][0], "spill_a_order": r["A order"][1],
                 "regs_q_in_registers": r["Q in registers"][0], "spill_q_in_registers": r["Q in registers"][1],
                 "model_regs": min(model, 255)})
with open(os.path.join(HERE, "bt-registers.json"), "w") as f:
    json.dump({"what": "ptxas registers a thread of every shipped mma.sync forward config (bf16), K's fragments in the "
                       "B^T order (shipped), the A order (IOM_BT_A_ORDER) and with Q in registers (IOM_FWD_Q_REGS=1), and the "
                       "model's estimate",
               "arch": "sm_80", "command": COMMAND, "rows": rows}, f, indent=1)
more = [r["regs_bt_order"] - r["regs_a_order"] for r in rows]
print(f"{len(rows)} kernels; B^T - A order registers: min {min(more)}, median {sorted(more)[len(more) // 2]}, max {max(more)}")
