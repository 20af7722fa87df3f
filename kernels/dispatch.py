"""Which kernel family runs, with which configuration.

* A typed config picks its own family; a dict with ``consumers`` is a flash_sm90 config, any other
  dict a flash_sm80 one.
* ``config=None`` asks the model (``iomodel.chooser.choose``): the best predicted shipped config over
  the families this GPU runs (flash_sm80 everywhere, flash_sm90 too on an sm_90 GPU), cached there
  per (GPU, families, shape).  The unfused kernel takes its family's first shipped config.
* :func:`prepare` is the common front of every family's launch: inputs, scale, config, shared
  memory and GPU checked once, in one order.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Mapping

from iomodel import families
from iomodel.names import suggest
from iomodel.problems import is_windowed, score_mods_of

from . import driver, plans
from .checks import check_config, check_qkv, check_scale, check_smem
from .score_mods import mods_key

__all__ = ["forward_launch", "backward_launch", "backward_head_dims", "FLASH_BACKENDS", "BACKWARD_FAMILIES", "RUNNABLE", "Call", "runner", "flash_family", "config_family",
           "backward_config_family", "backward_family", "choose", "config_for", "forward_family", "prepare"]

FLASH_BACKENDS = {"sm80": "flash_sm80", "sm90": "flash_sm90"}
BACKWARD_FAMILIES = ("flash_bwd_sm80", "flash_bwd_sm90")   # atomic dQ; each has a `<name>_deterministic` twin
RUNNABLE = ("flash_sm80", "flash_sm90", "unfused")   # forward families kernels.run takes (= module names)
_WGMMA_CAPABILITY = (9, 0)
_FLASH_HEAD_DIMS = tuple(sorted({d for n in FLASH_BACKENDS.values() for d in families.get(n).head_dims}))


def runs_here(family: str, capability: tuple[int, int]) -> bool:
    """Whether a GPU of this compute capability runs the family's kernel (wgmma needs sm_90a)."""
    return not families.get(family).requires_wgmma or tuple(capability) == _WGMMA_CAPABILITY


def runner(family: str, backward: bool = False):
    """The module that launches `family`: a forward one's ``attention(q, k, v, causal, config, scale)``, with
    `backward` a backward one's ``backward(dout, q, k, v, out, lse, ...)``."""
    names = BACKWARD_FAMILIES if backward else RUNNABLE
    if family not in names:
        raise ValueError(f"no {'backward ' if backward else ''}kernel for family {family!r}{suggest(family, names)}; "
                         f"kernels run {', '.join(names)}")
    return importlib.import_module(f"{__package__}.{family}")


def config_family(config) -> str:
    """The flash family a config belongs to (objects of no flash family go to flash_sm80, whose
    config check then names what is wrong)."""
    if isinstance(config, Mapping):
        return "flash_sm90" if "consumers" in config else "flash_sm80"
    for name in FLASH_BACKENDS.values():
        if isinstance(config, families.get(name).config_type):
            return name
    return "flash_sm80"


def choose(names, shape: dict, index: int):
    """The model's pick (an ``iomodel.api.Prediction``: ``.kernel``, ``.config``) over the families
    `names` for `shape` on CUDA device `index`."""
    from iomodel import chooser

    return chooser.choose(list(names), driver.device_props(index).name, shape)


def flash_family(q, k, v, causal, config, backend: str, window=None, mods=None) -> tuple[str, object]:
    """(family, config) of a flash_attention call: the backend's family, the config's own, or the model's
    pick over the flash families of this GPU (`window`, `mods`: the call's band and score modifiers)."""
    if backend not in ("auto", *FLASH_BACKENDS):
        raise ValueError(f"backend must be 'auto', 'sm80' or 'sm90', got {backend!r}")
    if backend != "auto":
        return FLASH_BACKENDS[backend], config
    if config is not None:
        return config_family(config), config
    shape = check_qkv(q, k, v, head_dims=_FLASH_HEAD_DIMS)
    band = window.shape_fields() if window is not None else {"causal": bool(causal)}
    extra = mods.shape_fields() if mods is not None else {}
    return forward_family({**shape, **band, **extra}, None, driver.device_index(q.device))


def forward_family(shape: dict, config, index: int) -> tuple[str, object]:
    """(family, config) of a forward call of `shape` (causal included) on device `index`: the config's own
    family (the config itself unchecked), or the model's pick over the forward families this GPU runs."""
    if config is not None:
        return config_family(config), config
    names = [n for n in FLASH_BACKENDS.values() if runs_here(n, driver.capability(index)) and _has_features(n, shape)]
    pick = choose(names, shape, index)
    return pick.kernel, pick.config


def _has_features(family: str, shape: dict) -> bool:
    """Whether a forward family's kernel has the shape's window and score modifiers."""
    fam = families.get(family)
    return ((fam.window_band is not None or not is_windowed(shape))
            and all(m in fam.score_mods for m in score_mods_of(shape)))


def backward_config_family(config) -> str:
    """The backward family a config belongs to: a FlashBwdSm90Config, or a dict with ``consumers``, is
    flash_bwd_sm90's; anything else goes to flash_bwd_sm80 (whose config check names what is wrong)."""
    sm90 = families.get("flash_bwd_sm90").config_type
    if isinstance(config, sm90) or (isinstance(config, Mapping) and "consumers" in config):
        return "flash_bwd_sm90"
    return "flash_bwd_sm80"


def backward_head_dims(names=BACKWARD_FAMILIES) -> tuple[int, ...]:
    """The head dims some of the backward families `names` take (all of them by default)."""
    return tuple(sorted({d for n in names for d in families.get(n).head_dims}))


