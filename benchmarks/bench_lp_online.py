"""lp-online against the heuristics, ``tuned`` and the learned agent on held-out paper workloads.

    python benchmarks/bench_lp_online.py [--seeds 3] [--jobs 1001] [--methods ...]
                                         [--pipedream DIR]

The paper workload (the five graphs, 4x4x2, ddls, horizon 1e6 ms) of each distribution A-D on
the first ``--seeds`` of ``pacopt.model.paper_workload.HELD_OUT_SEEDS`` (never used to tune or train
anything). Every episode goes through ``solve`` (validated), seed 0. Each cell is the mean
blocking rate over the seeds and its spread (sample standard deviation); the last columns give
lp-online's mean seconds per episode. ``pac-ml`` is skipped when its checkpoint is missing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pacopt.infra.errors import InputError
from pacopt.model.paper_workload import PAPER_DISTRIBUTIONS, paper_instance
from pacopt.solvers.api import solve

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import add_heldout_arguments, heldout_seeds  # noqa: E402

METHODS = ("min-feasible", "para-min", "para-max", "random", "tuned", "pac-ml", "lp-online")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_heldout_arguments(parser)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    args = parser.parse_args()
    seeds = heldout_seeds(parser, args)
    rates: dict[str, dict[str, list[float]]] = {m: {d: [] for d in PAPER_DISTRIBUTIONS}
                                                for m in args.methods}
    seconds: dict[str, list[float]] = {d: [] for d in PAPER_DISTRIBUTIONS}
    missing: set[str] = set()
    with tqdm(total=len(PAPER_DISTRIBUTIONS) * len(seeds) * len(args.methods), unit="episode",
              disable=None) as bar:
        for dist in PAPER_DISTRIBUTIONS:
            for seed in seeds:
                instance = paper_instance(dist, seed, args.jobs)
                for method in args.methods:
                    bar.update()
                    if method in missing:
                        continue
                    started = time.perf_counter()
                    try:
                        solution = solve(instance, method, seed=0)
                    except InputError as err:  # the learned agent without its checkpoint
                        print(f"skipping {method}: {err}", file=sys.stderr)
                        missing.add(method)
                        continue
                    if not solution.validated:
                        print(f"{method} {dist} {seed}: not validated", file=sys.stderr)
                        return 1
                    rates[method][dist].append(solution.blocking_rate)
                    if method == "lp-online":
                        seconds[dist].append(time.perf_counter() - started)
    print(f"blocking rate, mean ± spread over held-out seeds {list(seeds)}, {args.jobs} jobs, "
          "ddls")
    print("| method | " + " | ".join(PAPER_DISTRIBUTIONS) + " |")
    print("|---|" + "---|" * len(PAPER_DISTRIBUTIONS))
    for method in args.methods:
        if method in missing:
            continue
        cells = []
        for dist in PAPER_DISTRIBUTIONS:
            r = rates[method][dist]
            spread = np.std(r, ddof=1) if len(r) > 1 else 0.0
            cells.append(f"{np.mean(r):.3f} ± {spread:.3f}")
        print(f"| {method} | " + " | ".join(cells) + " |")
    if any(seconds.values()):
        cells = [f"{np.mean(seconds[d]):.0f}" if seconds[d] else "-" for d in PAPER_DISTRIBUTIONS]
        print("| lp-online s/episode | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
