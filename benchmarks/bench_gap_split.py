"""The gap to the offline optimum split into hindsight, placement and degree choice, on the paper
workload: ``studies/placement.yaml`` run (resumably) and printed as tables.

    python benchmarks/bench_gap_split.py [--grid split-200 split-1001] [--study-out DIR]
                                         [--workers 1] [--out FILE.json]

Per grid (200 jobs on seed 10000, 1001 jobs on seeds 10000-10002) and per method under study
(``pac-ml`` and ``tuned`` under first fit, ``tuned`` under best fit), one row per distribution,
the mean over its seeds of (``pacopt.analysis.gap_split``): the method's blocking rate and its
parts, floor (the exact bound), unproven (bound - incumbent), hindsight (incumbent - the best
rule under best fit), placement (that rule under best fit - under first fit) and degree choice
(the rule under first fit - the method), all in blocking-rate units, with the best rule. The
exact rows are CP-SAT with the study's time limit (60 s at 200 jobs, 120 s at 1001, 2 threads).
The study runs into ``--study-out`` (default ``placement-results``, where ``pacopt study``
puts it too); ``--out`` writes the split of every grid as one results data file
(``docs/results/NAME.json``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pacopt.analysis import Study, gap_split_frame, load_study, run_study

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import (  # noqa: E402
    REPOSITORY,
    add_out_argument,
    add_pipedream_argument,
    use_pipedream,
    write_results,
)

ROOT = REPOSITORY
METHODS = ("pac-ml", "tuned", "tuned @best-fit")
COLUMNS = ("method_blocking", "floor", "unproven", "hindsight", "placement", "degree")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", type=Path, default=ROOT / "studies" / "placement.yaml")
    parser.add_argument("--grid", nargs="+", default=["split-200", "split-1001"])
    parser.add_argument("--study-out", type=Path, default=Path("placement-results"),
                        metavar="DIR", help="the study's folder (resumable)")
    parser.add_argument("--workers", type=int, default=1)
    add_pipedream_argument(parser)
    add_out_argument(parser)
    args = parser.parse_args()
    use_pipedream(args.pipedream)
    study = load_study(args.study)
    cells = [c for c in study.cells if c.params["grid"] in args.grid]
    table = run_study(Study(study.spec, study.path, cells), args.study_out, workers=args.workers,
                      plots=False)
    results: dict[tuple, dict] = {}  # (grid, distribution) -> the --out row's cells
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
                cells_of = results.setdefault((grid, dist), {
                    "jobs": int(frame["num_jobs"].iloc[0]),
                    **{c: f"{row[c]:.3f}" for c in COLUMNS[1:5]}})
                cells_of[method] = f"{row['degree']:+.3f} / {row['method_blocking']:.3f}"
    if args.out:
        methods = [m for m in METHODS if any(m in r for r in results.values())]
        write_results(
            args.out, "The gap, split into its parts (blocking-rate units)",
            ["β", "jobs", *COLUMNS[1:5], *(f"`{m}` degree / blocking" for m in methods)],
            [[dist, r["jobs"], *(r[c] for c in COLUMNS[1:5]), *(r.get(m) for m in methods)]
             for (grid, dist), r in results.items()],
            notes="The paper's workload under ddls; grids "
                  + ", ".join(f"{g} (seeds {sorted(map(int, table[table['grid'] == g]['seed'].unique()))})"
                              for g in args.grid)
                  + ". Floor: the exact bound; unproven: incumbent minus bound; hindsight: the "
                    "best rule under best fit minus the incumbent; placement: that rule under "
                    f"`{methods[0]}`'s placer minus under best fit; degree: the method's "
                    "blocking minus the rule's under its placer (negative: its degree choice "
                    "gains).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