def backward_family(q, k, v, causal, config, deterministic: bool) -> tuple[str, object]:
    """(family, config) of a backward call: the config's own family, or with config=None the model's pick
    over the backward families this GPU runs (flash_bwd_sm90 on an sm_90 GPU too), in the call's mode.
    The family returned is the atomic one's name (its module runs both modes)."""
    if config is not None:
        return backward_config_family(config), config
    suffix = "_deterministic" if deterministic else ""
    shape = check_qkv(q, k, v, head_dims=backward_head_dims())
    index = driver.device_index(q.device)
    cap = driver.capability(index)
    here = [n for n in BACKWARD_FAMILIES if runs_here(n, cap)]
    if shape["d"] not in backward_head_dims(here):   # flash_bwd_sm90's 32 and 96 need its sm_90a kernel
        raise ValueError(f"head dim {shape['d']} has no backward on this GPU (sm_{cap[0]}{cap[1]}: "
                         f"{', '.join(map(str, backward_head_dims(here)))}; 32 and 96 need an sm_90 GPU)")
    names = [n + suffix for n in here if shape["d"] in families.get(n).head_dims]
    pick = choose(names, {**shape, "causal": bool(causal)}, index)
    return pick.kernel.removesuffix(suffix), pick.config


def config_for(family: str, config, shape: dict, index: int):
    """The typed, checked config of a launch; None: the model's pick (unfused: its first shipped one)."""
    if config is not None:
        return check_config(family, config, shape)
    if family == "unfused":
        return families.get(family).shipped[0]
    return choose([family], shape, index).config


@dataclass(frozen=True)
class Call:
    """A checked launch: shape (B, H, H_kv, N_q, N_k, d, causal, dtype), config, scale, device index and
    the config's dynamic shared memory in bytes."""

    shape: dict
    config: object
    scale: float
    device: int
    smem: int


def prepare(family: str, q, k, v, causal, config, scale, window=None, mods=None) -> Call:
    """Check a launch of `family` (inputs, GPU, scale, config, shared memory) and resolve its config.
    `window`: a ``kernels.window.Window`` (its bounds then set the shape's causal flag and window); `mods`:
    a ``kernels.score_mods.ScoreMods`` (softcap, ALiBi; the shape's fields of the same names)."""
    fam = families.get(family)
    band = window.shape_fields() if window is not None else {"causal": bool(causal)}
    if window is not None and window.local and fam.window_band is None:
        having = [b for b, n in FLASH_BACKENDS.items() if families.get(n).window_band is not None]
        raise ValueError(f"the {family} kernel has no sliding window (window_size={(window.left, window.right)}); "
                         f"backend {' or '.join(map(repr, having))} has one")
    extra = mods.shape_fields() if mods is not None else {}
    missing = [m for m in score_mods_of(extra) if m not in fam.score_mods]
    if missing:
        raise ValueError(f"the {family} kernel has no {' or '.join(missing)}")
    shape = {**check_qkv(q, k, v, head_dims=fam.head_dims), **band, **extra}
    index = driver.device_index(q.device)
    cap = driver.capability(index)
    if not runs_here(family, cap):
        raise RuntimeError(f"the {family} kernel needs an sm_90 (Hopper) GPU, {driver.device_props(index).name} "
                           f"is sm_{cap[0]}{cap[1]}")
    # the grid and index limits of the family's launch (one home: iomodel/families/<family>.py)
    too_big = fam.launch_problem(shape) if fam.launch_problem is not None else ""
    if too_big:
        raise ValueError(f"{family} cannot launch this shape: {too_big}")
    sc = check_scale(scale, shape["d"])
    cfg = config_for(family, config, shape, index)
    smem = cfg.smem_bytes(q.element_size())
    check_smem(family, cfg, smem, driver.max_smem_optin(index))
    return Call(shape, cfg, sc, index, smem)


# ------------------------------------------------------------------------------------ launch plans
def forward_launch(q, k, v, causal, config, scale, backend: str = "auto", window=None, mods=None):
    """The launch plan (``kernels.plans``) of a forward call: kept per call signature, so that the family's
    choice, the checks and the arguments are settled once; call it as ``run(q, k, v, return_lse)``.
    `window`: a local ``kernels.window.Window`` or None; `mods`: a ``kernels.score_mods.ScoreMods`` or None."""
    sig = plans.key("flash_attention", (q, k, v), causal, config, scale, backend, window, mods_key(mods))
    run = plans.lookup(sig, (("q", q), ("k", k), ("v", v)))
    if run is None:
        family, config = flash_family(q, k, v, causal, config, backend, window, mods)
        run = runner(family).plan(q, k, v, causal=causal, config=config, scale=scale, window=window, mods=mods)
        plans.store(sig, run)
    return run


def backward_launch(dout, q, k, v, out, lse, causal, scale, config, deterministic: bool):
    """The launch plan of a backward call (as :func:`forward_launch`); call it as ``run(dout, q, k, v, out,
    lse)``."""
    sig = plans.key("flash_attention_backward", (dout, q, k, v, out, lse), causal, scale, config, bool(deterministic))
    run = plans.lookup(sig, (("q", q), ("k", k), ("v", v)))
    if run is None:
        family, config = backward_family(q, k, v, causal, config, deterministic)
        run = runner(family, backward=True).plan(dout, q, k, v, out, lse, causal=causal, scale=scale, config=config,
                                                 deterministic=deterministic)
        plans.store(sig, run)
    return run
