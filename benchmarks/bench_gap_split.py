"""The gap to the offline optimum split into hindsight, placement and degree choice, on the paper
workload: ``studies/placement.yaml`` run (resumably) and printed as tables.

    python benchmarks/bench_gap_split.py [--grid split-200 split-1001] [--out DIR] [--workers 1]

Per grid (200 jobs on seed 10000, 1001 jobs on seeds 10000-10002) and per method under study
(``pac-ml`` and ``tuned`` under first fit, ``tuned`` under best fit), one row per distribution,
the mean over its seeds of (``pacopt.analysis.gap_split``): the method's blocking rate and its
parts, floor (the exact bound), unproven (bound - incumbent), hindsight (incumbent - the best
rule under best fit), placement (that rule under best fit - under first fit) and degree choice
(the rule under first fit - the method), all in blocking-rate units, with the best rule. The
exact rows are CP-SAT with the study's time limit (60 s at 200 jobs, 120 s at 1001, 2 threads).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from heldout import SHARED

from pacopt.analysis import Study, gap_split_frame, load_study, run_study

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("pac-ml", "tuned", "tuned @best-fit")
COLUMNS = ("method_blocking", "floor", "unproven", "hindsight", "placement", "degree")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", type=Path, default=ROOT / "studies" / "placement.yaml")
    parser.add_argument("--grid", nargs="+", default=["split-200", "split-1001"])
    parser.add_argument("--out", type=Path, default=Path("placement-results"))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--pipedream", type=Path, default=SHARED,
                        help="folder with the PipeDream <model>.txt profiles")
    args = parser.parse_args()
    os.environ.setdefault("PACOPT_PIPEDREAM_DIR", str(args.pipedream))
    study = load_study(args.study)
    cells = [c for c in study.cells if c.params["grid"] in args.grid]
    table = run_study(Study(study.spec, study.path, cells), args.out, workers=args.workers,
                      plots=False)
    for grid in args.grid:
        rows = table[table["grid"] == grid]
        for method in METHODS:
            frame = gap_split_frame(rows, method)
            if frame.empty:
                continue
            means = frame.groupby("distribution", sort=False)[list(COLUMNS)].mean()
            rules = frame.groupby("distribution", sort=False)["rule"].agg(
                lambda r: ", ".join(sorted(set(r))))
            seeds = sorted(frame["seed"].unique())
            print(f"\n{grid}, {method} (seeds {seeds}): blocking rate and its parts")
            print("| β | " + " | ".join(COLUMNS) + " | best rule under best fit |")
            print("|---|" + "---|" * (len(COLUMNS) + 1))
            for dist, row in means.iterrows():
                print(f"| {dist} | " + " | ".join(f"{row[c]:.3f}" for c in COLUMNS)
                      + f" | {rules[dist]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
