"""The heterogeneous problem's front door: :func:`solve_hetero` and ``pacopt hetero``.

``pacopt hetero GRAPH --types TYPES.json (--throughput STEPS_PER_S | --deadline-ms T)
[--method dp|milp|cpsat|rl|greedy] [--json]`` assigns a resource type to every op of one job,
provisions its pipeline stages and prints the plan (the model:
:mod:`pacopt.hetero.model`). Every plan goes through the validator
(:func:`~pacopt.hetero.model.plan_problems`) before it is reported; an unreachable
throughput is an ``infeasible`` result (exit 0), a plan that fails validation exits 1, bad input
is one line and exit 2, Ctrl-C prints the best plan so far and exits 130.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pacopt.hetero.model import (
    HeteroPlan,
    HeteroProblem,
    build_hetero_problem,
    plan_problems,
    step_budget,
)
from pacopt.hetero.types import ResourceTypes
from pacopt.infra.commandline import command_parser, run_command
from pacopt.infra.errors import InputError
from pacopt.infra.interrupt import EXIT_INTERRUPTED, stop_requested, stoppable
from pacopt.model.graph import JobGraph

#: Methods: name -> one-line description.
HETERO_METHODS = {
    "dp": "exact: dynamic programme over the linear order",
    "milp": "exact: path MILP by column generation (HiGHS; final master in Pyomo)",
    "cpsat": "exact: compact model in OR-Tools CP-SAT",
    "greedy": "heuristic: cheapest type that keeps the stage within the budget, op by op",
    "rl": "learned: MaskablePPO type-per-op scheduler (examples/hetero/rl_policy.zip)",
}


def run_method(problem: HeteroProblem, method: str, *, time_limit: float | None = 60.0,
               threads: int | None = None, checkpoint: str | Path | None = None,
               policy=None) -> HeteroPlan:
    """Run one method on ``problem`` and validate its plan (``plan.validated``; the problems
    found, if any, in ``plan.note``). ``rl`` uses ``policy`` (a loaded checkpoint) if given,
    else loads ``checkpoint`` (default: the bundled one)."""
    if method in ("dp", "milp", "cpsat"):
        from pacopt.hetero import exact

        if method == "dp":
            plan = exact.solve_dp(problem)
        else:
            solver = exact.solve_hetero_milp if method == "milp" else exact.solve_hetero_cpsat
            plan = solver(problem, time_limit=time_limit, threads=threads)
    elif method == "greedy":
        from pacopt.hetero.greedy import solve_greedy

        plan = solve_greedy(problem)
    elif method == "rl":
        from pacopt.hetero.rl import CHECKPOINT, load_policy, solve_rl

        plan = solve_rl(problem, policy or load_policy(checkpoint or CHECKPOINT))
    else:
        raise InputError(f"method: unknown '{method}'; known: {', '.join(HETERO_METHODS)}")
    if plan.status == "error":
        return plan
    problems = plan_problems(problem, plan)
    plan.validated = not problems
    if problems:
        plan.note = "; ".join([plan.note, *problems]).strip("; ")
    return plan


def solve_hetero(graph: JobGraph, types: ResourceTypes, *, throughput: float | None = None,
                 deadline_ms: float | None = None, training_steps: int = 50, method: str = "dp",
                 time_limit: float | None = 60.0, threads: int | None = None,
                 checkpoint: str | Path | None = None) -> HeteroPlan:
    """The validated plan of ``method`` for one job on ``types``, to meet ``throughput``
    (steps/s) or ``deadline_ms`` for ``training_steps`` steps (give exactly one)."""
    budget = step_budget(throughput, deadline_ms, training_steps)
    problem = build_hetero_problem(graph, types, budget, training_steps)
    return run_method(problem, method, time_limit=time_limit, threads=threads,
                      checkpoint=checkpoint)


def hetero_main(argv: list[str] | None = None) -> int:
    """``pacopt hetero`` as a process of its own (bad input: one line, exit 2)."""
    return run_command(hetero_command, argv)


def hetero_command(argv: list[str] | None) -> int:
    """``pacopt hetero GRAPH --types TYPES.json (--throughput S | --deadline-ms T) [options]``."""
    from pacopt.hetero.types import load_types
    from pacopt.model.graph_sources import resolve_graph

    parser = command_parser("hetero", (
        "Cheapest type per op and provisioning of one job's pipeline stages to meet a throughput "
        "(pacopt's version of HeterPS)."),
        epilog="methods: " + "; ".join(f"{k}: {v}" for k, v in HETERO_METHODS.items()))
    parser.add_argument("graph", help="a PipeDream graph.txt, an inline-graph .json, a bundled "
                                      "example name (cnn, resnet, transformer) or a downloaded "
                                      "PipeDream model")
    parser.add_argument("--types", required=True, metavar="TYPES.json",
                        help="resource types, prices and links (e.g. examples/hetero/types.json)")
    goal = parser.add_mutually_exclusive_group(required=True)
    goal.add_argument("--throughput", type=float, metavar="STEPS_PER_S",
                      help="required training steps per second")
    goal.add_argument("--deadline-ms", type=float, metavar="T",
                      help="finish --steps training steps within T ms")
    parser.add_argument("--steps", type=int, default=50,
                        help="training steps of the job (default 50, PAC-ML's)")
    parser.add_argument("--method", choices=list(HETERO_METHODS), default="dp")
    parser.add_argument("--time-limit", type=float, default=60.0, metavar="S",
                        help="for milp and cpsat (default 60)")
    parser.add_argument("--threads", type=int, metavar="N", help="solver threads (milp, cpsat)")
    parser.add_argument("--checkpoint", metavar="FILE", help="RL policy (default: the bundled one)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    args = parser.parse_args(argv)
    if args.time_limit is not None and args.time_limit <= 0:
        raise InputError(f"--time-limit: must be > 0, got {args.time_limit}")
    graph = resolve_graph(args.graph)
    types = load_types(args.types)
    with stoppable():  # Ctrl-C: the exact methods stop with their best plan, kept and printed
        plan = solve_hetero(graph, types, throughput=args.throughput,
                            deadline_ms=args.deadline_ms, training_steps=args.steps,
                            method=args.method, time_limit=args.time_limit,
                            threads=args.threads, checkpoint=args.checkpoint)
        plan.interrupted |= stop_requested()
    if args.json:
        print(json.dumps(plan.to_dict(), indent=1))
    else:
        _print_plan(plan, graph)
    if plan.interrupted:
        return EXIT_INTERRUPTED
    return 0 if plan.validated else 1


def _print_plan(plan: HeteroPlan, graph: JobGraph) -> None:
    need = 1000.0 / plan.step_budget_ms
    print(f"{plan.graph} ({graph.num_ops} ops, op times by {plan.times_from}): {plan.method} "
          f"{plan.status} in {plan.seconds:.2f} s; required {need:.4g} steps/s "
          f"(step budget {plan.step_budget_ms:.4g} ms)")
    if plan.note:
        print(f"  {plan.note}")
    if plan.interrupted:
        print("  interrupted: the best plan found so far")
    if not plan.stages:
        return
    print(f"  cost {plan.cost_per_hour:.2f} per hour, {plan.job_cost:.4f} per job; achieved "
          f"{plan.steps_per_s:.4g} steps/s; validated {'yes' if plan.validated else 'NO'}"
          + (f"; bound {plan.bound_cost:.2f} (gap {plan.gap:.2%})" if plan.bound_cost is not None
             and plan.gap is not None else ""))
    ids = list(plan.assignment)
    # the three parts of a stage's time (ms per step, per replica): they add up to time_ms
    print(f"  {'stage':>5} {'type':>8} {'ops':>28} {'replicas':>8} {'time_ms':>10} "
          f"{'compute':>10} {'transfer':>9} {'allreduce':>9}")
    for i, s in enumerate(plan.stages):
        first, last = ids[s.first], ids[s.last]
        span = first if s.last == s.first else f"{first}..{last}"
        if len(span) > 28:
            span = f"{first[:13]}..{last[-13:]}"
        r = s.replicas
        print(f"  {i:>5} {s.type:>8} {span:>28} {r:>8} {s.time_ms:>10.3f} "
              f"{s.compute_ms / r:>10.3f} {s.comm_ms / r + s.latency_ms:>9.3f} "
              f"{(r - 1) / r * s.allreduce_ms:>9.3f}")


if __name__ == "__main__":
    sys.exit(hetero_main())
