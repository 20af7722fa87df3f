"""ptxas -v (local nvcc 13.0, sm_90a) of every shipped config's causal window variant as the launcher builds it
(STATIC_SCHEDULE up to d = 128; above it the default build and WIDE_DYNAMIC), after the table change: registers,
spill bytes.  Run from the repository root: PYTHONPATH=. python3 <this file>  (-> spill-windows.log)"""
import tempfile
from concurrent.futures import ThreadPoolExecutor
from iomodel.families.flash_sm90 import SHIPPED
from kernels import codegen, compile, reports
from kernels.sm90_schedule import STATIC_SCHEDULE, DEFAULT_DEFINES, WIDE_DYNAMIC
jobs=[]
for cfg in SHIPPED:
    dfs = [tuple(DEFAULT_DEFINES)+((STATIC_SCHEDULE,) if cfg.head_dim<=128 else ())]
    if cfg.head_dim>128: dfs.append(tuple(DEFAULT_DEFINES)+(WIDE_DYNAMIC,))
    for df in dfs: jobs.append((cfg,df))
d=tempfile.mkdtemp()
def one(ij):
    i,(cfg,df)=ij
    flags=('-Xptxas','-v')+tuple(f"-D{x}" for x in df)
    out=compile.run_nvcc(codegen.sm90_unit([(cfg,'bf16',True,False,True,0)]),'sm_90a',d,f"t{i}",flags)[1]
    r=reports.parse_ptxas(out)
    return cfg.name, df, list(r.values())[0]
with ThreadPoolExecutor(2) as ex:
    for name,df,r in ex.map(one, enumerate(jobs)):
        print(name, [x for x in df if 'STATIC' in x or 'DYN' in x],
              r['registers'] if 'registers' in r else r.get('regs'), 'spill', r['spill_stores'], r['spill_loads'],
              r.get('ptxas_codes'), flush=True)
