"""Blocking rates of the baselines on held-out seeds of the paper workload, next to the paper's.

    python benchmarks/bench_baselines.py [--preset ddls|physical] [--placement PLACER]
                                         [--seeds N] [--jobs 1001]

The paper workload (the five graphs, 1001 jobs, 4x4x2, horizon 1e6 ms) of each distribution A-D
on the first N (default 3) of ``pacopt.model.paper_workload.HELD_OUT_SEEDS``, never used for tuning.
Each cell is the mean and the spread (sample standard deviation) of the validated blocking rate
over the seeds. ``best fixed:K`` and ``best fixed-or-min:K`` pick K on these same held-out seeds
(an oracle, labelled with its K: the most a single K can do), while ``tuned`` plays the choices
made on the tuning seeds (``pacopt/data/tuned.json``), as a user would: online, the choice of the
distribution the betas arrived so far look like. ``tuned-given-label`` is the oracle that reads
every job's beta first and plays its distribution's choice throughout (labelled with it).
``best fixed rule`` is the ``fixed:K`` or ``fixed-or-min:K`` with the lowest blocking on the
tuning seeds (``tuned.json``'s record of every candidate), per distribution, played on the
held-out seeds: the best single rule a user could have chosen without them. ``tuned - best
rule`` is ``tuned``'s held-out mean less the better of the two held-out oracles. Every episode
is placed by ``--placement`` (first fit by default); ``tuned`` plays that placer's tuning.

The episodes are one study (:func:`pacopt.analysis.run_study`: every candidate x distribution x
seed, each run seeded with its workload seed and validated), run in a temporary folder, or in
``--study-out DIR`` to keep the results and resume.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from pacopt.analysis import run_study, study_from_dict
from pacopt.infra.errors import InputError
from pacopt.model.paper_workload import PAPER_DISTRIBUTIONS, paper_instance
from pacopt.model.placers import PLACER_PRESETS, check_placer
from pacopt.model.settings import ModelSettings
from pacopt.online.policies import make_policy, tuned_basis, tuned_tables

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import add_heldout_arguments, heldout_seeds, tuned_candidates  # noqa: E402

#: The paper's reported blocking rates (``reference/pacml-paper-digest.md``).
PAPER = {"paper PAC-ML": (0.204, 0.257, 0.117, 0.099),
         "paper Para_max": (0.262, 0.263, 0.267, 0.263)}
PLAIN = ("para-max", "para-min", "random", "min-feasible", "sequential")


def blocking_rates(names: list[str], seeds, preset: str, num_jobs: int, out: Path,
                   workers: int, placement: str = "first-fit"
                   ) -> dict[str, dict[str, list[float]]]:
    """{distribution: {policy: validated blocking rate per seed}}, from one study."""
    study = study_from_dict({"name": "baselines", "grids": [{
        "name": "held-out",
        "methods": [{"name": name, "placement": placement, "label": name} for name in names],
        "workload": {"distributions": list(PAPER_DISTRIBUTIONS), "seeds": list(seeds),
                     "num_jobs": num_jobs, "interarrival_ms": 1000, "horizon_ms": 1e6,
                     "preset": preset}}]})
    table = run_study(study, out, workers=workers, plots=False)
    failed = table[(table["status"] == "error") | ~table["validated"].astype(bool)]
    if not failed.empty:
        first = failed.iloc[0]
        raise SystemExit(f"{first['method']} on {first['instance']}: {first['error']}")
    rates: dict[str, dict[str, list[float]]] = {}
    for dist in PAPER_DISTRIBUTIONS:
        for name in names:
            cells = table[(table["distribution"] == dist) & (table["method"] == name)]
            by_seed = dict(zip(cells["seed"], cells["blocking_rate"]))
            rates.setdefault(dist, {})[name] = [float(by_seed[s]) for s in seeds]
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="ddls", choices=["ddls", "physical"])
    parser.add_argument("--placement", default="first-fit", choices=sorted(PLACER_PRESETS))
    add_heldout_arguments(parser)
    parser.add_argument("--workers", type=int, default=1, help="local processes of the study")
    parser.add_argument("--study-out", type=Path, default=None, metavar="DIR",
                        help="the study's folder (kept, resumable; default a temporary one)")
    args = parser.parse_args()
    seeds = heldout_seeds(parser, args)
    try:
        check_placer(args.placement, args.preset, "--placement")
    except InputError as err:
        parser.error(str(err))
    basis_preset, basis_placer = tuned_basis(args.preset, args.placement)
    tuning = tuned_tables(basis_placer)[basis_preset]  # what tuned was chosen on
    names = tuned_candidates(ModelSettings().max_partitions_per_op) + ["tuned",
                                                                       "tuned-given-label"]
    rows: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="pacopt-baselines-") as scratch:
        by_dist = blocking_rates(names, seeds, args.preset, args.jobs,
                                 args.study_out or Path(scratch), args.workers, args.placement)
    for dist in PAPER_DISTRIBUTIONS:
        rates = by_dist[dist]
        mean = {name: float(np.mean(r)) for name, r in rates.items()}

        def cell(name: str, label: str = "") -> str:
            spread = np.std(rates[name], ddof=1) if len(seeds) > 1 else 0.0
            return f"{mean[name]:.3f} ± {spread:.3f}{label}"

        for name in PLAIN:
            rows.setdefault(name, []).append(cell(name))
        oracles = []
        for family in ("fixed", "fixed-or-min"):
            best = min((n for n in names if n.startswith(family + ":")), key=mean.get)
            oracles.append(best)
            rows.setdefault(f"best {family}:K", []).append(cell(best, f" (K={best[len(family) + 1:]})"))
        tuned_on = tuning[dist]["blocking"]  # every candidate's mean on the tuning seeds
        rule = min((n for n in names if n.startswith("fixed") and n in tuned_on),
                   key=tuned_on.get)
        rows.setdefault("best fixed rule", []).append(cell(rule, f" ({rule})"))
        rows.setdefault("tuned", []).append(cell("tuned"))
        top = min(oracles, key=mean.get)  # the better oracle; its seeds paired with tuned's
        gap = np.subtract(rates["tuned"], rates[top])
        rows.setdefault("tuned - best rule", []).append(
            f"{gap.mean():+.3f} ± {np.std(gap, ddof=1) if len(seeds) > 1 else 0.0:.3f} ({top})")
        instance = paper_instance(dist, seeds[0], args.jobs, args.preset)
        oracle = make_policy("tuned-given-label", replace(
            instance, model=replace(instance.model, placement=args.placement)))
        rows.setdefault("tuned-given-label", []).append(
            cell("tuned-given-label", f" ({oracle.choice})"))
    print(f"Blocking rate, paper workload ({args.jobs} jobs, {args.preset}, {args.placement}), "
          f"held-out seeds {list(seeds)}: mean ± spread")
    width = 34
    print(f"{'policy':22}" + "".join(f"{d:>{width}}" for d in PAPER_DISTRIBUTIONS))
    for name, cells in rows.items():
        print(f"{name:22}" + "".join(f"{c:>{width}}" for c in cells))
    for name, values in PAPER.items():
        print(f"{name:22}" + "".join(f"{v:>{width}.3f}" for v in values))
    return 0


if __name__ == "__main__":
    sys.exit(main())
