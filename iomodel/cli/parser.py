"""The commands of `python -m iomodel`, their options, help and examples (docs/cli.md has the rules)."""
from __future__ import annotations

import argparse

from ..boundary import ArgParser, package_version
from .pictures import cmd_draw, cmd_pseudocode, cmd_roofline
from .predict import cmd_predict, cmd_tiles
from .diagram_args import DIAGRAM_ALGOS
from .problem import ATTENTION_ALGOS, ATTENTION_SIZES, MATMUL_SIZES, add_problem_args, positive
from .reports import cmd_gpus, cmd_validate

EXAMPLES = {
    "predict": ["iomodel predict",
                "iomodel predict --algo flash-attention-causal --gpu a100-sxm-80gb --seqlen 8192 --head-dim 64",
                "iomodel predict --kernel flash_sm80 --tiles block_m=128,block_n=64,warps=4,stages=2 --json",
                "iomodel predict --kernel flash_bwd_sm80 --causal --kv-heads 4",
                "iomodel predict --kernel flash_decode_sm80 --batch 1 --heads 32 --kv-heads 8 --kv-seqlen 8192"],
    "tiles": ["iomodel tiles --kernel flash_sm80 --why", "iomodel tiles --algo matmul --m 4096 --top 5 --json"],
    "pseudocode": ["iomodel pseudocode", "iomodel pseudocode --algo flash-attention-causal --kernel flash_sm90",
                   "iomodel pseudocode --algo matmul --symbolic"],
    "draw": ["iomodel draw --out fa.svg", "iomodel draw --algo gqa --out gqa.html", "iomodel draw --out - > fa.svg"],
    "roofline": ["iomodel roofline --out roofline.html", "iomodel roofline --gpu h200-sxm --seqlen 16384 --top 8"],
    "validate": ["iomodel validate validation/results/*.json",
                 "iomodel validate run.json --html report.html --gpu h100-sxm",
                 "iomodel validate run.json --calibration none --json"],
    "gpus": ["iomodel gpus", "iomodel gpus --json"],
}


def _epilog(cmd: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[cmd])


def _json(p) -> None:
    p.add_argument("--json", action="store_true", help="print the results as JSON (the Python API's field names)")


def _problem_commands(sub) -> None:
    sp = sub.add_parser("predict", help="predict time and FLOP/s (default: FlashAttention forward on H100 SXM)",
                        epilog=_epilog("predict"))
    add_problem_args(sp)
    sp.add_argument("--tiles", metavar="K=V,...",
                    help="explicit tiles of --kernel, e.g. block_m=128,block_n=64,warps=4,stages=2 "
                         "(default: search the family's space)")
    _json(sp)
    st = sub.add_parser("tiles", help="search tile choices and rank them", epilog=_epilog("tiles"))
    add_problem_args(st)
    st.add_argument("--top", type=positive, default=10, metavar="N", help="configurations to list per family")
    st.add_argument("--why", action="store_true", help="also list rejected configurations and the reason")
    st.add_argument("--why-limit", type=positive, metavar="N", help="rejected configurations listed (default: 30)")
    _json(st)
    ps = sub.add_parser("pseudocode", help="print the loop nest of the algorithm's partitioned diagram",
                        epilog=_epilog("pseudocode"))
    add_problem_args(ps)
    ps.add_argument("--symbolic", action="store_true", help="keep sizes as symbols (then no GPU option is read)")
    dr = sub.add_parser("draw", help="draw the diagram as SVG or HTML", epilog=_epilog("draw"))
    add_problem_args(dr, gpu=False)
    dr.add_argument("--out", default="diagram.svg", metavar="FILE.svg|FILE.html|-",
                    help="the picture; - writes it to standard output")
    rf = sub.add_parser("roofline", help="roofline page (self-contained plotly HTML)", epilog=_epilog("roofline"))
    add_problem_args(rf, algos=(*ATTENTION_ALGOS, *DIAGRAM_ALGOS), kernel=False,
                     sizes=ATTENTION_SIZES + MATMUL_SIZES + ("window",))
    rf.add_argument("--out", default="roofline.html", metavar="FILE.html|-",
                    help="the page; - writes it to standard output")
    rf.add_argument("--top", type=positive, default=5, metavar="N", help="flash configurations per family")
    for p, func in ((sp, cmd_predict), (st, cmd_tiles), (ps, cmd_pseudocode), (dr, cmd_draw), (rf, cmd_roofline)):
        p.set_defaults(func=func)


def _report_commands(sub) -> None:
    va = sub.add_parser("validate", help="compare measured results with the current model (no GPU needed)",
                        epilog=_epilog("validate"))
    va.add_argument("results", nargs="+", metavar="RESULTS.json", help="results files of python -m validation run")
    va.add_argument("--html", metavar="PAGE.html|-", help="also write a self-contained report page; - writes "
                                                          "the page to standard output instead of the text")
    va.add_argument("--gpu", metavar="KEY|PATH", help="spec of the page's roofline (default: the results' GPU)")
    va.add_argument("--gpu-spec", dest="gpu", help=argparse.SUPPRESS)  # the old name, kept for scripts
    va.add_argument("--calibration", metavar="auto|none|KEY|PATH",
                    help="predict every file with this calibration: auto (each GPU's shipped one), none "
                         "(datasheet rates), a key or a TOML path (default: the one stored in each file)")
    va.add_argument("--force-calibration", action="store_true",
                    help="use a --calibration measured on another GPU than the results'")
    va.add_argument("--stored", action="store_true", help="use the predictions stored in the files, not recomputed")
    _json(va)
    va.set_defaults(func=cmd_validate)
    gp = sub.add_parser("gpus", help="list the GPU spec files", epilog=_epilog("gpus"))
    _json(gp)
    gp.set_defaults(func=cmd_gpus)


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog="iomodel", description="IO and performance models of diagrams on GPUs",
                  epilog="examples:\n  iomodel predict\n  iomodel tiles --kernel flash_sm80 --why\n"
                         "  iomodel COMMAND --help   (every option of a command, with its default)")
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", required=True, parser_class=ArgParser)
    _problem_commands(sub)
    _report_commands(sub)
    return p
