"""The kernels of one backward call and their device times (torch.profiler, median of 10 calls after 20
warm-ups): ours (the rows kernels D = rowsum(dO * O) with the zeroed dQ accumulator, the main kernel, the dQ
conversion) and SDPA cuDNN's, at three shapes.  Run from the repository root with PYTHONPATH=.; writes
$OUT/rows-kernels.json."""
import torch, json, os, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import kernels
from kernels import flash_bwd_sm90
from iomodel.families.flash_bwd_sm90 import SHIPPED
CFG={c.head_dim:c for c in SHIPPED}
out_rows=[]
for (B,H,N,d,causal) in [(4,16,4096,128,False),(1,16,16384,128,False),(4,32,4096,64,False)]:
    g=torch.Generator(device="cuda").manual_seed(3)
    q,k,v,do=(torch.randn(B,H,N,d,generator=g,device="cuda").to(torch.bfloat16) for _ in range(4))
    o,lse=kernels.flash_attention(q,k,v,causal=causal,return_lse=True)
    qg,kg,vg=(x.detach().clone().requires_grad_() for x in (q,k,v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        oc=F.scaled_dot_product_attention(qg,kg,vg,is_causal=causal)
    fns={"ours":lambda: flash_bwd_sm90.backward(do,q,k,v,o,lse,causal=causal,config=CFG[d]),
         "cudnn":lambda: torch.autograd.grad(oc,(qg,kg,vg),do,retain_graph=True)}
    for name,fn in fns.items():
        for _ in range(20): fn()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(10): fn()
            torch.cuda.synchronize()
        agg={}
        for e in prof.events():
            if e.device_type==torch.autograd.DeviceType.CUDA:
                agg.setdefault(e.name,[]).append(e.device_time_total if hasattr(e,'device_time_total') else e.cuda_time_total)
        row={"shape":[B,H,N,d,causal],"impl":name,"kernels":{k[:90]:sorted(v)[len(v)//2] for k,v in agg.items()},"calls":{k[:90]:len(v) for k,v in agg.items()}}
        out_rows.append(row); print(json.dumps(row),flush=True)
os.makedirs(os.environ.get("OUT","/tmp/out"),exist_ok=True)
json.dump(out_rows,open(os.environ.get("OUT","/tmp/out")+"/rows-kernels.json","w"),indent=1)
