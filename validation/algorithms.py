"""The sweep's algorithm phase (``--only algorithms``): PyTorch's versions of the library's new
algorithms timed as peers, each row checked against a float32 reference first.

* ``torch_matmul``: ``torch.matmul(A, B, out=C)`` (cuBLAS), shape ``{"M", "N", "K"}``;
* ``torch_cross_entropy``: ``F.cross_entropy(H @ W, targets)``, the whole loss forward, ``{"T", "D", "V"}``;
* ``torch_mlp``: ``F.gelu(X @ W1) @ W2``, ``{"T", "D", "F"}``;
* ``torch_sdpa_flash_bwd``, ``torch_sdpa_cudnn_bwd``, ``torch_sdpa_efficient_bwd``: the backward of
  ``F.scaled_dot_product_attention`` forced to that backend (the forward run once, untimed),
  ``{"B", "H", "N", "M", "d"}``, checked against float32 within ``BACKWARD_TOLERANCE``.

The device side is the environment's ``algorithms()`` object (``validation.algo_torch.TorchAlgorithms``
on a GPU, ``validation.fake_env.FakeAlgorithms`` in a dry run): ``make_inputs(kernel, shape, n_sets,
seed)``, ``runner(kernel)`` and ``check(kernel, fn, inputs) -> (max_rel_err, finite)``.  Each row is
timed alone with the sweep's timer (CUDA events, median, inputs rotating among the sets), in the
sweep's rounds.  ``peers`` (``--algo-peers``) keeps the rows of the peers named.  The model's best
prediction is stored where ``iomodel.algorithms`` has one.
"""
from __future__ import annotations

from typing import Any

from iomodel.algo_peers import algo_flops, algo_of, algo_prediction
from iomodel.results import ResultRow, shape_label

from .plan import HIDDEN, TOKENS
from .records import TOLERANCE, record_error

__all__ = ["ALGORITHMS", "MATMUL_SHAPES", "CROSS_ENTROPY_SHAPES", "MLP_SHAPES", "BACKWARD_SHAPES",
           "BACKWARD_PEERS", "BACKWARD_TOLERANCE", "algorithm_rows", "run_algorithms"]

ALGORITHMS = "algorithms"   # the name ``--only`` takes

#: (M, N, K): square, skinny in M (decode-like), skinny in N (the transposed case), K-large, LLM layers
MATMUL_SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096), (2048, 2048, 2048),
                 (16, 4096, 4096), (64, 8192, 8192), (128, 4096, 8192),
                 (4096, 16, 4096), (8192, 128, 8192),
                 (1024, 1024, 65536), (2048, 2048, 65536),
                 (16384, 4096, 4096), (16384, 14336, 4096), (16384, 4096, 14336), (8192, 28672, 4096))
#: (T, D, V): tokens, model width, vocabulary (Llama 2 and Llama 3 vocabularies, GPT-2's padded one)
CROSS_ENTROPY_SHAPES = ((8192, 4096, 32000), (8192, 4096, 128256), (16384, 2048, 50304))
#: (T, D, F): tokens, model width, hidden width
MLP_SHAPES = ((16384, 4096, 14336), (8192, 4096, 11008), (4096, 2048, 8192))
#: (N, d) of the attention backward, N == M, B*N = 16384 tokens and H*d = 2048 (the attention sweep's)
BACKWARD_SHAPES = ((1024, 64), (1024, 128), (4096, 64), (4096, 128), (16384, 64), (16384, 128))
BACKWARD_PEERS = ("torch_sdpa_flash_bwd", "torch_sdpa_cudnn_bwd", "torch_sdpa_efficient_bwd")
#: max |d - ref| / max |ref| of dQ, dK and dV (bf16 gradients: looser than a forward's 1e-2)
BACKWARD_TOLERANCE = 2e-2
_QUICK = {"matmul": ((4096, 4096, 4096), (16, 4096, 4096)), "cross-entropy": ((2048, 1024, 32000),),
          "mlp": ((2048, 1024, 4096),), "attention-backward": ((1024, 64),)}
_FULL = {"matmul": MATMUL_SHAPES, "cross-entropy": CROSS_ENTROPY_SHAPES, "mlp": MLP_SHAPES,
         "attention-backward": BACKWARD_SHAPES}
_KERNELS = {"matmul": ("torch_matmul",), "cross-entropy": ("torch_cross_entropy",), "mlp": ("torch_mlp",),
            "attention-backward": BACKWARD_PEERS}


