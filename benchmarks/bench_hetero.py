"""Heterogeneous resources (HeterPS): exact methods, the greedy and the RL scheduler per graph.

    python benchmarks/bench_hetero.py [--pipedream DIR] [--types FILE] [--loads 2,10]
                                      [--time-limit S] [--cpsat-max-ops N] [--checkpoint FILE]

For every graph (the bundled cnn, resnet, transformer, whose per-type times come from the
roofline, and the PipeDream profiles found, scaled by each type's speed factor) and load L, the
step budget is the graph's A100 step time / L (L = 10: the job must run 10x faster than on one
A100). Columns: the DP, MILP (column generation) and CP-SAT cost per hour and solve time ('*' =
proven optimal; CP-SAT only up to --cpsat-max-ops ops: its compact model does not scale), whether
the proven exact costs agree (or all say infeasible), the greedy's and the RL scheduler's cost and gap to the optimum, and
whether the RL policy trained on the graph (``train``) or never saw it. Every plan is checked by
the validator; a failure is printed. The last lines summarise the MILP's worst time and the mean
gaps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from pacopt.hetero import EXAMPLE_TYPES, build_hetero_problem, load_types
from pacopt.hetero.command import run_method
from pacopt.model.graph_sources import EXAMPLES_DIR, read_graph_file
from pacopt.model.pipedream import PIPEDREAM_MODELS

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import add_pipedream_argument, use_pipedream  # noqa: E402


def graphs(pipedream: Path):
    for name in ("cnn", "resnet", "transformer"):
        yield read_graph_file(EXAMPLES_DIR / f"{name}.json", name)
    for name in PIPEDREAM_MODELS:
        if (pipedream / f"{name}.txt").is_file():
            yield read_graph_file(pipedream / f"{name}.txt", name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_pipedream_argument(parser)
    parser.add_argument("--types", default=str(EXAMPLE_TYPES))
    parser.add_argument("--loads", default="2,10")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--cpsat-max-ops", type=int, default=100)
    parser.add_argument("--checkpoint", default=None)
    args = parser.parse_args()
    args.pipedream = use_pipedream(args.pipedream)
    types = load_types(args.types)
    loads = [float(x) for x in args.loads.split(",")]
    rl_model, trained_on = None, set()
    try:
        from pacopt.hetero.rl import CHECKPOINT, TRAIN_GRAPHS, load_policy

        rl_model = load_policy(args.checkpoint or CHECKPOINT)
        trained_on = set(TRAIN_GRAPHS)
    except Exception as err:  # no checkpoint: the RL columns stay empty
        print(f"(no RL policy: {err})", file=sys.stderr)

    head = (f"{'graph':<14}{'ops':>5}{'load':>5}{'steps/s':>8} | {'dp $/h':>8}{'s':>6} | "
            f"{'milp $/h':>8}{'s':>7} | {'cpsat $/h':>9}{'s':>7} | {'agree':>5} | "
            f"{'greedy':>8}{'gap':>7} | {'rl':>8}{'gap':>7} {'rl on':>8}")
    print(f"types {args.types} ({', '.join(types.names)}), prices per hour; time limit "
          f"{args.time_limit:g} s\n{head}\n{'-' * len(head)}")
    milp_times, greedy_gaps, rl_gaps = [], [], {"train": [], "held-out": []}
    for graph in graphs(args.pipedream):
        for load in loads:
            problem = build_hetero_problem(graph, types, graph.step_ms / load)
            plans = {"dp": run_method(problem, "dp"),
                     "milp": run_method(problem, "milp", time_limit=args.time_limit),
                     "greedy": run_method(problem, "greedy")}
            if graph.num_ops <= args.cpsat_max_ops:
                plans["cpsat"] = run_method(problem, "cpsat", time_limit=args.time_limit)
            if rl_model is not None:
                plans["rl"] = run_method(problem, "rl", policy=rl_model)
            for name, plan in plans.items():
                if not plan.validated and plan.status != "error":
                    print(f"  VALIDATION FAILED {graph.name} {name}: {plan.note}")
            best = plans["dp"]
            milp_times.append(plans["milp"].seconds)
            exact = [p for k, p in plans.items() if k in ("dp", "milp", "cpsat")
                     and p.status == "optimal"]
            agree = all(abs(p.cost_per_hour - best.cost_per_hour) <= 1e-9 * best.cost_per_hour
                        for p in exact) if best.status == "optimal" else \
                all(p.status == "infeasible" for k, p in plans.items() if k != "greedy")
            where = "train" if graph.name in trained_on else "held-out"
            gap = {k: _gap(plans.get(k), best) for k in ("greedy", "rl")}
            if gap["greedy"] is not None:
                greedy_gaps.append(gap["greedy"])
            if gap["rl"] is not None:
                rl_gaps[where].append(gap["rl"])
            print(f"{graph.name:<14}{graph.num_ops:>5}{load:>5g}{1000 / problem.step_budget_ms:>8.3g}"
                  f" | {_cost(best)}{best.seconds:>6.2f} | {_cost(plans['milp'])}"
                  f"{_time(plans['milp'])} | {_cost(plans.get('cpsat'), 9)}"
                  f"{_time(plans.get('cpsat'))} | {'yes' if agree else 'NO':>5} | "
                  f"{_cost(plans['greedy'])}{_pct(gap['greedy'])} | {_cost(plans.get('rl'))}"
                  f"{_pct(gap['rl'])} {where if 'rl' in plans else '-':>8}", flush=True)
    print(f"\nMILP: slowest {max(milp_times):.2f} s, {sum(t < 10 for t in milp_times)} of "
          f"{len(milp_times)} solves under 10 s")
    print(f"greedy: mean gap {np.mean(greedy_gaps):.1%} over {len(greedy_gaps)} problems")
    for where, gaps in rl_gaps.items():
        if gaps:
            print(f"rl ({where} graphs): mean gap {np.mean(gaps):.1%}, median "
                  f"{np.median(gaps):.1%}, worst {max(gaps):.1%} over {len(gaps)} problems")
    return 0


def _gap(plan, best):
    if plan is None or best.status != "optimal" or plan.cost_per_hour is None:
        return None
    return plan.cost_per_hour / best.cost_per_hour - 1


def _cost(plan, width=8):
    if plan is None:
        return f"{'-':>{width}}"
    if plan.cost_per_hour is None:
        return f"{plan.status[:width]:>{width}}"
    return f"{plan.cost_per_hour:>{width}.2f}"


def _time(plan):
    if plan is None:
        return f"{'-':>7}"
    return f"{plan.seconds:>6.2f}{'*' if plan.status == 'optimal' else ' '}"


def _pct(gap):
    return f"{'-':>7}" if gap is None else f"{gap:>7.1%}"


if __name__ == "__main__":
    sys.exit(main())
