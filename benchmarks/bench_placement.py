"""What the placer does to blocking: ``tuned`` under every placer, on held-out seeds, next to the
offline best-fit rule on the same instances, and the time of a best-fit episode.

    python benchmarks/bench_placement.py [--preset ddls physical] [--seeds 5] [--jobs 1001]

The paper workload (the five graphs, 1001 jobs, 4x4x2, horizon 1e6 ms) of each distribution A-D
on the first N (default 5) of ``pacopt.model.paper_workload.HELD_OUT_SEEDS``. Rows, each the mean
and spread (sample standard deviation) of the validated blocking rate over the seeds:

- ``tuned @ <placer>``: ``tuned`` as a user runs it, with the choices made on the tuning seeds
  for that (preset, placer) (``pacopt/data/tuned.json``), online: per decision the choice of the
  distribution the betas so far look like (labelled with the last one);
- ``tuned-given-label @ <placer>``: the oracle that reads every job's beta first and plays its
  distribution's choice throughout (what ``tuned`` was before it became online);
- ``offline BestFit, tuned's rule``: the offline :class:`~pacopt.solvers.best_fit.BestFit`
  with the K of best-fit ``tuned``'s choice for the instance's distribution (the given-label
  one; when that is a ``fixed-or-min:K``, or ``min-feasible``, which is ``fixed-or-min:1``):
  the same rule on the offline problem;
- ``offline BestFit, best K``: the best K per instance (hindsight over K).

Then the seconds of one best-fit ``tuned`` episode (a fresh model, step timings on disk, as
``solve`` runs it) and of one first-fit episode, mean and max over all episodes.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pacopt.formulations.offline import build_problem
from pacopt.model.jct import JctModel
from pacopt.model.paper_workload import PAPER_DISTRIBUTIONS, paper_instance
from pacopt.model.placers import PLACER_PRESETS, PLACERS
from pacopt.model.simulator import simulate
from pacopt.online.policies import make_policy
from pacopt.solvers.best_fit import BestFit
from pacopt.solvers.validate import validate
from pacopt.solvers.warm import legal_degrees

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import add_heldout_arguments, heldout_seeds  # noqa: E402


def run(preset: str, seeds, num_jobs: int, bar) -> tuple[dict, dict]:
    """{row: {dist: [blocking per seed]}} and {placer: [episode seconds]}."""
    rows: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, list[float]] = {}
    choices: dict[str, dict[str, str]] = {}
    placers = [p for p in PLACERS if preset in PLACER_PRESETS[p]]
    for dist in PAPER_DISTRIBUTIONS:
        for seed in seeds:
            base = paper_instance(dist, seed, num_jobs, preset)
            shared = JctModel(base.cluster, base.model)
            for placer in placers:
                instance = replace(base, model=replace(base.model, placement=placer))
                policy = make_policy("tuned", instance)
                simulate(instance, make_policy("tuned", instance), model=shared)  # warm timings
                started = time.perf_counter()
                solution = simulate(instance, policy, seed=seed)
                seconds.setdefault(placer, []).append(time.perf_counter() - started)
                validate(instance, solution, shared)
                label = f"tuned @ {placer}"
                rows.setdefault(label, {}).setdefault(dist, []).append(solution.blocking_rate)
                choices.setdefault(label, {})[dist] = policy.choice
                oracle = make_policy("tuned-given-label", instance)
                solution = simulate(instance, oracle, seed=seed, model=shared)
                validate(instance, solution, shared)
                label = f"tuned-given-label @ {placer}"
                rows.setdefault(label, {}).setdefault(dist, []).append(solution.blocking_rate)
                choices.setdefault(label, {})[dist] = oracle.choice
                bar.update()
            problem = build_problem(base, shared)
            arrived = len(base.jobs)
            accepted = {k: len(BestFit(problem, k).play()) for k in legal_degrees(base)}
            best = max(accepted.values())
            rows.setdefault("offline BestFit, best K", {}).setdefault(dist, []).append(
                1 - best / arrived)
            choice = choices["tuned-given-label @ best-fit"][dist]
            if choice.startswith("fixed-or-min:") or choice == "min-feasible":
                k = int(choice.partition(":")[2] or 1)
                value = accepted.get(k)
                if value is None:
                    value = len(BestFit(problem, k).play())
                rows.setdefault("offline BestFit, tuned's rule", {}).setdefault(dist, []).append(
                    1 - value / arrived)
            bar.update()
    for label, by_dist in choices.items():
        rows[label]["choice"] = [by_dist[d] for d in PAPER_DISTRIBUTIONS]
    return rows, seconds


def cell(values: list[float]) -> str:
    spread = np.std(values, ddof=1) if len(values) > 1 else 0.0
    return f"{np.mean(values):.4f} ± {spread:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", nargs="+", default=["ddls", "physical"],
                        choices=["ddls", "physical"])
    add_heldout_arguments(parser)
    parser.set_defaults(seeds=5)
    args = parser.parse_args()
    seeds = heldout_seeds(parser, args)
    for preset in args.preset:
        placers = [p for p in PLACERS if preset in PLACER_PRESETS[p]]
        total = len(PAPER_DISTRIBUTIONS) * len(seeds) * (len(placers) + 1)
        with tqdm(total=total, unit="episode", desc=preset, disable=None) as bar:
            rows, seconds = run(preset, seeds, args.jobs, bar)
        print(f"\nBlocking rate, paper workload ({args.jobs} jobs, {preset}), held-out seeds "
              f"{list(seeds)}: mean ± spread")
        print(f"| {preset} | " + " | ".join(f"β_{d}" for d in PAPER_DISTRIBUTIONS) + " |")
        print("|---|" + "---|" * len(PAPER_DISTRIBUTIONS))
        for label, by_dist in rows.items():
            choice = by_dist.get("choice")
            cells = [cell(by_dist[d]) + (f" ({choice[i]})" if choice else "") if d in by_dist
                     else "-" for i, d in enumerate(PAPER_DISTRIBUTIONS)]
            print(f"| {label} | " + " | ".join(cells) + " |")
        print(f"\nSeconds per {args.jobs}-job tuned episode (fresh model, timings on disk):")
        for placer, values in seconds.items():
            print(f"  {placer:10} mean {np.mean(values):.3f} s, max {np.max(values):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
