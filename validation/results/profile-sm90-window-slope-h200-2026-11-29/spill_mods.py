"""ptxas -v (local nvcc 13.0, sm_90a) of the causal window variants with a softcap, ALiBi or both up to d = 128,
built as the launcher builds them (STATIC_SCHEDULE), after the table change: name, modifiers, spill stores, stack,
whether SPILLING lists it (not offered); "BAD" where one spills unlisted.  Run from the repository root:
PYTHONPATH=. python3 <this file>  (-> spill-mods.log)"""
import tempfile
from concurrent.futures import ThreadPoolExecutor
from iomodel.families.flash_sm90 import SHIPPED, FAMILY
from kernels import codegen, compile, reports
from kernels.sm90_schedule import STATIC_SCHEDULE
MODS={1:"softcap",2:"alibi",3:"softcap alibi"}
cfgs=[c for c in SHIPPED if c.head_dim<=128]
d=tempfile.mkdtemp()
units=[]
# 4 kernels per unit
items=[(c,m) for c in cfgs for m in (1,2,3)]
chunks=[items[i:i+6] for i in range(0,len(items),6)]
def one(ij):
    i,ch=ij
    out=compile.run_nvcc(codegen.sm90_unit([(c,'bf16',True,False,True,m) for c,m in ch]),'sm_90a',d,f"u{i}",
                         ('-Xptxas','-v',f'-D{STATIC_SCHEDULE}'))[1]
    rep=reports.parse_ptxas(out)
    res=[]
    for c,m in ch:
        r=rep[codegen.sm90_kernel(c,'bf16',True,False,True,m)]
        feats=frozenset(("causal","window")+tuple(MODS[m].split()))
        listed=(c,feats) in FAMILY.spilling_variants
        res.append((c.name,MODS[m],r['spill_stores'],r['stack'],listed))
    return res
with ThreadPoolExecutor(2) as ex:
    for res in ex.map(one, enumerate(chunks)):
        for x in res:
            flag = "BAD" if (x[2] or x[3]) and not x[4] else ""
            print(*x, flag, flush=True)
