"""The refit's effect on the launcher's picks: for each GPU (H100 and H200 SXM), head dim, sequence length (about
16k tokens a batch, about 2048 channels a token), causal or not, a (4096, 0) window at N = 32768 and a softcap, the
shipped config the model ranks first under the plan before the refit (interleave 0.6 up to 2.2, 200 cycles a step,
no block latency, the stale max not drawn) and under the refit's (iomodel/families/flash_sm90.py), with the
predicted margin of the new pick over the old under the new plan.  No GPU.  From the repository root:
PYTHONPATH=. python3 <this file>   -> one line a shape whose pick changed, and the count"""
import dataclasses

from iomodel import api, families
from iomodel.families import flash_sm90 as F
from iomodel.problems import check_shape

FAM = families.get("flash_sm90")
NEW_PLAN, NEW_BUILD = FAM.plan, FAM.build
OLD_PLAN = dataclasses.replace(NEW_PLAN, interleave_max=2.2, interleave_slope=0.6, step_latency_cycles=200.0,
                               block_latency_cycles=0.0)


def _old_build(causal, gqa):
    return NEW_BUILD(causal, gqa).with_stale_max(0.0)


def use(plan, build):
    object.__setattr__(FAM, "plan", plan)
    object.__setattr__(FAM, "build", build)
    api.family_model.cache_clear()


def shapes():
    for d in F.HEAD_DIMS:
        H = max(2048 // d, 1)
        for N in (512, 1024, 2048, 4096, 8192, 16384, 32768):
            for causal in (False, True):
                yield {"B": max(16384 // N, 1), "H": H, "H_kv": H, "N_q": N, "N_k": N, "d": d, "causal": causal,
                       "dtype": "bf16"}
        yield {"B": 1, "H": H, "H_kv": H, "N_q": 32768, "N_k": 32768, "d": d, "causal": True, "dtype": "bf16",
               "window_left": 4096, "window_right": 0}
        yield {"B": 4, "H": H, "H_kv": H, "N_q": 4096, "N_k": 4096, "d": d, "causal": False, "dtype": "bf16",
               "softcap": 30.0}


def ranked(gpu, s):
    """The shipped configs the launcher offers for `s` (not the variants that spill), best predicted first."""
    return api.rank_configs("flash_sm90", gpu, s, FAM.shipped_for(check_shape(FAM, s)))


def main():
    changed = total = 0
    for gpu in ("h100-sxm", "h200-sxm"):
        for s in shapes():
            use(OLD_PLAN, _old_build)
            old = ranked(gpu, s)[0]
            use(NEW_PLAN, NEW_BUILD)
            new = ranked(gpu, s)
            total += 1
            if FAM.label(new[0].config) != FAM.label(old.config):
                changed += 1
                old_now = next(p for p in new if FAM.label(p.config) == FAM.label(old.config))
                extra = {k: s[k] for k in ("window_left", "softcap") if k in s}
                mask = "causal" if s["causal"] else "      "
                print(f"{gpu} d{s['d']:<3} N{s['N_q']:<5} B{s['B']:<2} {mask} {extra or ''}"
                      f" {FAM.label(old.config)} -> {FAM.label(new[0].config)} "
                      f"(new plan: {(old_now.time_s / new[0].time_s - 1) * 100:.1f}% ahead)")
    print(f"{changed} of {total} picks changed")


if __name__ == "__main__":
    main()
