"""Choose the ``tuned`` baseline: per beta distribution, the best fixed:K, fixed-or-min:K or
heuristic on the tuning seeds only, per (preset, placer), written to ``pacopt/data/tuned.json``.

    python -m tools tune_baselines [--preset ddls physical] [--placement first-fit best-fit]
                                   [--jobs 1001] [--out FILE]      # or: python tools/tune_baselines.py

Every candidate (the heuristics, then ``fixed:K`` and ``fixed-or-min:K`` for K = 1..max degree)
plays the paper workload (the five graphs, 1001 jobs, 4x4x2, horizon 1e6 ms) of each
distribution A-D on each seed of ``pacopt.model.paper_workload.TUNING_SEEDS`` (``random`` seeded with
the workload seed); the lowest mean blocking rate wins, ties going to the earlier candidate.
The file lists, per preset and distribution, the choice and every candidate's mean tuning
blocking rate: first-fit's under ``presets``, every other placer's under ``placers`` (placer ->
preset -> distribution). (Preset, placer) pairs not re-tuned keep their entry; a placer that does
not fit a preset (compact under ddls) is skipped. Held-out seeds are never touched.
It writes an artefact the package ships (what ``tuned`` plays), so it is a tool, not a benchmark
(``python -m benchmarks baselines`` measures the result on held-out seeds).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pacopt.model.jct import JctModel
from pacopt.model.paper_workload import (
    PAPER_DISTRIBUTIONS,
    PAPER_GRAPHS,
    TUNING_SEEDS,
    paper_instance,
)
from pacopt.model.placers import PLACER_PRESETS, PLACERS
from pacopt.model.settings import ModelSettings
from pacopt.model.simulator import simulate
from pacopt.online.policies import TUNED_PATH, make_policy
from pacopt.solvers.validate import validate

if not __package__:  # run as a file: the repository's root importable
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import (  # noqa: E402
    add_pipedream_argument,
    tuned_candidates,
    use_pipedream,
)


def blocking_rates(names: list[str], dist: str, seeds, preset: str, num_jobs: int,
                   bar=None, placement: str = "first-fit") -> dict[str, list[float]]:
    """Validated blocking rate of each policy on each seed's paper instance under
    ``placement``."""
    out: dict[str, list[float]] = {name: [] for name in names}
    for seed in seeds:
        instance = paper_instance(dist, seed, num_jobs, preset)
        instance = replace(instance, model=replace(instance.model, placement=placement))
        model = JctModel(instance.cluster, instance.model)
        for name in names:
            solution = simulate(instance, make_policy(name, instance), seed=seed, model=model)
            validate(instance, solution, model)
            out[name].append(solution.blocking_rate)
            if bar is not None:
                bar.update()
    return out


def tune(preset: str, seeds=TUNING_SEEDS, num_jobs: int = 1001,
         placement: str = "first-fit") -> dict:
    """Per distribution: ``{"choice": name, "blocking": {candidate: mean rate}}``."""
    names = tuned_candidates(ModelSettings().max_partitions_per_op)
    result = {}
    with tqdm(total=len(PAPER_DISTRIBUTIONS) * len(seeds) * len(names), unit="episode",
              desc=f"tune {preset} {placement}", disable=None) as bar:
        for dist in PAPER_DISTRIBUTIONS:
            rates = blocking_rates(names, dist, seeds, preset, num_jobs, bar, placement)
            means = {name: float(np.mean(r)) for name, r in rates.items()}
            choice = min(names, key=lambda name: means[name])  # min keeps the first of ties
            result[dist] = {"choice": choice,
                            "blocking": {name: round(m, 6) for name, m in means.items()}}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", nargs="+", default=["ddls"], choices=["ddls", "physical"])
    parser.add_argument("--placement", nargs="+", default=["first-fit"], choices=list(PLACERS))
    parser.add_argument("--jobs", type=int, default=1001, help="jobs per episode")
    parser.add_argument("--out", type=Path, default=TUNED_PATH)
    add_pipedream_argument(parser)
    args = parser.parse_args()
    if args.jobs < 1:
        print("--jobs must be >= 1", file=sys.stderr)
        return 2
    use_pipedream(args.pipedream)
    data = json.loads(args.out.read_text()) if args.out.exists() else {}
    data.update({
        "about": "tuned baseline: per preset, placer and paper beta distribution, the policy "
                 "with the lowest mean blocking rate on the tuning seeds "
                 "(tools/tune_baselines.py); 'presets' holds the first-fit choices, "
                 "'placers' every other placer's (placer -> preset -> distribution)",
        "workload": {"graphs": list(PAPER_GRAPHS), "num_jobs": args.jobs,
                     "interarrival_ms": 1000.0, "horizon_ms": 1e6, "cluster": "4x4x2"},
        "tuning_seeds": list(TUNING_SEEDS)})
    for placement in args.placement:
        presets = (data.setdefault("presets", {}) if placement == "first-fit"
                   else data.setdefault("placers", {}).setdefault(placement, {}))
        for preset in args.preset:
            if preset not in PLACER_PRESETS[placement]:
                print(f"{placement} does not fit {preset}: skipped")
                continue
            presets[preset] = tune(preset, TUNING_SEEDS, args.jobs, placement)
            for dist, entry in presets[preset].items():
                print(f"{preset} {placement} {dist}: {entry['choice']} "
                      f"(tuning blocking {entry['blocking'][entry['choice']]:.4f})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(args.out)  # no partial file
    return 0


if __name__ == "__main__":
    sys.exit(main())
