"""The accuracy report as text (``python -m iomodel validate``), and the table cells the HTML page
(``iomodel.report.validation_html``) shares with it, so both print the same numbers the same way."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from .accuracy import MIN_GROUP, OUR_KERNELS, PEER_KERNELS, GroupEval, Report, RowEval
from .peer_ratios import WIN_MEDIAN, closest
from .results import shape_label

__all__ = ["stats_rows", "group_cells", "row_cells", "failed_cells", "algo_sections", "backward_ranking",
           "format_report"]


def _pct(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:+.1f}%" if signed else f"{v:.1f}%"


def _num(v: float | None, fmt: str = ".3f") -> str:
    return "-" if v is None else format(v, fmt)


# --------------------------------------------------------------------------- cells (shared with report.py)

def stats_rows(report: Report) -> list[list[str]]:
    """The accuracy table: rows, n, median |err|, max |err|, mean signed; our kernels (then each
    family) and the peers (then each peer), the attention forward's; then, where the results have
    them, our backward kernels' rows (pass "bwd"), a number of their own."""
    named = ([("our kernels", report.ours)]
             + [(f"  {k}", s) for k, s in report.per_kernel.items() if k in OUR_KERNELS]
             + [("peers", report.peers)]
             + [(f"  {k}", s) for k, s in report.per_kernel.items() if k in PEER_KERNELS])
    if report.backward_per_kernel:
        named += ([("our backward kernels (bwd)", report.backward)]
                  + [(f"  {k}", s) for k, s in report.backward_per_kernel.items()])
    return [[name, str(st.n), _pct(st.median_abs_pct), _pct(st.max_abs_pct), _pct(st.mean_signed_pct, True)]
            for name, st in named]


def group_cells(g: GroupEval) -> list[str]:
    """A rank-statistics row after its shape and size: spearman, model's top, best measured, top-1."""
    return [_num(g.spearman, "+.2f"), f"{g.top_config} ({g.top_measured_s * 1e3:.3f} ms)",
            f"{g.best_config} ({g.best_measured_s * 1e3:.3f} ms)",
            ("yes" if g.top1 else "no") + f" ({g.top_slowdown_pct:+.1f}%)"]


def row_cells(r: RowEval) -> list[str]:
    """kernel, config, shape, measured ms and TFLOP/s, predicted ms and TFLOP/s, error, bottleneck."""
    return [r.kernel, r.config_label, shape_label(r.shape), f"{r.measured_s * 1e3:.3f}",
            f"{r.measured_tflops:.1f}", _num(r.predicted_s * 1e3 if r.predicted_s else None),
            _num(r.predicted_tflops, ".1f"), _pct(r.err_pct, True), r.bottleneck or "-"]


def failed_cells(f: Mapping[str, Any]) -> list[str]:
    """kernel, config, shape, error of a row that is not ok."""
    return [f["kernel"], f.get("config") or "-", shape_label(f["shape"]) if f.get("shape") else "?", f["error"]]


# --------------------------------------------------------------------------- text

def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    """Aligned columns, indented by two spaces; ``right`` marks the right-aligned ones."""
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r)]

    def fmt(cells):
        return "  ".join((c.rjust(w) if rj else c.ljust(w)) for c, w, rj in zip(cells, widths, right)).rstrip()

    return ["  " + ln for ln in [fmt(headers), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]]


def _row_note(r: RowEval) -> str:
    if r.prediction_source == "recomputed":
        return ""
    if r.prediction_source == "stored":
        return "stored prediction" + (f" ({r.prediction_error[:60]})" if r.prediction_error else "")
    return (r.prediction_error or "no prediction")[:80]


#: calibration numbers in the report's header: field, format of the scaled value, scale
_CALIBRATION_BITS = (
    ("gemm_flops", "GEMM {:.0f} TFLOP/s", 1e12),
    ("copy_bandwidth", "copy {:.2f} TB/s", 1e12),
    ("l2_bandwidth", "L2 read {:.2f} TB/s", 1e12),
    ("mma_sync_flops_per_clk_per_sm", "mma.sync {:.0f} FLOP/clk/SM", 1.0),
    ("exp2_per_clk_per_sm", "ex2 {:.1f}/clk/SM", 1.0),
    ("fp32_fma_per_clk_per_sm", "FMA {:.1f}/clk/SM", 1.0),
    ("clock_hz", "at {:.0f} MHz", 1e6),
)

_GROUP_HEADERS = ("spearman", "model's top", "best measured", "top-1 within 5%")


