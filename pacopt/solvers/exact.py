"""Running the exact methods: build the offline problem, warm-start it from the best online
heuristic, solve with a backend, and tighten the reported bound with the worker-count relaxation.

Methods: ``milp`` (Pyomo + HiGHS), ``cpsat`` (OR-Tools CP-SAT), ``bound`` (no search: the best
heuristic as incumbent and the worker-count relaxation as the bound, for instances too large to
search).
"""

from __future__ import annotations

import sys
import time

from pacopt.cluster.instance import Instance
from pacopt.cluster.jct import JctModel
from pacopt.cluster.metrics import episode_metrics
from pacopt.cluster.policies import make_policy
from pacopt.cluster.simulator import simulate
from pacopt.cluster.solution import Solution
from pacopt.formulations.bound import worker_count_bound
from pacopt.formulations.decomposition import solve_decomposed
from pacopt.formulations.offline import ExactResult, build_problem, to_solution
from pacopt.formulations.warm import warm_start_from

EXACT_METHODS = {
    "milp": "exact: offline optimum, Pyomo MILP solved by HiGHS",
    "cpsat": "exact: offline optimum, OR-Tools CP-SAT model",
    "bound": "bound: best heuristic as incumbent, worker-count relaxation as upper bound",
}
#: Heuristics whose best solution warm-starts the search (all deterministic and cheap).
WARM_HEURISTICS = ("min-feasible", "para-min", "para-max")
DEFAULT_TIME_LIMIT = 120.0
BOUND_TIME_LIMIT = 10.0  # seconds the bound method gives the relaxation's integer search


def run_exact(instance: Instance, method: str, model: JctModel, *, time_limit: float | None,
              threads: int | None, progress: bool) -> Solution:
    """Solve the offline problem of ``instance`` with ``method`` (see :data:`EXACT_METHODS`)."""
    started = time.perf_counter()
    limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    problem = build_problem(instance, model)
    best = max((simulate(instance, make_policy(name), model=model) for name in WARM_HEURISTICS),
               key=lambda s: s.accepted)
    start = warm_start_from(problem, best)
    report = _reporter(started) if progress else None
    if method == "bound":
        bound = worker_count_bound(problem, min(BOUND_TIME_LIMIT, limit))
        result = ExactResult(chosen=start, status="feasible", bound_accepted=bound,
                             seconds=time.perf_counter() - started)
        if report:
            report(result.seconds, len(start), bound)
    else:
        remaining = max(1.0, limit - (time.perf_counter() - started))
        result = solve_decomposed(problem, _backend(method), time_limit=remaining,
                                  threads=threads, warm_start=start, progress=report)
        if result.interrupted:
            print("interrupted: returning the best known solution", file=sys.stderr)
    bound = result.bound_accepted
    chosen = result.chosen if len(result.chosen) >= len(start) else start
    status = "error" if result.status == "error" else (
        "optimal" if bound == len(chosen) else "feasible")
    solution = to_solution(problem, chosen, method=method, status=status, bound_accepted=bound,
                           solve_seconds=time.perf_counter() - started)
    solution.metrics = episode_metrics(instance, solution)
    solution.metrics["warm_start_accepted"] = len(start)
    solution.metrics["warm_start_method"] = best.method
    solution.metrics["trace"] = result.trace
    return solution


def _backend(method: str):
    """The backend's solve function, imported on demand (each pulls in a solver library)."""
    if method == "milp":
        from pacopt.formulations.milp import solve_milp
        return solve_milp
    from pacopt.formulations.cpsat import solve_cpsat
    return solve_cpsat


def _reporter(started: float):
    """A progress callback printing one line to stderr whenever incumbent or bound improve."""
    def report(seconds: float, incumbent: int | None, bound: int | None) -> None:
        gap = "" if not incumbent or bound is None else f"  gap {(bound - incumbent) / bound:6.2%}"
        print(f"[{seconds:8.1f} s] incumbent {incumbent if incumbent is not None else '-':>5}  "
              f"bound {bound if bound is not None else '-':>5}{gap}", file=sys.stderr, flush=True)
    return report