def _shape(algo: str, sizes: tuple[int, ...], dtype: str) -> dict[str, Any]:
    if algo == "attention-backward":
        N, d = sizes
        return {"B": max(1, TOKENS // N), "H": max(1, HIDDEN // d), "N": N, "M": N, "d": d, "dtype": dtype}
    names = {"matmul": "MNK", "cross-entropy": "TDV", "mlp": "TDF"}[algo]
    return {**dict(zip(names, sizes)), "dtype": dtype}


def algorithm_rows(quick: bool = False, dtype: str = "bf16",
                   peers: tuple[str, ...] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(peer kernel, shape) of every algorithm row, matmul first, the backward's three backends shape
    by shape last; ``peers``: only those peers' rows (None: all)."""
    rows = [(kernel, _shape(algo, sizes, dtype))
            for algo, shapes in (_QUICK if quick else _FULL).items() for sizes in shapes
            for kernel in _KERNELS[algo]]
    return [r for r in rows if peers is None or r[0] in peers]


def _progress(i: int, n: int, rec: ResultRow, elapsed_s: float) -> str:
    body = f"{rec.measured_tflops:.1f} TFLOP/s" if rec.ok else f"FAILED ({rec.error or '?'})"
    pred = f" (pred {rec.predicted_tflops:.1f})" if rec.predicted_tflops else " (pred -)"
    return f"[{i}/{n}] {rec.kernel} {shape_label(rec.shape)}: {body}{pred}  [{elapsed_s:.0f}s]"


def _predict(rec: ResultRow, gpu_key: str) -> None:
    """The model's best configuration for the row, stored as at run time (none while the model has none)."""
    algo = algo_of(rec.kernel)
    pred, err = algo_prediction(algo, gpu_key, rec.shape)
    t = (pred or {}).get("time_s")
    if isinstance(t, (int, float)) and t > 0:
        rec.prediction = pred
        rec.predicted_ms = t * 1e3
        rec.predicted_tflops = pred.get("tflops") or algo_flops(algo, rec.shape) / t / 1e12
        rec.predicted_bottleneck = pred.get("bottleneck")
    if err:
        rec.prediction_error = err


def _recover(env) -> None:
    try:
        env.sync()
    except Exception:  # noqa: BLE001 - a sticky CUDA error; the next rows say so
        pass
    env.release()


def _check_and_time(run, impl, rec: ResultRow, seed: int) -> None:
    """Make the row's inputs, check its output once, then time it; the record says how it went."""
    inputs = impl.make_inputs(rec.kernel, rec.shape, run.opts.input_sets, seed)
    fn = impl.runner(rec.kernel)
    err, finite = impl.check(rec.kernel, fn, inputs)
    rec.max_rel_err = err if finite else None
    tol = TOLERANCE.get(rec.shape.get("dtype", "bf16"), 1e-2)
    if algo_of(rec.kernel) == "attention-backward":
        tol = max(tol, BACKWARD_TOLERANCE)
    if not finite:
        rec.error = "output has NaN or Inf"
    elif not err < tol:
        rec.error = f"wrong result: max_rel_err {err:.3g} >= {tol:g}"
    if rec.error:
        return
    (outcome,) = run.env.timer.time_interleaved([fn], inputs, run.opts.rounds, on_error=lambda: _recover(run.env))
    if isinstance(outcome, Exception):
        record_error(rec, outcome)
        return
    rec.measured_ms = outcome.median_s * 1e3
    rec.measured_tflops = algo_flops(algo_of(rec.kernel), rec.shape) / outcome.median_s / 1e12
    rec.timing = outcome.as_dict()
    rec.ok = True


def run_algorithms(run, rows: list[tuple[str, dict[str, Any]]], first: int, seed: int) -> None:
    """Every algorithm row, numbered from ``first``: predict, check, time, save.  Never raises for a
    row (its record says why it failed); the budget stops new rows as it stops the attention rows."""
    impl = None
    for i, (kernel, shape) in enumerate(rows, first):
        rec = ResultRow(kernel=kernel, config=None, config_label="-", why="peer", shape=dict(shape))
        _predict(rec, run.spec.key)
        if run.out_of_time():
            rec.error = f"skipped: time budget of {run.opts.budget_s:.0f}s used up"
            run.add(rec)
            continue
        try:
            impl = impl or run.env.algorithms()
            _check_and_time(run, impl, rec, seed + i)
        except Exception as exc:  # noqa: BLE001 - e.g. out of memory: this row says so, the next one runs
            record_error(rec, exc)
            _recover(run.env)
        run.env.release()
        run.rows.append(rec)
        run.log(_progress(i, run.n, rec, run.elapsed()))
        run.save()