def _header(report: Report) -> list[str]:
    how = "recomputed with the current model" if report.recomputed else "as stored in the results"
    out = [f"iomodel validation: {', '.join(report.devices) or '?'}"
           f"{f' ({report.gpu_key})' if report.gpu_key else ''}; predictions {how}"]
    for c in report.calibrations:
        bits = [fmt.format(c[k] / scale) for k, fmt, scale in _CALIBRATION_BITS if c.get(k)]
        out.append(f"calibration {c.get('gpu_key')} ({c.get('date')}): {', '.join(bits) or 'nothing measured'}")
    return out


def _errors(report: Report) -> list[str]:
    return ["", "Error of predicted time, (predicted - measured) / measured:",
            *_table(["rows", "n", "median |err|", "max |err|", "mean signed"], stats_rows(report),
                    [False, True, True, True, True])]


def _ranking(report: Report) -> list[str]:
    out = ["", f"Tile ranking (each kernel x shape timed with >= {MIN_GROUP} configs):"]
    if not report.groups:
        return out + ["  (no group with enough configs)"]
    rows = [[g.kernel, shape_label(g.shape), str(g.n), *group_cells(g)] for g in report.groups]
    return out + _table(["kernel", "shape", "n", *_GROUP_HEADERS], rows,
                        [False, False, True, True, False, False, False]) + [
        f"  pooled mean spearman: {_num(report.pooled_spearman, '+.3f')}; "
        f"top-1 within 5%: {report.top1_hits}/{report.top1_total}"]


def _choice(report: Report) -> list[str]:
    if not report.shape_groups:
        return []
    rows = [[shape_label(g.shape), str(g.n), *group_cells(g)] for g in report.shape_groups]
    hits = sum(1 for g in report.shape_groups if g.top1)
    return ["", "Kernel and tile choice (every family's configurations of one shape ranked together):",
            *_table(["shape", "n", *_GROUP_HEADERS], rows, [False, True, True, False, False, False]),
            f"  mean spearman: {_num(report.pooled_spearman_all, '+.3f')}; "
            f"top-1 within 5%: {hits}/{len(report.shape_groups)}"]


def peer_ratio_table(report: Report) -> tuple[list[str], list[list[str]]]:
    """The "Against the peers" table: headers and a row a (shape, our family): the model's pick, its time, each
    peer's time over it."""
    peers = sorted({p for pr in report.peer_ratios for p in pr.peers})
    rows = [[shape_label(pr.shape), pr.kernel, pr.config, _num(pr.ours_s * 1e3),
             *(_num(pr.peers.get(p)) for p in peers)] for pr in report.peer_ratios]
    return ["shape", "ours", "the model's pick", "ms", *peers], rows


def peer_ratio_summary(report: Report) -> str:
    """A family by family count of the shapes where a peer was faster than the model's pick."""
    kernels = dict.fromkeys(pr.kernel for pr in report.peer_ratios)
    counts = [(k, [pr for pr in report.peer_ratios if pr.kernel == k]) for k in kernels]
    return "; ".join(f"{k}: a peer faster at {sum(1 for pr in prs if pr.best_peer[1] < 1.0)} of {len(prs)} shapes"
                     for k, prs in counts)


def _against_peers(report: Report) -> list[str]:
    if not report.peer_ratios:
        return []
    headers, rows = peer_ratio_table(report)
    return ["", "Against the peers (each peer's measured time over the model's pick's; above 1: ours faster):",
            *_table(headers, rows, [False, False, False] + [True] * (len(headers) - 3)),
            f"  {peer_ratio_summary(report)}"]


OVER_THE_RUNS = ("Over the runs (the closest peer a shape: its time over the model's pick's in each file; a win: "
                 f"faster in every run, or a median below {WIN_MEDIAN}; mma.sync families against mma.sync peers)")


def parity_table(report: Report) -> tuple[list[str], list[list[str]], str]:
    """The "Over the runs" table (headers, rows, summary), or no rows where no shape was timed in two files: one
    run's lead is not a win (iomodel.peer_ratios.parity)."""
    headers = ["shape", "ours", "peer", "runs", "median", "min", "max", "peer wins"]
    if not any(len(sp.ratios) >= 2 for sp in report.parity):
        return headers, [], ""
    shown = closest(report.parity)
    rows = [[shape_label(sp.shape), sp.kernel, sp.peer, str(len(sp.ratios)), _num(sp.median), _num(min(sp.ratios)),
             _num(max(sp.ratios)), "yes" if sp.peer_wins else "no"] for sp in shown]
    won = sum(1 for sp in shown if sp.peer_wins)
    return headers, rows, f"a peer wins {won} of {len(shown)} (shape, family) pairs"


