"""The wgmma forward's causal schedules above d = 128 that the power probe compares, each a callable on (B, H, N, d)
tensors: `shipped` (the launcher's own choice), `np sS` a grid of one CTA a tile (no persistence: the hardware hands
out the tiles in index order as SMs free up) with sections of S heads longest first, as FlashAttention-4's Hopper path
schedules them (S: the power of 2 at or below 50 MiB over one head's K and V, its rule), `np all` the same with one
section, `dyn sS` the persistent dynamic schedule (claims from a counter) with S heads a section, `dyn all` one
section, and at d = 256 N = 1024 the 128x64 dynamic build with K and V loaded together (its dynamic build otherwise
spills) and the 128x80 tile.  Used by probe_power.py and ncu_variant.py."""
import torch

from iomodel import chooser
from iomodel.families.flash_sm90 import Sm90Config
from kernels import flash_sm90

SHAPES = [(256, 8, 8192, 2), (192, 10, 8192, 2), (256, 8, 1024, 16)]   # (d, H, N, B)
KV_TOGETHER = "SM90_KV_TOGETHER"


def fa4_sections(N: int, d: int, heads: int) -> int:
    """FlashAttention-4's heads a section (SingleTileLPTScheduler's L2 swizzle, bf16): the power of 2 at or below
    50 MiB over one head's K and V, 1 where one head takes more."""
    one = 2 * N * d * 2
    fit = (50 << 20) // one
    return 1 if fit < 1 else min(heads, 1 << (fit.bit_length() - 1))


def pick(d: int, H: int, N: int, B: int):
    shape = {"B": B, "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": True, "dtype": "bf16"}
    return chooser.choose(["flash_sm90"], torch.cuda.get_device_name(), shape).config


BUILDS = set()   # the (config, defines) of every callable made, for precompile


def ours(cfg, defines=None, persistent=None, sections=None):
    BUILDS.add((cfg, tuple(defines) if defines is not None else None))
    return lambda q, k, v: flash_sm90.attention(q, k, v, causal=True, config=cfg, _defines=defines,
                                                _persistent=persistent, _sections=sections)


def variants(d: int, H: int, N: int, B: int) -> list[tuple[str, object]]:
    """(label, callable) of every schedule tried at this shape."""
    cfg = pick(d, H, N, B)
    s = fa4_sections(N, d, B * H)
    dyn = (flash_sm90.WIDE_DYNAMIC,)
    out = [("shipped", ours(cfg)), (f"np s{s}", ours(cfg, persistent=False, sections=s)),
           ("np all", ours(cfg, persistent=False, sections=B * H))]
    if N >= 8192:
        out += [("dyn", ours(cfg, dyn)), (f"dyn s{s}", ours(cfg, dyn, sections=s)), ("dyn all", ours(cfg, dyn, sections=B * H))]
    else:
        wide = Sm90Config(128, 80, 2, d, 2)
        out += [("dyn kv", ours(cfg, (*dyn, KV_TOGETHER))), ("128x80 static", ours(wide, ())),
                ("128x80 dyn", ours(wide, dyn))]
    return out


def precompile() -> int:
    """Build every module the callables made so far need, concurrently (the launcher's defines where None: the
    shipped ones at these shapes are the static walk's, no defines)."""
    from kernels import compile as kcompile

    return kcompile.precompile([(lambda c, df: lambda: flash_sm90.module(c, "bf16", True, df or ()))(c, df)
                                for c, df in BUILDS])
