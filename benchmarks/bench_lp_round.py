"""lp-round against the exact optimum: its ratio to CP-SAT's incumbent and bound, and its time.

    python benchmarks/bench_lp_round.py [--sizes 50 100 200 500 1001] [--small-seeds 0 1 2]
                                        [--rounding-seeds 0 1 2] [--cpsat-time-limit 60]
                                        [--run-cpsat-large] [--pipedream DIR]

Two tables, on the instances of ``bench_exact.py`` (ddls, 4x4x2, the five graphs, one arrival per
1000 ms, no horizon):
1. 50 jobs, beta A-D, workload seeds ``--small-seeds``: CP-SAT (2 threads, ``--cpsat-time-limit``)
   and lp-round with each of ``--rounding-seeds``; the ratio is lp-round's accepted jobs over
   CP-SAT's incumbent (the optimum where CP-SAT proved it: "proven") and over the bound.
2. beta A, seed 0, ``--sizes`` jobs: lp-round's accepted, bound and seconds next to CP-SAT's.
   CP-SAT's numbers there are docs/exact.md's table (60 s up to 200 jobs, 600 s above, 2 threads)
   unless ``--run-cpsat-large`` runs it here with those limits.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from pacopt.model.instance import instance_from_dict
from pacopt.model.pipedream import PAPER_GRAPHS
from pacopt.solvers.api import solve

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import add_pipedream_argument, use_pipedream  # noqa: E402

#: CP-SAT on beta A, seed 0 (docs/exact.md, lp-round by size): jobs -> (accepted, bound, limit s).
README_CPSAT = {50: (50, 50, 60), 100: (93, 99, 60), 200: (186, 198, 60), 500: (456, 492, 600),
                1001: (888, 971, 600)}


def instance(pipedream: Path, num_jobs: int, dist: str, seed: int):
    return instance_from_dict({
        "graphs": {g: {"pipedream": str(pipedream / f"{g}.txt")} for g in PAPER_GRAPHS},
        "workload": {"graphs": list(PAPER_GRAPHS), "num_jobs": num_jobs, "interarrival_ms": 1000,
                     "max_jct_fraction": {"paper": dist}, "seed": seed}})


def timed(inst, method: str, **kwargs):
    started = time.perf_counter()
    solution = solve(inst, method, **kwargs)
    if not solution.validated:
        raise SystemExit(f"{method} on {inst.source}: not validated")
    return solution, time.perf_counter() - started


def small_table(args) -> None:
    print("50 jobs: lp-round (one row per rounding seed) against CP-SAT")
    print("| beta | seed | CP-SAT accepted / bound (status, s) | lp-round accepted | "
          "ratio to CP-SAT | ratio to bound | lp-round s |")
    print("|---|---|---|---|---|---|---|")
    proven_ratios, all_ratios = [], []
    for dist in "ABCD":
        for seed in args.small_seeds:
            inst = instance(args.pipedream, 50, dist, seed)
            exact, exact_s = timed(inst, "cpsat", time_limit=args.cpsat_time_limit, threads=2,
                                   seed=0)
            for rseed in args.rounding_seeds:
                rounded, rounded_s = timed(inst, "lp-round", seed=rseed)
                ratio = rounded.accepted / exact.accepted
                all_ratios.append(ratio)
                if exact.status == "optimal":
                    proven_ratios.append(ratio)
                print(f"| {dist} | {seed} | {exact.accepted} / {exact.bound_accepted} "
                      f"({'proven' if exact.status == 'optimal' else 'open'}, {exact_s:.0f}) | "
                      f"{rounded.accepted} | {ratio:.3f} | "
                      f"{rounded.accepted / exact.bound_accepted:.3f} | {rounded_s:.1f} |",
                      flush=True)
    for label, ratios in (("proven optima", proven_ratios), ("all", all_ratios)):
        if ratios:
            print(f"ratio to CP-SAT over {label}: min {min(ratios):.3f}, median "
                  f"{np.median(ratios):.3f}, mean {np.mean(ratios):.3f} ({len(ratios)} runs)")


def size_table(args) -> None:
    print("\nbeta A, seed 0: lp-round (rounding seed 0) next to CP-SAT")
    print("| jobs | CP-SAT accepted / bound (limit s) | lp-round accepted / bound | "
          "ratio to CP-SAT | ratio to best bound | lp-round s | LPs |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes:
        inst = instance(args.pipedream, size, "A", 0)
        if args.run_cpsat_large or size not in README_CPSAT:
            limit = 60 if size <= 200 else 600
            exact, _ = timed(inst, "cpsat", time_limit=limit, threads=2, seed=0)
            reference = (exact.accepted, exact.bound_accepted, limit)
        else:
            reference = README_CPSAT[size]
        rounded, seconds = timed(inst, "lp-round", seed=0)
        accepted, bound, limit = reference
        print(f"| {size} | {accepted} / {bound} ({limit}) | {rounded.accepted} / "
              f"{rounded.bound_accepted} | {rounded.accepted / accepted:.3f} | "
              f"{rounded.accepted / min(bound, rounded.bound_accepted):.3f} | {seconds:.0f} | "
              f"{rounded.metrics['lp_count']} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 500, 1001])
    parser.add_argument("--small-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounding-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--cpsat-time-limit", type=float, default=60.0)
    parser.add_argument("--run-cpsat-large", action="store_true")
    parser.add_argument("--skip-small", action="store_true", help="only the size table")
    add_pipedream_argument(parser)
    args = parser.parse_args()
    args.pipedream = use_pipedream(args.pipedream, required=True)
    if not args.skip_small:
        small_table(args)
    size_table(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