def over_the_runs(report: Report) -> list[str]:
    """The "Over the runs" section's lines ([] where no shape was timed in two files)."""
    headers, rows, summary = parity_table(report)
    if not rows:
        return []
    return ["", f"{OVER_THE_RUNS}:", *_table(headers, rows, [False, False, False, True, True, True, True, False]),
            f"  {summary}"]


def _rows(report: Report, max_rows: int | None) -> list[str]:
    shown = report.rows if max_rows is None else report.rows[:max_rows]
    rows = [row_cells(r) + [_row_note(r)] for r in shown]
    out = ["", "Rows:", *_table(["kernel", "config", "shape", "meas ms", "meas TFLOP/s", "pred ms", "pred TFLOP/s",
                                 "err", "bottleneck", "note"], rows,
                                [False, False, False, True, True, True, True, True, False, False])]
    if max_rows is not None and len(report.rows) > max_rows:
        out.append(f"  ... {len(report.rows) - max_rows} more rows")
    return out


def _algo_note(a) -> str:
    if a.prediction_source == "recomputed":
        return ""
    return (a.prediction_source or a.prediction_error or "no prediction")[:60]


ALGO_HEADERS = ["peer", "device", "shape", "meas ms", "meas TFLOP/s", "pred ms", "pred TFLOP/s", "err",
                "bottleneck", "note"]
ALGO_TITLE = "Algorithms as PyTorch runs them (peers; the model's best configuration where it predicts one)"
BACKWARD_HEADERS = ["kernel", "config", "device", "shape", "meas ms", "meas TFLOP/s", "pred ms", "pred TFLOP/s",
                    "err", "bottleneck", "note"]
BACKWARD_TITLE = "Our attention backward kernels (pass bwd; the model's prediction of each configuration)"


def algo_cells(a) -> list[str]:
    """One algorithm row's cells (ALGO_HEADERS), for the text report and the page."""
    return [a.kernel, a.device, shape_label(a.shape), f"{a.measured_s * 1e3:.3f}", f"{a.measured_tflops:.1f}",
            _num(a.predicted_s * 1e3 if a.predicted_s else None), _num(a.predicted_tflops, ".1f"),
            _pct(a.err_pct, True), a.bottleneck or "-", _algo_note(a)]


def algo_sections(report: Report) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, headers, rows) of the peers' table and of our backward kernels' (each only when it has
    rows), for the text report and the page alike."""
    peers = [algo_cells(a) for a in report.algorithms if not a.ours]
    ours = [[a.kernel, a.config_label, *algo_cells(a)[1:]] for a in report.algorithms if a.ours]
    return [(t, h, r) for t, h, r in ((ALGO_TITLE, ALGO_HEADERS, peers), (BACKWARD_TITLE, BACKWARD_HEADERS, ours))
            if r]


def backward_ranking(report: Report) -> str | None:
    """One line on the model's tile ranking of our backward kernels (None without such a group)."""
    groups = report.backward_groups
    if not groups:
        return None
    rhos = [g.spearman for g in groups if g.spearman is not None]
    mean = sum(rhos) / len(rhos) if rhos else None
    return (f"tile ranking over {len(groups)} kernel x shape groups: mean spearman {_num(mean, '+.3f')}; "
            f"top-1 within 5%: {sum(g.top1 for g in groups)}/{len(groups)}")


def _algorithms(report: Report) -> list[str]:
    """PyTorch's versions of the library's algorithms, then our backward kernels: measured, and
    predicted where the model can."""
    out = []
    for title, headers, rows in algo_sections(report):
        right = [h.startswith(("meas", "pred", "err")) for h in headers]
        out += ["", f"{title}:", *_table(headers, rows, right)]
        if title == BACKWARD_TITLE and backward_ranking(report):
            out.append(f"  {backward_ranking(report)}")
    return out


def _failures_and_notes(report: Report) -> list[str]:
    out = []
    if report.failed:
        out += ["", f"Rows not ok ({len(report.failed)}):"]
        for f in report.failed:
            kernel, config, shape, error = failed_cells(f)
            out.append(f"  {kernel} {config} {shape}: {error}")
    if report.notes:
        out += ["", "Notes:", *(f"  - {n}" for n in report.notes)]
    return out


def format_report(report: Report, *, max_rows: int | None = None) -> str:
    """A readable plain-text report."""
    out = (_header(report) + _errors(report) + _ranking(report) + _choice(report) + _against_peers(report)
           + over_the_runs(report) + _rows(report, max_rows)
           + _algorithms(report) + _failures_and_notes(report))
    return "\n".join(out) + "\n"
