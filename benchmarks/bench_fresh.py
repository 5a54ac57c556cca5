"""The learned agent's final table, on fresh seeds used for nothing else.

    python benchmarks/bench_fresh.py [--placement best-fit] [--seeds 20] [--teacher-seeds 4]
                                     [--workers 2] [--checkpoint PATH] [--cluster CxRxS]
                                     [--preset ddls|physical] [--methods M,...]
                                     [--out FILE.json] [--cells FILE.json]

The paper workload (ddls unless ``--preset``, 1001 jobs, 4x4x2, horizon 1e6 ms) of each
distribution A-D on the fresh seeds ``pacopt.model.paper_workload.FRESH_SEEDS``
(20000-20019: never used to train, tune, select or decide what ships), under one placer.
Methods: ``pac-ml`` (online: the shipped checkpoints for the preset and placer, or
``--checkpoint``), ``tuned`` (online, tuned for them), ``tuned`` under first fit (the paper's
setting), ``min-feasible`` and ``para-max``; and on the first ``--teacher-seeds`` seeds the
agent's teacher itself, the rollout over ``tuned`` on sampled futures
(:mod:`pacopt.online.rollout`; it is told the distribution, as in training, and takes minutes
an episode). Prints mean ± sample std over the seeds, and per seed how often ``pac-ml`` blocks
less / the same / more than each other method. Every number comes from a validated solution.
``--out`` writes the first table as a results data file (``docs/results/NAME.json``),
``--cells`` every episode's blocking rate.

``--cluster 8x8x4`` plays a larger RAMP cluster with the arrival rate scaled by its servers
(8x8x4: 256 servers, 8 arrivals a second), so the load per server is the paper's.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pacopt.infra.errors import InputError
from pacopt.model.paper_workload import FRESH_SEEDS, PAPER_DISTRIBUTIONS, parse_cluster
from pacopt.model.placers import PLACERS

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import (  # noqa: E402
    add_out_argument,
    paper_on_cluster,
    use_pipedream,
    write_results,
)

METHODS = ("pac-ml", "tuned", "tuned@first-fit", "min-feasible", "para-max")
TEACHER = "teacher (rollout over tuned)"


def one_cell(task) -> tuple[str, str, int, float]:
    """Blocking rate of one (method, distribution, seed) under the placer, validated."""
    label, dist, seed, placement, checkpoint, cluster, preset = task
    from pacopt.solvers.api import check_placement, solve

    instance = paper_on_cluster(dist, seed, cluster, preset)
    method, _, placer = label.partition("@")
    if label == TEACHER:
        rate = teacher_blocking(check_placement(instance, placement), dist, placement, cluster,
                                preset)
    else:
        solution = solve(instance, method, seed=0, placement=placer or placement,
                         checkpoint=checkpoint if method == "pac-ml" else None)
        if not solution.validated:
            raise SystemExit(f"{label} on {instance.source}: not validated")
        rate = solution.blocking_rate
    return label, dist, seed, rate


def teacher_blocking(instance, dist: str, placement: str, cluster=None,
                     preset: str = "ddls") -> float:
    """The rollout teacher's episode, the teacher built as training builds it
    (:func:`pacopt.learned.teacher.make_teacher`, futures from training seeds of the same
    cluster), validated."""
    from pacopt.learned.env import WorkloadFamily
    from pacopt.learned.teacher import TeacherSpec, make_teacher
    from pacopt.online.rollout import play_rollout
    from pacopt.solvers.validate import validate

    family = WorkloadFamily.paper((dist,), preset, placement=placement, cluster=cluster)
    rollout = make_teacher(TeacherSpec.parse("rollout", preset=preset, placer=placement), dist,
                           family, seed=0).rollout
    return validate(instance, play_rollout(instance, rollout)).blocking_rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--placement", default="best-fit", choices=list(PLACERS))
    parser.add_argument("--seeds", type=int, default=len(FRESH_SEEDS))
    parser.add_argument("--teacher-seeds", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="play this checkpoint as pac-ml (default: the shipped ones)")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--cluster", default=None, metavar="CxRxS",
                        help="a larger RAMP cluster, e.g. 8x8x4 (default the paper's 4x4x2)")
    parser.add_argument("--preset", default="ddls", choices=("ddls", "physical"))
    add_out_argument(parser)
    parser.add_argument("--cells", type=Path, default=None, metavar="FILE.json",
                        help="also write every episode's blocking rate as JSON")
    args = parser.parse_args()
    if not 1 <= args.seeds <= len(FRESH_SEEDS) or not 0 <= args.teacher_seeds <= args.seeds:
        parser.error(f"--seeds must be in 1..{len(FRESH_SEEDS)} and --teacher-seeds in "
                     "0..--seeds")
    try:
        cluster = None if args.cluster is None else parse_cluster(args.cluster)
    except InputError as err:
        parser.error(str(err))
    use_pipedream()
    seeds = FRESH_SEEDS[:args.seeds]
    methods = [m for m in args.methods.split(",") if m]
    tasks = [(m, d, s, args.placement, args.checkpoint, cluster, args.preset)
             for d in PAPER_DISTRIBUTIONS for s in seeds for m in methods]
    tasks = [(TEACHER, d, s, args.placement, None, cluster, args.preset)
             for d in PAPER_DISTRIBUTIONS
             for s in seeds[:args.teacher_seeds]] + tasks  # the slow ones first
    cells: dict[str, dict[str, dict[int, float]]] = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for label, dist, seed, rate in tqdm(pool.map(one_cell, tasks), total=len(tasks),
                                            unit="episode", desc="fresh seeds", disable=None):
            cells.setdefault(label, {}).setdefault(dist, {})[seed] = rate
    where = f", {args.cluster} at the paper's load per server" if cluster else ""
    print(f"\nBlocking rate on fresh seeds {seeds[0]}-{seeds[-1]} ({args.preset}, 1001 jobs"
          f"{where}, {args.placement} unless @; mean ± sample std; teacher on the first "
          f"{args.teacher_seeds})\n")
    print("| method | " + " | ".join(PAPER_DISTRIBUTIONS) + " | mean |")
    print("|---" * (len(PAPER_DISTRIBUTIONS) + 2) + "|")
    table = []
    for label, by_dist in cells.items():
        row = [f"{np.mean(list(by_dist[d].values())):.3f} ± "
               f"{np.std(list(by_dist[d].values()), ddof=1) if len(by_dist[d]) > 1 else 0:.3f}"
               for d in PAPER_DISTRIBUTIONS]
        mean = np.mean([np.mean(list(by_dist[d].values())) for d in PAPER_DISTRIBUTIONS])
        print(f"| {label} | " + " | ".join(row) + f" | {mean:.3f} |")
        table.append([f"`{label}`", *row, f"{mean:.3f}"])
    if args.out:
        teacher = f"; the teacher on the first {args.teacher_seeds}" if TEACHER in cells else ""
        write_results(args.out,
                      f"Blocking rate under {args.placement}, fresh seeds {seeds[0]}-{seeds[-1]}",
                      ["method", *(f"β_{d}" for d in PAPER_DISTRIBUTIONS), "mean"], table,
                      notes=f"{args.preset} preset, 1001 jobs, {where[2:] or '4x4x2'}; "
                            f"{args.placement} unless @; mean ± sample std over the "
                            f"{len(seeds)} seeds{teacher}.")
    if "pac-ml" in cells:
        print("\npac-ml per seed against each method: wins / ties / losses (lower blocking wins)\n")
        print("| against | " + " | ".join(PAPER_DISTRIBUTIONS) + " |")
        print("|---" * (len(PAPER_DISTRIBUTIONS) + 1) + "|")
        agent = cells["pac-ml"]
        for label, by_dist in cells.items():
            if label == "pac-ml":
                continue
            row = []
            for d in PAPER_DISTRIBUTIONS:
                pairs = [(agent[d][s], by_dist[d][s]) for s in by_dist[d]]
                wins = sum(a < b for a, b in pairs)
                ties = sum(a == b for a, b in pairs)
                row.append(f"{wins} / {ties} / {len(pairs) - wins - ties}")
            print(f"| {label} | " + " | ".join(row) + " |")
    if args.cells:
        args.cells.write_text(json.dumps({k: {d: {str(s): r for s, r in v.items()}
                                            for d, v in by.items()} for k, by in cells.items()},
                                       indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
