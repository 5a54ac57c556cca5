"""Which agent ships: candidate checkpoints against the shipped one and ``tuned`` on the
validation seeds.

    python -m tools select_checkpoint SHIPPED.zip CANDIDATE.zip [...] [--placement first-fit]
                                      [--parts paper,8x8x4,graphs] [--distributions A,B,C,D]
                                      [--seeds 8] [--big-seeds 4] [--margin 2]
                                      [--preset ddls] [--workers 2]
    (or: python tools/select_checkpoint.py ...)

A general agent is meant to play more than the paper's workload on the paper's cluster, so
before one replaces another it is compared, on the validation seeds
(``pacopt.learned.train_config.VALIDATION_SEEDS``, 9000-9007: never the held-out or fresh ones
the final tables use), where it will play:

- ``paper``: the paper workload (1001 jobs, 4x4x2, horizon 1e6 ms), as training validates;
- ``8x8x4``: the same on 256 servers at the paper's load per server (first ``--big-seeds``);
- ``graphs``: the paper workload with the four PipeDream profiles that neither training nor any
  final table uses (:data:`SPARE_GRAPHS`).

Prints per part the mean blocking rate per distribution A-D and their mean, for each candidate
(played alone, as ``--checkpoint`` plays it) and for ``tuned`` under the same placer; then the
score a general agent is chosen on, the mean of the parts' means, with each one's paired
difference from the first candidate and its standard error. Every number comes from a
validated solution.

**The rule** (since 2026-11-29, evening, set before the candidates it decides): the first
checkpoint given is the one shipped; a candidate replaces it only when its paired difference
is below ``-margin`` standard errors (``--margin``, 2 by default), so a lead within the noise
keeps what ships; of several marked so, the one with the lowest score in the table. A
fine-tune of one distribution is judged the same way on that distribution alone
(``--distributions D``) against the general agent it would stand in for, on the parts where it
would play (``--parts paper,graphs``: the shipped fine-tunes play the cluster they were
trained on only).

It decides which checkpoints ship rather than measuring them, so it is a tool, not a benchmark.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pacopt.learned.train_config import VALIDATION_SEEDS
from pacopt.model.paper_workload import PAPER_DISTRIBUTIONS, paper_instance
from pacopt.model.placers import PLACERS

if not __package__:  # run as a file: the repository's root importable
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import paper_on_cluster, use_pipedream  # noqa: E402

#: The PipeDream profiles no training run and no final table plays (the paper's five train;
#: ``bench_agent.py --parts unseen`` judges on five others).
SPARE_GRAPHS = ("nasnetalarge", "nasnetamobile", "resnet101", "resnext101")
PARTS = ("paper", "8x8x4", "graphs")


def instance_of(part: str, dist: str, seed: int, preset: str):
    """The validation instance of one part."""
    if part == "8x8x4":
        return paper_on_cluster(dist, seed, (8, 8, 4), preset)
    graphs = {"graphs": SPARE_GRAPHS} if part == "graphs" else {}
    return paper_instance(dist, seed, preset=preset, **graphs)


def one_cell(task) -> tuple[str, str, str, float]:
    """Blocking rate of one (candidate or ``tuned``, part, distribution, seed), validated."""
    label, part, dist, seed, placement, preset = task
    from pacopt.solvers.api import solve

    instance = instance_of(part, dist, seed, preset)
    if label == "tuned":
        solution = solve(instance, "tuned", seed=0, placement=placement)
    else:
        solution = solve(instance, "pac-ml", seed=0, placement=placement, checkpoint=label)
    if not solution.validated:
        raise SystemExit(f"{label} on {instance.source}: not validated")
    return label, part, dist, solution.blocking_rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("candidates", nargs="+", type=Path, help="checkpoints to compare")
    parser.add_argument("--placement", default="first-fit", choices=list(PLACERS))
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--seeds", type=int, default=len(VALIDATION_SEEDS))
    parser.add_argument("--big-seeds", type=int, default=4,
                        help="validation seeds of the 8x8x4 part (its episodes take longer)")
    parser.add_argument("--distributions", default=",".join(PAPER_DISTRIBUTIONS),
                        help="the beta distributions played (a fine-tune: its own)")
    parser.add_argument("--margin", type=float, default=2.0,
                        help="standard errors by which a candidate must beat the first to "
                             "replace it (module doc)")
    parser.add_argument("--preset", default="ddls", choices=("ddls", "physical"))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    if unknown := sorted(set(parts) - set(PARTS)):
        parser.error(f"--parts: unknown {', '.join(unknown)}; known: {', '.join(PARTS)}")
    dists = [d for d in args.distributions.split(",") if d]
    unknown = sorted(set(dists) - set(PAPER_DISTRIBUTIONS))
    if not dists or unknown:
        parser.error(f"--distributions: {','.join(unknown) or 'none given'}; give some of "
                     f"{','.join(PAPER_DISTRIBUTIONS)}")
    if args.margin < 0:
        parser.error("--margin must be >= 0")
    if not (1 <= args.seeds <= len(VALIDATION_SEEDS) and 1 <= args.big_seeds <= len(VALIDATION_SEEDS)):
        parser.error(f"--seeds and --big-seeds must be in 1..{len(VALIDATION_SEEDS)}")
    if missing := [str(c) for c in args.candidates if not c.is_file()]:
        parser.error(f"no such checkpoint: {', '.join(missing)}")
    use_pipedream()
    seeds = {part: VALIDATION_SEEDS[:args.big_seeds if part == "8x8x4" else args.seeds]
             for part in parts}
    labels = [str(c) for c in args.candidates] + ["tuned"]
    tasks = [(label, part, dist, seed, args.placement, args.preset)
             for part in parts for dist in dists for seed in seeds[part]
             for label in labels]
    cells: dict[tuple[str, str, str], list[float]] = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for label, part, dist, rate in tqdm(pool.map(one_cell, tasks), total=len(tasks),
                                            unit="episode", desc="validation", disable=None):
            cells.setdefault((label, part, dist), []).append(rate)
    for part in parts:
        print(f"\n{part}: validation seeds {seeds[part][0]}-{seeds[part][-1]}, {args.preset}, "
              f"{args.placement} (mean blocking rate)\n")
        print("| checkpoint | " + " | ".join(dists) + " | mean |")
        print("|---" * (len(dists) + 2) + "|")
        for label in labels:
            means = [np.mean(cells[label, part, d]) for d in dists]
            print(f"| {label} | " + " | ".join(f"{m:.4f}" for m in means)
                  + f" | {np.mean(means):.4f} |")
    print_choice(cells, labels, parts, dists, args.margin)
    return 0


def print_choice(cells: dict[tuple[str, str, str], list[float]], labels: list[str],
                 parts: list[str], dists: list[str], margin: float) -> None:
    """The score a general agent is chosen on (the mean of the parts' means), each one's
    difference from the first candidate with its standard error over the paired episodes
    (the parts weigh alike), and the rule's verdict (module doc): a candidate replaces the
    first only when that difference is below ``-margin`` standard errors."""
    print("\nThe choice: the mean of the parts' means; against the first candidate (shipped), "
          f"the mean paired difference ± its standard error; it replaces the first when below "
          f"-{margin:g} standard errors\n")
    print("| checkpoint | mean of the parts | against the first | replaces it |")
    print("|---|---|---|---|")
    first = labels[0]
    for label in labels:
        score = np.mean([np.mean(cells[label, part, d]) for part in parts for d in dists])
        against, verdict = "-", "(shipped)" if label == first else "-"
        if label != first:
            paired = [np.array([x - y for d in dists
                                for x, y in zip(cells[label, part, d], cells[first, part, d])])
                      for part in parts]
            delta = np.mean([p.mean() for p in paired])
            error = np.sqrt(sum(p.var(ddof=1) / len(p) for p in paired)) / len(paired)
            against = f"{delta:+.4f} ± {error:.4f}"
            verdict = "yes" if replaces(delta, error, margin) else "no"
        print(f"| {label} | {score:.4f} | {against} | {verdict} |")


def replaces(delta: float, error: float, margin: float) -> bool:
    """The rule: a candidate lower than the shipped checkpoint by more than ``margin`` standard
    errors of the paired difference replaces it."""
    return bool(delta < -margin * error)


if __name__ == "__main__":
    sys.exit(main())
