"""The sweep's algorithm phase (``--only algorithms``): PyTorch's versions of the library's new
algorithms timed as peers, each row checked against a float32 reference first.

* ``torch_matmul``: ``torch.matmul(A, B, out=C)`` (cuBLAS), shape ``{"M", "N", "K"}``;
* ``torch_cross_entropy``: ``F.cross_entropy(H @ W, targets)``, the whole loss forward, ``{"T", "D", "V"}``;
* ``torch_mlp``: ``F.gelu(X @ W1) @ W2``, ``{"T", "D", "F"}``;
* ``torch_sdpa_flash_bwd``, ``torch_sdpa_cudnn_bwd``, ``torch_sdpa_efficient_bwd``: the backward of
  ``F.scaled_dot_product_attention`` forced to that backend (the forward run once, untimed, causal
  where the shape is), ``{"B", "H", "N", "M", "d", "causal"}``, checked against float32 within
  ``BACKWARD_TOLERANCE``; the rows of one shape, ours below too, are checked on one set of inputs and
  timed together, interleaved (``validation.backward``);
* ``flash_bwd_sm80`` (every shipped config of the head dim) and ``flash_bwd_sm80_deterministic`` (the
  model's pick): our backward kernel, ``kernels.flash_attention_backward``, on the same shapes, with
  the same check; its ``out`` and LSE come from our forward, untimed;
* ``flash_bwd_sm90`` and ``flash_bwd_sm90_deterministic`` likewise (``kernels.flash_bwd_sm90.backward``),
  on sm_90 devices only: elsewhere they are not planned, and the results file's ``skipped_families``
  says why (``backward_skips``), as for the forward's ``flash_sm90``;
* decode, last: ``flash_decode_sm80`` (``kernels.flash_attention_with_kvcache``) and SDPA's backends
  (``sdpa_flash_decode``, ``sdpa_cudnn_decode``, ``sdpa_efficient_decode``) over a KV cache, planned and
  run by ``validation.decode`` (its rows of one shape timed together; ``--only decode`` runs them alone);
* variable-length prefill, after decode: ``flash_varlen_sm80`` (``kernels.flash_attention_varlen``), our
  dense forward on the same tokens (``flash_dense``, ``flash_dense_sm80``) and torch's native varlen
  forwards (``torch_varlen_attn``, ``sdpa_flash_nested``), planned and run by ``validation.varlen``
  (``--only varlen`` runs them alone).

The device side is the environment's ``algorithms()`` object (``validation.algo_torch.TorchAlgorithms``
on a GPU, ``validation.fake_env.FakeAlgorithms`` in a dry run): ``make_inputs(kernel, shape, n_sets,
seed)``, ``runner(kernel, config)`` and ``check(kernel, fn, inputs) -> (max_rel_err, finite)``.  A matmul,
loss or MLP row is timed alone with the sweep's timer (CUDA events, median, inputs rotating among the
sets), in the sweep's rounds; the backward, decode and varlen rows of a shape together.  ``peers`` (``--algo-peers``) keeps the rows of the kernels named.  A peer's row stores
the model's best prediction where ``iomodel.algorithms`` has one; our rows the prediction of their
config (``iomodel.api.predict``), as the attention rows do.  Rows of the backward say ``"pass": "bwd"``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iomodel import families
from iomodel.algo_peers import (BACKWARD_KERNELS, DECODE, DETERMINISTIC_KERNELS, VARLEN, algo_flops, algo_of,
                                algo_prediction, attention_shape, default_pass)
from iomodel.results import ResultRow, config_label, shape_label

from .plan import HIDDEN, TOKENS, _model_order
from .records import TOLERANCE, new_record, record_error, recover

__all__ = ["ALGORITHMS", "MATMUL_SHAPES", "CROSS_ENTROPY_SHAPES", "MLP_SHAPES", "BACKWARD_SHAPES",
           "BACKWARD_PEERS", "BACKWARD_TOLERANCE", "AlgoRow", "algorithm_rows", "backward_skips", "run_algorithms"]

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
#: (N, d, causal) of the attention backward, N == M, B*N = 16384 tokens and H*d = 2048 (the attention
#: sweep's): 20 shapes, each with the three peers and our rows (six of flash_bwd_sm80's families, three
#: of flash_bwd_sm90's on sm_90); a call is 10 * 16384 * 2048 * N FLOPs (0.34 to 5.5 TFLOP, half that
#: causal), so a row's check and timing stay under a second of GPU work
BACKWARD_SHAPES = tuple((N, d, causal) for N in (1024, 2048, 4096, 8192, 16384) for d in (64, 128)
                        for causal in (False, True))
BACKWARD_PEERS = ("torch_sdpa_flash_bwd", "torch_sdpa_cudnn_bwd", "torch_sdpa_efficient_bwd")
#: max |d - ref| / max |ref| of dQ, dK and dV (bf16 gradients: looser than a forward's 1e-2)
BACKWARD_TOLERANCE = 2e-2
_QUICK = {"matmul": ((4096, 4096, 4096), (16, 4096, 4096)), "cross-entropy": ((2048, 1024, 32000),),
          "mlp": ((2048, 1024, 4096),), "attention-backward": ((1024, 64, False), (1024, 64, True))}
_FULL = {"matmul": MATMUL_SHAPES, "cross-entropy": CROSS_ENTROPY_SHAPES, "mlp": MLP_SHAPES,
         "attention-backward": BACKWARD_SHAPES}
_KERNELS = {"matmul": ("torch_matmul",), "cross-entropy": ("torch_cross_entropy",), "mlp": ("torch_mlp",),
            "attention-backward": BACKWARD_PEERS + BACKWARD_KERNELS}


@dataclass
class AlgoRow:
    """One row of the algorithm phase: a peer (no config) or our backward kernel with one config."""

    kernel: str
    shape: dict[str, Any]
    config: Any = None          # our kernels' typed config (a FlashBwdConfig)
    why: str = "peer"           # as the attention rows: "sweep" (every shipped config), "model-top", "peer"
    predicted_rank: int | None = None

    @property
    def label(self) -> str:
        return config_label(self.kernel, self.config)


def _shape(algo: str, sizes: tuple, dtype: str) -> dict[str, Any]:
    if algo == "attention-backward":
        N, d, causal = sizes
        return {"B": max(1, TOKENS // N), "H": max(1, HIDDEN // d), "N": N, "M": N, "d": d,
                "causal": bool(causal), "dtype": dtype}
    names = {"matmul": "MNK", "cross-entropy": "TDV", "mlp": "TDF"}[algo]
    return {**dict(zip(names, sizes)), "dtype": dtype}


def _shipped(kernel: str, d: int) -> list[Any]:
    """The shipped configs of head dim ``d`` (each deterministic family ships its atomic twin's)."""
    return [c for c in families.get(kernel).shipped if c.head_dim == d]


#: the compute capability whose code the wgmma families are built for (sm_90a runs on 9.0 only)
WGMMA_CAPABILITY = (9, 0)


def backward_skips(capability, peers: tuple[str, ...] | None = None) -> dict[str, str]:
    """Our backward kernels this device cannot run (kernel -> why), among ``peers`` (None: all): the
    wgmma families off sm_90, as the attention sweep skips ``flash_sm90``."""
    major, minor = capability
    return {k: f"needs sm_90a; this device is sm_{major}{minor}" for k in BACKWARD_KERNELS
            if (peers is None or k in peers) and families.get(k).requires_wgmma
            and tuple(capability) != WGMMA_CAPABILITY}


def _ours(kernel: str, shape: dict[str, Any], predictor, notes: list[str]) -> list[AlgoRow]:
    """Our backward kernel's rows of one shape, in the model's order as the attention sweep's: every
    shipped config of the head dim for the atomic kernel (several configs a shape: the model-accuracy
    and ranking rows), the model's pick alone for the deterministic one (what ``iomodel.chooser.choose``
    picks, ranked here with the run's calibration as the attention sweep's model-top rows are)."""
    cfgs = _shipped(kernel, shape["d"])
    if not cfgs:
        notes.append(f"{kernel}: no shipped config for d={shape['d']}")
        return []
    order, ranked = _model_order(kernel, attention_shape(shape), cfgs, predictor, notes)
    deterministic = kernel in DETERMINISTIC_KERNELS   # its model's pick only
    if deterministic:
        order = order[:1]
    why = "model-top" if deterministic else "sweep"
    return [AlgoRow(kernel, shape, cfgs[i], why, r if i in ranked else None) for r, i in enumerate(order)]


def algorithm_rows(quick: bool = False, dtype: str = "bf16", peers: tuple[str, ...] | None = None,
                   predictor=None, notes: list[str] | None = None, skip=(),
                   algos: tuple[str, ...] | None = None) -> list[AlgoRow]:
    """Every row of the algorithm phase, matmul first, then the backward shape by shape: the three SDPA
    backends, each atomic kernel's shipped configs, each deterministic kernel's pick; then decode
    (``validation.decode.decode_rows``), then varlen (``validation.varlen.varlen_rows``).  ``peers``: only
    those kernels' rows (None: all); ``skip``: kernels left out (``backward_skips``); ``algos``: only those
    algorithms' rows (None: all; ``("decode",)`` for ``--only decode``); ``predictor``
    (``validation.predictor.Predictor``) orders our configs and picks the deterministic ones and our decode
    and varlen rows' (without it: the shipped order, and the kernels pick their own)."""
    from .decode import decode_rows   # here: validation.decode and validation.varlen build on this module
    from .varlen import varlen_rows

    notes = notes if notes is not None else []
    rows = []
    for algo, shapes in (_QUICK if quick else _FULL).items():
        if algos is not None and algo not in algos:
            continue
        for sizes in shapes:
            shape = _shape(algo, sizes, dtype)
            for kernel in _KERNELS[algo]:
                if (peers is not None and kernel not in peers) or kernel in skip:
                    continue
                rows += (_ours(kernel, shape, predictor, notes) if kernel in BACKWARD_KERNELS
                         else [AlgoRow(kernel, shape)])
    if algos is None or DECODE in algos:
        rows += decode_rows(quick, dtype, peers, predictor, notes)
    if algos is None or VARLEN in algos:
        rows += varlen_rows(quick, dtype, peers, predictor, notes)
    return rows


def _progress(i: int, n: int, rec: ResultRow, elapsed_s: float) -> str:
    body = f"{rec.measured_tflops:.1f} TFLOP/s" if rec.ok else f"FAILED ({rec.error or '?'})"
    pred = f" (pred {rec.predicted_tflops:.1f})" if rec.predicted_tflops else " (pred -)"
    cfg = f" {rec.config_label}" if rec.config else ""
    return f"[{i}/{n}] {rec.kernel}{cfg} {shape_label(rec.shape)}: {body}{pred}  [{elapsed_s:.0f}s]"


def _predict(rec: ResultRow, run, config: Any) -> None:
    """The model's prediction stored as at run time: of the row's config for our kernels (the run's
    calibration, as the attention rows), else of the model's best configuration (none while the model
    has none).  TFLOP/s on the count the measurement uses (``algo_flops``)."""
    algo = algo_of(rec.kernel)
    if rec.kernel in BACKWARD_KERNELS:
        pred, err = run.predictor.predict(rec.kernel, attention_shape(rec.shape), config)
    else:
        pred, err = algo_prediction(algo, run.spec.key, rec.shape)
    t = (pred or {}).get("time_s")
    if isinstance(t, (int, float)) and t > 0:
        rec.prediction = pred
        rec.predicted_ms = t * 1e3
        rec.predicted_tflops = algo_flops(algo, rec.shape) / t / 1e12
        rec.predicted_bottleneck = pred.get("bottleneck")
    if err:
        rec.prediction_error = err


def _check_and_time(run, impl, rec: ResultRow, config: Any, seed: int) -> None:
    """Make the row's inputs, check its output once, then time it; the record says how it went."""
    inputs = impl.make_inputs(rec.kernel, rec.shape, run.opts.input_sets, seed)
    fn = impl.runner(rec.kernel, config)
    err, finite = impl.check(rec.kernel, fn, inputs)
    rec.max_rel_err = err if finite else None
    tol = TOLERANCE.get(rec.shape.get("dtype", "bf16"), 1e-2)   # (the backward's rows: validation/backward.py)
    if not finite:
        rec.error = "output has NaN or Inf"
    elif not err < tol:
        rec.error = f"wrong result: max_rel_err {err:.3g} >= {tol:g}"
    if rec.error:
        return
    (outcome,) = run.env.timer.time_interleaved([fn], inputs, run.opts.rounds, on_error=lambda: recover(run.env))
    if isinstance(outcome, Exception):
        record_error(rec, outcome)
        return
    rec.measured_ms = outcome.median_s * 1e3
    rec.measured_tflops = algo_flops(algo_of(rec.kernel), rec.shape) / outcome.median_s / 1e12
    rec.timing = outcome.as_dict()
    rec.ok = True


def run_algorithms(run, rows: list[AlgoRow], first: int, seed: int) -> None:
    """Every algorithm row, numbered from ``first``: predict, check, time, save; the backward rows shape by
    shape (``validation.backward.run_backward``: a shape's rows timed together), then the decode rows and
    the varlen rows (last in the plan, in that order) by ``validation.decode.run_decode`` and
    ``validation.varlen.run_varlen``.  Never raises for a row (its record says why it failed); the budget
    stops new rows as it stops the attention rows."""
    from .backward import BACKWARD, run_backward
    from .decode import run_decode
    from .varlen import run_varlen

    backward = [r for r in rows if algo_of(r.kernel) == BACKWARD]
    decode = [r for r in rows if algo_of(r.kernel) == DECODE]
    varlen = [r for r in rows if algo_of(r.kernel) == VARLEN]
    rows = [r for r in rows if algo_of(r.kernel) not in (BACKWARD, DECODE, VARLEN)]
    _run_rows(run, rows, first, seed)
    first += len(rows)
    run_backward(run, backward, first, seed)
    run_decode(run, decode, first + len(backward), seed)
    run_varlen(run, varlen, first + len(backward) + len(decode), seed)


def _run_rows(run, rows: list[AlgoRow], first: int, seed: int) -> None:
    """The algorithm rows other than the backward's, decode's and varlen's (matmul, the loss, the MLP: one
    peer a shape), one after the other, each timed alone."""
    impl = None
    for i, row in enumerate(rows, first):
        rec = new_record(row, default_pass(row.kernel))   # "bwd" for the backward, none for matmul etc.
        _predict(rec, run, row.config)
        if run.out_of_time():
            rec.error = f"skipped: time budget of {run.opts.budget_s:.0f}s used up"
            run.add(rec)
            continue
        try:
            impl = impl or run.env.algorithms()
            _check_and_time(run, impl, rec, row.config, seed + i)
        except Exception as exc:  # noqa: BLE001 - e.g. out of memory: this row says so, the next one runs
            record_error(rec, exc)
            recover(run.env)
        run.env.release()
        run.rows.append(rec)
        run.log(_progress(i, run.n, rec, run.elapsed()))
        run.save()
