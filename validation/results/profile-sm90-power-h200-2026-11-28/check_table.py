import math, time, torch
from iomodel.families.flash_sm90 import Sm90Config
from kernels import compile as kc, flash_sm90
t0 = time.time()
cfgs = [(Sm90Config(128, 80, 2, 256, 2), True), (Sm90Config(128, 128, 2, 128, 2), False)]
kc.precompile([(lambda c, ca: lambda: flash_sm90.module(c, "bf16", ca))(c, ca) for c, ca in cfgs])
print("built", round(time.time() - t0), flush=True)
g = torch.Generator(device="cuda").manual_seed(1)
for cfg, causal in cfgs:
    q, k, v = (torch.randn(2, 4, 1000, cfg.head_dim, generator=g, device="cuda").bfloat16() for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    outs = {"default": flash_sm90.attention(q, k, v, causal=causal, config=cfg)}
    if causal:
        outs["lpt"] = flash_sm90.attention(q, k, v, causal=True, config=cfg, _persistent="lpt")
        outs["walk"] = flash_sm90.attention(q, k, v, causal=True, config=cfg, _defines=())
    for name, o in outs.items():
        print(cfg.name, causal, name, (o.float() - ref).abs().max().item(), flush=True)
    if causal:
        print("lpt == walk bitwise:", torch.equal(outs["lpt"], outs["walk"]))
