"""Run one attention kernel a few times so Nsight Compute can profile its last launch.

    ncu --launch-skip 2 --launch-count 1 -k regex:flash_fwd --section SpeedOfLight ... \
        python -m validation.profile --kernel flash_sm80 --config 128,64,4,2 --d 128 --n 4096

Kernels: `flash_sm80` (config block_m,block_n,warps,stages), `flash_sm90` (block_m,block_n,stages,consumers),
the peers `sdpa_flash`, `sdpa_cudnn` and `fa4` (FlashAttention-4, where installed; no config); without `--config` a
flash kernel runs the configuration the model ranks first.
Shape: B*N = 16384 tokens (`--tokens`), H*d = 2048, bf16, as in the validation sweep; `--window LEFT` a causal
sliding window (LEFT, 0) (FlashAttention's window_size; not on sdpa_*).
"""
from __future__ import annotations

import argparse


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.profile")
    p.add_argument("--kernel", required=True, choices=("flash_sm80", "flash_sm90", "sdpa_flash", "sdpa_cudnn", "fa4"))
    p.add_argument("--config", default=None, help="comma-separated tile sizes")
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--launches", type=int, default=3)
    p.add_argument("--tokens", type=int, default=None, help="B*N (default the sweep's 16384)")
    p.add_argument("--window", type=int, default=None, metavar="LEFT", help="causal window (LEFT, 0)")
    args = p.parse_args(argv)
    if args.window is not None and (args.window < 0 or args.kernel.startswith("sdpa")):
        p.error(f"--window {args.window}: a left size >= 0 on flash_sm80, flash_sm90 or fa4")
    ws = (-1, -1) if args.window is None else (args.window, 0)
    causal = args.causal or args.window is not None
    try:
        sizes = [int(x) for x in args.config.split(",")] if args.config else None
        if sizes is not None and len(sizes) != 4:
            raise ValueError(f"expected 4 comma-separated numbers, got {len(sizes)}")
    except ValueError as exc:
        p.error(f"--config {args.config!r}: {exc}")

    try:
        import torch
    except ImportError:
        p.error("needs torch and a CUDA GPU: pip install -e '.[gpu]'")
    import kernels

    from .plan import make_shape

    tokens = {} if args.tokens is None else {"tokens": args.tokens}
    shape = make_shape(args.n, args.d, causal, **tokens)  # the sweep's B and H for this N and d
    q, k, v = (torch.randn(shape["B"], shape["H"], args.n, args.d, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    # without --config the kernel takes the configuration the model ranks first
    if args.kernel == "flash_sm80":
        from iomodel.families.flash_sm80 import FlashConfig
        cfg = FlashConfig(*sizes, args.d) if sizes else None
        run = lambda: kernels.flash_attention(  # noqa: E731
            q, k, v, causal=causal, config=cfg, backend="sm80", window_size=ws)
    elif args.kernel == "flash_sm90":
        from iomodel.families.flash_sm90 import Sm90Config
        cfg = Sm90Config(*sizes[:3], args.d, sizes[3]) if sizes else None
        run = lambda: kernels.flash_attention(  # noqa: E731
            q, k, v, causal=causal, config=cfg, backend="sm90", window_size=ws)
    else:
        from .peers import peer_runners

        peer, why = peer_runners(torch)[args.kernel]
        if peer is None:
            p.error(f"{args.kernel}: {why}")
        kw = {} if args.window is None else {"window_size": ws}
        run = lambda: peer(q, k, v, causal, **kw)  # noqa: E731
    for _ in range(args.launches):
        run()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
