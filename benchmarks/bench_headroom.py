"""How far one step of rollout improvement over best-fit ``tuned`` goes, online and in hindsight.

    python benchmarks/bench_headroom.py [--seeds 4] [--online-seeds 2] [--streams 32]
                                        [--significance 1] [--horizon 100] [--workers 2]
                                        [--exact-seconds 60] [--parts fresh,exact]
                                        [--cells FILE.json]

The learned agent imitates a rollout teacher: at each arrival it forks the episode for every
worthwhile degree, lets ``tuned`` play on, and keeps the degree whose forks accept most
(:mod:`pacopt.online.rollout`). This benchmark plays such rollouts *as policies*, to show how
much any student of theirs could gain:

- **rollout on sampled futures**: forks playing ``--streams`` job streams sampled from the
  workload family's training seeds, each departure from ``tuned`` lowered by ``--significance``
  standard errors of its paired gain (the teacher the shipped best-fit agent imitates; told
  the distribution, as in training);
- **hindsight rollout**: forks playing the episode's *own* next ``--horizon`` arrivals. Not an
  online policy (it reads jobs before they arrive): it shows what knowing the future is worth
  to the same one-step improvement.

Both go on from ``tuned`` for the instance's distribution (``tuned-given-label``'s rule, which
the row of that name plays alone); ``pac-ml`` (the shipped best-fit agents) and ``tuned`` play
beside them. Part ``fresh``: the paper workload (ddls, 1001 jobs, best fit) on the first
``--seeds`` fresh seeds (20000-...; the rollout on sampled futures, minutes an episode, on the
first ``--online-seeds``), next to the agent's targets. Part ``exact``: the 200-job instances
of seed 20000 with CP-SAT's incumbent (``--exact-seconds``, 2 threads), and the share
of ``tuned``'s distance to it each method closes. Every number comes from a validated
solution.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pacopt.model.paper_workload import FRESH_SEEDS, PAPER_DISTRIBUTIONS, paper_instance

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import use_pipedream  # noqa: E402

PLACER = "best-fit"
ONLINE, HINDSIGHT = "rollout on sampled futures", "hindsight rollout (not online)"
METHODS = ("pac-ml", "tuned", "tuned-given-label", ONLINE, HINDSIGHT)
#: The learned agent's targets under best fit, blocking rate on the fresh seeds.
TARGETS = {"A": 0.125, "B": 0.140, "C": 0.115, "D": 0.078}


def one_cell(task) -> tuple[str, str, str, int, int, int]:
    """(part, method, distribution, seed, accepted, arrived) of one validated episode."""
    part, method, dist, seed, args = task
    from pacopt.solvers.api import check_placement, solve

    jobs = 200 if part == "exact" else 1001
    instance = check_placement(paper_instance(dist, seed, num_jobs=jobs), PLACER)
    if method == "cpsat":
        solution = solve(instance, "cpsat", time_limit=args.exact_seconds, threads=2, seed=0)
    elif method in (ONLINE, HINDSIGHT):
        solution = rollout_solution(instance, dist, method == ONLINE, args)
    else:
        solution = solve(instance, method, seed=0, placement=PLACER)
    if not solution.validated:
        raise SystemExit(f"{method} on {instance.source}: not validated")
    return part, method, dist, seed, solution.accepted, solution.arrived


def rollout_solution(instance, dist: str, online: bool, args):
    """The rollout over ``tuned`` for ``dist`` played on ``instance``, validated."""
    from pacopt.learned.env import WorkloadFamily
    from pacopt.learned.teacher import sampled_futures
    from pacopt.online.policies import make_policy, tuned_choice
    from pacopt.online.rollout import Rollout, play_rollout
    from pacopt.solvers.validate import validate

    base = make_policy(tuned_choice(dist, "ddls", PLACER))
    if online:
        family = WorkloadFamily.paper((dist,), "ddls", placement=PLACER)
        futures = sampled_futures(family, dist, args.streams, seed=0)
        rollout = Rollout(base, args.horizon, futures, significance=args.significance)
    else:
        rollout = Rollout(base, args.horizon)
    return validate(instance, play_rollout(instance, rollout))


def tasks_of(args) -> list:
    tasks = []
    if "exact" in args.parts:
        tasks += [("exact", m, d, FRESH_SEEDS[0], args) for d in PAPER_DISTRIBUTIONS
                  for m in ("cpsat", ONLINE) + tuple(m for m in METHODS if m != ONLINE)]
    if "fresh" in args.parts:
        tasks += [("fresh", ONLINE, d, s, args) for d in PAPER_DISTRIBUTIONS
                  for s in FRESH_SEEDS[:args.online_seeds]]
        tasks += [("fresh", m, d, s, args) for d in PAPER_DISTRIBUTIONS
                  for s in FRESH_SEEDS[:args.seeds] for m in METHODS if m != ONLINE]
    return tasks  # the slow ones first


def print_fresh(cells, args) -> None:
    """The fresh seeds' table; where the rollout on sampled futures ran on fewer seeds, a second
    table of every method on those seeds alone, so that its row is compared on the same
    episodes."""
    tables = [FRESH_SEEDS[:args.seeds]]
    if 0 < args.online_seeds < args.seeds:
        tables.append(FRESH_SEEDS[:args.online_seeds])
    for seeds in tables:
        print(f"\nBlocking rate, ddls, 1001 jobs, {PLACER}, fresh seeds {seeds[0]}-{seeds[-1]}"
              f" (rollout on sampled futures: {args.streams} streams, {args.significance:g} "
              f"standard errors; horizon {args.horizon}); mean ± sample std\n")
        print("| method | " + " | ".join(PAPER_DISTRIBUTIONS) + " |")
        print("|---" * (len(PAPER_DISTRIBUTIONS) + 1) + "|")
        for method in METHODS:
            row = []
            for d in PAPER_DISTRIBUTIONS:
                played = cells.get((method, d), {})
                rates = [1 - played[s][0] / played[s][1] for s in seeds if s in played]
                if len(rates) < len(seeds):
                    row.append("-")  # not played on all of these seeds
                    continue
                spread = np.std(rates, ddof=1) if len(rates) > 1 else 0.0
                row.append(f"{np.mean(rates):.3f} ± {spread:.3f}")
            print(f"| {method} | " + " | ".join(row) + " |")
        print("| the agent's targets | " + " | ".join(f"{TARGETS[d]:.3f}"
                                                       for d in PAPER_DISTRIBUTIONS) + " |")


def print_exact(cells, args) -> None:
    print(f"\n200-job instances, seed {FRESH_SEEDS[0]} ({PLACER}); accepted jobs, and the "
          f"share of tuned's distance to CP-SAT's incumbent ({args.exact_seconds:g} s, 2 "
          "threads) closed\n")
    methods = [m for m in METHODS if m != "tuned"]
    print("| dist | tuned | CP-SAT incumbent | " + " | ".join(methods) + " |")
    print("|---" * (len(methods) + 3) + "|")
    shares: dict[str, list[float]] = {m: [] for m in methods}
    for d in PAPER_DISTRIBUTIONS:
        accepted = {m: next(iter(cells[(m, d)].values()))[0] for m in ("cpsat",) + METHODS}
        gap = accepted["cpsat"] - accepted["tuned"]
        row = []
        for m in methods:
            share = (accepted[m] - accepted["tuned"]) / gap if gap > 0 else float("nan")
            shares[m].append(share)
            row.append(f"{accepted[m]} ({share:+.2f})")
        print(f"| {d} | {accepted['tuned']} | {accepted['cpsat']} | " + " | ".join(row) + " |")
    print("| mean share closed | | | " + " | ".join(f"{np.nanmean(shares[m]):+.2f}"
                                                    for m in methods) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--online-seeds", type=int, default=2)
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--significance", type=float, default=1.0)
    parser.add_argument("--horizon", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--exact-seconds", type=float, default=60.0)
    parser.add_argument("--parts", default="fresh,exact")
    parser.add_argument("--cells", type=Path, default=None, metavar="FILE.json",
                        help="also write every episode's counts as JSON")
    args = parser.parse_args()
    args.parts = set(args.parts.split(","))
    if not args.parts <= {"fresh", "exact"}:
        parser.error("--parts takes fresh and exact")
    if not 1 <= args.seeds <= len(FRESH_SEEDS) or not 0 <= args.online_seeds <= args.seeds:
        parser.error(f"--seeds must be in 1..{len(FRESH_SEEDS)} and --online-seeds in "
                     "0..--seeds")
    if args.streams < 1 or args.horizon < 1 or args.significance < 0:
        parser.error("--streams and --horizon must be positive, --significance at least 0")
    use_pipedream()
    tasks = tasks_of(args)
    cells: dict[str, dict] = {"fresh": {}, "exact": {}}
    with ProcessPoolExecutor(args.workers) as pool:
        for part, method, dist, seed, accepted, arrived in tqdm(
                pool.map(one_cell, tasks), total=len(tasks), unit="episode", desc="headroom",
                disable=None):
            cells[part].setdefault((method, dist), {})[seed] = (accepted, arrived)
    if args.cells is not None:
        args.cells.write_text(json.dumps(
            {part: [[method, dist, seed, *counts]
                    for (method, dist), by_seed in found.items()
                    for seed, counts in by_seed.items()]
             for part, found in cells.items()}, indent=1))
    if "fresh" in args.parts:
        print_fresh(cells["fresh"], args)
    if "exact" in args.parts:
        print_exact(cells["exact"], args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
