"""Job-level exact optimum versus PAC-ML's single-degree rule, on the five paper graphs.

    python benchmarks/bench_joblevel.py [--pipedream DIR] [--budgets 2,4,8,16] [--time-limit S]

For every graph, preset and worker budget B, PAC-ML's rule takes the largest legal degree d (1 or
even, the reference's action mask) whose empty-cluster footprint
``JctModel.table(graph).workers[d]`` is at most B, and its table JCT. The job-level problem
(``pacopt.formulations.joblevel``) chooses per-op counts and their blocks within B workers,
solved by both backends; the table shows the MILP's plan (the counts used, as count x ops), its
workers, model and simulated JCT, the model's error against the simulator, the simulated gain over
the single-degree rule, and each backend's solve time and status ('*' = proven optimal).
``agree`` is the relative difference between the two backends' model JCTs.

A second table gives one deadline example per graph and preset: deadline = 0.2 x sequential JCT,
the fewest workers whose model JCT meets it, against PAC-ML's acceptable-JCT rule (the smallest
legal degree whose table JCT meets the deadline).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from pacopt.formulations.joblevel import BACKENDS, JobPlan, optimise_job
from pacopt.model.decision import single_degree
from pacopt.model.graph_sources import read_graph_file
from pacopt.model.jct import JctModel
from pacopt.model.pipedream import PAPER_GRAPHS
from pacopt.model.settings import PRESETS, ModelSettings
from pacopt.model.topology import RampCluster

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import add_pipedream_argument, use_pipedream  # noqa: E402

DEADLINE_FRACTION = 0.2


def counts_summary(counts: tuple[int, ...]) -> str:
    """Distinct counts used, largest first, as count x number of ops."""
    return ",".join(f"{p}x{n}" for p, n in sorted(Counter(counts).items(), reverse=True))


def solve_both(graph, cluster, settings, time_limit, **target) -> dict[str, JobPlan]:
    return {backend: optimise_job(graph, cluster, settings, backend=backend,
                                  time_limit=time_limit, **target) for backend in BACKENDS}


def solved(plan: JobPlan) -> str:
    return f"{plan.seconds:6.2f}{'*' if plan.status == 'optimal' else ' '}"


def agreement(plans: dict[str, JobPlan]) -> str:
    a, b = (plans[k].model_jct_ms for k in BACKENDS)
    return f"{abs(a - b) / a:.0e}"


def budget_rows(graphs, budgets, time_limit):
    cluster = RampCluster()
    print("Budgets: job-level optimum vs PAC-ML single degree (JCT in ms, 50 steps; "
          "'*' = proven optimal)")
    print(f"{'graph':13} {'preset':8} {'B':>2} | {'d':>2} {'w':>2} {'PAC-ML JCT':>11} | "
          f"{'counts':24} {'w':>2} {'model JCT':>10} {'sim JCT':>10} {'err%':>6} {'gain%':>6} | "
          f"{'milp s':>7} {'cpsat s':>7} {'agree':>6}")
    errors, gains, times = [], [], {b: [] for b in BACKENDS}
    for name, graph in graphs.items():
        for preset in PRESETS:
            settings = ModelSettings(preset=preset)
            table = JctModel(cluster, settings).table(graph)
            for budget in budgets:
                d = single_degree(table, budget=budget)
                pac = table.jct_ms[d]
                plans = solve_both(graph, cluster, settings, time_limit, budget=budget)
                plan = plans["milp"]
                err = (plan.model_jct_ms - plan.simulated_jct_ms) / plan.simulated_jct_ms
                gain = (pac - plan.simulated_jct_ms) / pac
                errors.append(err)
                gains.append(gain)
                for backend in BACKENDS:
                    times[backend].append(plans[backend].seconds)
                print(f"{name:13} {preset:8} {budget:>2} | {d:>2} {table.workers[d]:>2} "
                      f"{pac:>11.2f} | {counts_summary(plan.counts):24} {plan.workers:>2} "
                      f"{plan.model_jct_ms:>10.2f} {plan.simulated_jct_ms:>10.2f} "
                      f"{100 * err:>6.2f} {100 * gain:>6.2f} | {solved(plans['milp'])} "
                      f"{solved(plans['cpsat'])} {agreement(plans):>6}", flush=True)
    print(f"model vs simulated: mean {100 * sum(errors) / len(errors):+.2f}%, range "
          f"[{100 * min(errors):+.2f}%, {100 * max(errors):+.2f}%]; simulated gain over PAC-ML: "
          f"mean {100 * sum(gains) / len(gains):.2f}%, max {100 * max(gains):.2f}%")
    for backend in BACKENDS:
        print(f"{backend} solve s: mean {sum(times[backend]) / len(times[backend]):.2f}, "
              f"max {max(times[backend]):.2f}")


def deadline_rows(graphs, time_limit):
    cluster = RampCluster()
    print(f"\nDeadlines: fewest workers with model JCT <= {DEADLINE_FRACTION} x sequential JCT")
    print(f"{'graph':13} {'preset':8} {'deadline':>9} | {'PAC d':>5} {'w':>2} {'JCT':>9} | "
          f"{'counts':24} {'w':>2} {'model JCT':>10} {'sim JCT':>10} | {'milp s':>7} "
          f"{'cpsat s':>7}")
    for name, graph in graphs.items():
        for preset in PRESETS:
            settings = ModelSettings(preset=preset)
            table = JctModel(cluster, settings).table(graph)
            deadline = DEADLINE_FRACTION * table.seq_jct_ms
            d = single_degree(table, deadline_ms=deadline)
            pac = (f"{d:>5} {table.workers[d]:>2} {table.jct_ms[d]:>9.2f}"
                   if d is not None else f"{'-':>5} {'-':>2} {'-':>9}")
            plans = solve_both(graph, cluster, settings, time_limit, deadline_ms=deadline)
            plan = plans["milp"]
            if plan.placement is None:
                found = f"{plan.status:24} {'-':>2} {'-':>10} {'-':>10}"
            else:
                found = (f"{counts_summary(plan.counts):24} {plan.workers:>2} "
                         f"{plan.model_jct_ms:>10.2f} {plan.simulated_jct_ms:>10.2f}")
            print(f"{name:13} {preset:8} {deadline:>9.2f} | {pac} | {found} | "
                  f"{solved(plans['milp'])} {solved(plans['cpsat'])}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_pipedream_argument(parser)
    parser.add_argument("--budgets", default="2,4,8,16", help="comma-separated worker budgets")
    parser.add_argument("--time-limit", type=float, default=10.0,
                        help="seconds per solve and backend (default 10)")
    args = parser.parse_args()
    args.pipedream = use_pipedream(args.pipedream, required=True)
    budgets = [int(b) for b in args.budgets.split(",")]
    graphs = {g: read_graph_file(args.pipedream / f"{g}.txt") for g in PAPER_GRAPHS}
    start = time.perf_counter()
    budget_rows(graphs, budgets, args.time_limit)
    deadline_rows(graphs, args.time_limit)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
