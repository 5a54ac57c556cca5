"""``pacopt study STUDY.yaml``: run a study's grid and write its table, results and plots."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from pacopt.infra.commandline import CommandParser, run_command
from pacopt.infra.errors import InputError
from pacopt.infra.extras import require
from pacopt.infra.ray_cluster import LOCAL, add_ray_option


def study_parser() -> CommandParser:
    """The ``study`` command's arguments (a bad flag is a one-line error, exit 2)."""
    parser = CommandParser(prog="pacopt study", description=(
        "Run a study (STUDY.yaml: grids of instances x methods) and write results.parquet, "
        "results.csv, results/<cell>.json and plots."))
    parser.add_argument("study", help="the study file (YAML; see studies/ for examples)")
    parser.add_argument("--out", metavar="DIR",
                        help="output folder (default: <study name>-results in the current "
                             "folder); a rerun resumes, skipping finished cells")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="local processes, or CPUs of the local Ray instance (default: all "
                             "cores); 1 runs in this process")
    add_ray_option(parser, help="run on Ray: a local instance, or the cluster at ADDRESS "
                                "(e.g. auto, ray://host:10001)")
    parser.add_argument("--no-plots", action="store_true", help="write the table only")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    return parser


def study_main(argv: list[str] | None = None) -> int:
    """Entry point of ``pacopt study``: 0 when every cell finished, 1 when some failed (their
    rows say why), 2 for a bad study file (before anything runs), 130 when interrupted."""
    return run_command(study_command, argv)


#: What the command prints per (grid, method); the study's table holds every metric.
SUMMARY_METRICS = ("blocking_rate", "worker_utilisation", "mean_speedup")


def summary_text(frame) -> str:
    """The printed summary: one line per (grid, method), the blocking rate as mean ± std over
    its runs, about 100 characters wide (the tidy table in ``results.csv`` holds the rest)."""
    def number(value: float, digits: int) -> str:
        return "-" if math.isnan(value) else f"{value:.{digits}f}"

    head = ("grid", "method", "runs", "blocking (mean ± std)", "utilisation", "speed-up")
    rows = [(str(r.grid), str(r.method), str(r.runs),
             f"{number(r.blocking_rate, 4)} ± {number(r.blocking_rate_std, 4)}",
             number(r.worker_utilisation, 3), number(r.mean_speedup, 2))
            for r in frame.itertuples()]
    widths = [max(len(cell) for cell in column) for column in zip(head, *rows)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip()
                     for line in (head, *rows))


def study_command(argv: list[str]) -> int:
    """``pacopt study``'s body, as the ``pacopt`` command registry calls it (inside its
    one-line-error wrapper)."""
    from pacopt.analysis.metrics import summary
    from pacopt.analysis.runner import run_study, table_file
    from pacopt.analysis.study_spec import load_study

    args = study_parser().parse_args(argv)
    if args.workers is not None and args.workers < 1:
        raise InputError("--workers must be >= 1")
    if args.ray is not None:
        require("ray", "ray", "pacopt study --ray")
    study = load_study(args.study)
    out = Path(args.out) if args.out else Path(os.getcwd()) / f"{study.name}-results"
    if out.exists() and not out.is_dir():
        raise InputError(f"--out: '{out}' exists and is not a folder")
    ray_address = None if args.ray in (None, LOCAL) else args.ray  # run_study checks it
    table = run_study(study, out, workers=args.workers, ray=args.ray is not None,
                      ray_address=ray_address, progress=not args.quiet, plots=not args.no_plots)
    failed = int((table["status"] == "error").sum()) if len(table) else 0
    if not args.quiet:
        print(summary_text(summary(table, by=("grid", "method"), metrics=SUMMARY_METRICS)))
        print(f"{len(table)} of {len(study.cells)} cells, {failed} failed; table: "
              f"{table_file(out)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(study_main())
