"""The offline problem (:mod:`pacopt.formulations.offline`) as an OR-Tools CP-SAT model.

An independent second model of the problem the MILP solves, so that each checks the other: one
Boolean ``x[k]`` per option, at most one option per job (exactly one for the jobs of
``problem.required``) and per conflict row (one server at one maximal instant), maximise the
shared weighted objective ``sum(coefficient[k] * x[k])``
(:func:`~pacopt.formulations.offline.objective`: accepted jobs first, worker-time as tie-break).
When every job is required the count is fixed and the model is a pure feasibility problem.

The model is written straight into CP-SAT's model proto, one bulk ``extend`` per constraint,
rather than through ``CpModel``'s expression API, which is much slower to build models of a
large episode's size.

The search stops as soon as the bound on accepted jobs meets the incumbent (the headline number
is proven even if the tie-break is not), at the time limit, or on Ctrl-C, which stops it
gracefully and returns the best solution found so far. No aggregated worker-capacity rows or
symmetry breaking: the former (sum of workers <= servers at each instant) is implied by the
rows and made the search worse, and the latter is not valid (blocks of one size are not all
equivalent once other jobs hold some). Measurements: ``docs/experiments.md`` (Exact search:
CP-SAT settings).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext

from ortools.sat.python import cp_model

from pacopt.formulations.offline import (
    ExactResult,
    Objective,
    OfflineProblem,
    Progress,
    check_choice,
    objective,
)
from pacopt.infra.concurrency import Stop, available_cores
from pacopt.infra.interrupt import run_stoppable

__all__ = ["build_model", "solve_cpsat"]

#: Models with more options than this are searched without CP-SAT's LP relaxation and with a
#: lighter presolve (no probing). On small models, such as the window steps of
#: :mod:`~pacopt.solvers.decomposition`, the LP and its cuts prove optima fast; on large
#: ones the LP accepts (almost) every job fractionally, so its bound does not help, and the time
#: CP-SAT spends on it and on probing is better spent searching. The all-required checks of
#: :mod:`~pacopt.solvers.realise` use the same settings: no other did better in the search.
#: Measurements: ``docs/experiments.md`` (Exact search: CP-SAT settings).
LARGE_MODEL_OPTIONS = 5000


def build_model(problem: OfflineProblem, weights: Objective,
                warm_start: dict[int, int] | None = None) -> cp_model.CpModel:
    """The CP-SAT model of ``problem``; variable k is option k (so solution values index options).

    ``warm_start`` (job -> option) becomes a complete hint: its options 1, every other option 0;
    an infeasible one raises :class:`AssertionError` (see :func:`check_choice`).
    """
    model = cp_model.CpModel()
    proto = model.proto
    count = len(problem.options)
    variables = proto.variables
    for _ in range(count):
        variables.add().domain.extend((0, 1))
    constraints = proto.constraints
    for j, group in enumerate(problem.by_job):
        if j in problem.required:
            constraints.add().exactly_one.literals.extend(group)
        elif len(group) > 1:
            constraints.add().at_most_one.literals.extend(group)
    for row in problem.rows:
        constraints.add().at_most_one.literals.extend(row)
    if _has_objective(problem):
        # The proto minimises; CpModel.maximize stores max f as min -f with scaling factor -1.
        goal = proto.objective
        goal.vars.extend(range(count))
        goal.coeffs.extend([-c for c in weights.coefficient])
        goal.scaling_factor = -1.0
    if warm_start is not None:
        check_choice(problem, warm_start)
        hint = [0] * count
        for k in warm_start.values():
            hint[k] = 1
        proto.solution_hint.vars.extend(range(count))
        proto.solution_hint.values.extend(hint)
    return model


class _CpsatProgress(cp_model.CpSolverSolutionCallback):
    """Tracks incumbent and bound (in accepted jobs), reports improvements, stops when they meet.

    CP-SAT calls it from its worker threads, hence the lock.
    """

    def __init__(self, weights: Objective, cap: int, started: float,
                 progress: Progress | None) -> None:
        super().__init__()
        self.weights = weights
        self.started = started
        self.progress = progress
        self.incumbent: int | None = None
        self.bound = cap
        self.trace: list[tuple[float, int | None, int | None]] = []
        self.stop: Callable[[], None] = lambda: None
        self._lock = threading.Lock()

    def on_solution_callback(self) -> None:
        # Exact, not just a bound: the objective is scale * accepted - tiebreak with
        # 0 <= tiebreak < scale, so accepted is the objective divided by scale, rounded up.
        self.update(self.weights.accepted_bound(self.ObjectiveValue()),
                    self.BestObjectiveBound())

    def on_bound(self, objective_bound: float) -> None:
        """CP-SAT's ``best_bound_callback``: the bound also improves between solutions."""
        self.update(None, objective_bound)

    def update(self, accepted: int | None, objective_bound: float) -> None:
        """Take a solution accepting ``accepted`` jobs (None: no solution) and a bound on the
        weighted objective; record, report and maybe stop if either improved."""
        with self._lock:
            bound = self.bound
            if math.isfinite(objective_bound):
                bound = min(bound, self.weights.accepted_bound(objective_bound))
            better = accepted is not None and (self.incumbent is None or accepted > self.incumbent)
            if not better and bound == self.bound:
                return
            if better:
                self.incumbent = accepted
            self.bound = bound
            entry = (time.perf_counter() - self.started, self.incumbent, self.bound)
            self.trace.append(entry)
            if self.progress is not None:
                self.progress(*entry)
            if self.incumbent == self.bound:
                self.stop()


def solve_cpsat(problem: OfflineProblem, *, time_limit: float | None = None,
                threads: int | None = None, warm_start: dict[int, int] | None = None,
                progress: Progress | None = None, stop: Stop | None = None) -> ExactResult:
    """Solve ``problem`` with CP-SAT.

    ``time_limit`` (seconds) bounds the whole call, building included; ``threads`` defaults to
    every core; ``warm_start`` (job -> option, feasible) is passed as a hint; ``progress(seconds,
    incumbent accepted, bound on accepted)`` is called on every improvement of either, from
    CP-SAT's threads. Ctrl-C during the search, or ``stop`` being set (from any thread), stops it
    and returns the best solution so far.

    The status is ``optimal`` iff the bound equals the number of accepted jobs, ``feasible``
    otherwise (also after Ctrl-C or the time limit, possibly accepting nobody). Jobs in
    ``problem.required`` must be accepted: then the status is ``infeasible`` when that is proven
    impossible, and ``error`` when the search stops before finding a solution that does it.
    """
    started = time.perf_counter()
    if any(not problem.by_job[j] for j in problem.required):
        return ExactResult(chosen={}, status="infeasible", bound_accepted=None,
                           seconds=time.perf_counter() - started)
    weights = objective(problem)
    model = build_model(problem, weights, warm_start)
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = threads or available_cores()
    params.log_search_progress = False
    params.catch_sigint_signal = False  # run_stoppable's handler stops the search
    if len(problem.options) > LARGE_MODEL_OPTIONS:
        params.linearization_level = 0
        params.cp_model_probing_level = 0
    if time_limit is not None:
        params.max_time_in_seconds = max(0.0, time_limit - (time.perf_counter() - started))
    # Rejecting everything is feasible (unless jobs are required) and no job has two options, so
    # the number of jobs that have any option bounds the optimum before the solver says anything.
    monitor = _CpsatProgress(weights, sum(1 for group in problem.by_job if group), started, progress)
    monitor.stop = solver.stop_search
    searching = _has_objective(problem)
    if searching:
        solver.best_bound_callback = monitor.on_bound
    with stop.subscribed(solver.stop_search) if stop else nullcontext():
        status, interrupted = run_stoppable(
            lambda: solver.solve(model, monitor if searching else None), solver.stop_search)
    seconds = time.perf_counter() - started

    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        response = solver.response_proto
        chosen = _checked_choice(problem, [k for k, v in enumerate(response.solution) if v])
        if not searching:  # the accepted count is fixed, so any solution is optimal
            return ExactResult(chosen=chosen, status="optimal", bound_accepted=len(chosen),
                               seconds=seconds, interrupted=interrupted)
        monitor.update(len(chosen), response.best_objective_bound)
    elif status == cp_model.UNKNOWN and not problem.required:
        # Stopped before any solution (the response's bound field is then a meaningless 0).
        chosen = {}  # rejecting everything is always feasible
        monitor.update(0, math.inf)
    else:
        # MODEL_INVALID; INFEASIBLE (only possible with required jobs); or UNKNOWN with required
        # jobs, where the empty choice does not count.
        infeasible = status == cp_model.INFEASIBLE and problem.required
        return ExactResult(chosen={}, status="infeasible" if infeasible else "error",
                           bound_accepted=None, seconds=seconds, trace=monitor.trace,
                           interrupted=interrupted)
    bound = monitor.bound
    return ExactResult(chosen=chosen, status="optimal" if bound == len(chosen) else "feasible",
                       bound_accepted=bound, seconds=seconds, trace=monitor.trace,
                       interrupted=interrupted)


def _has_objective(problem: OfflineProblem) -> bool:
    """False when every job that has an option is required: the accepted count is then fixed,
    and a pure feasibility search is much faster than optimising the tie-break."""
    return any(group and j not in problem.required for j, group in enumerate(problem.by_job))


def _checked_choice(problem: OfflineProblem, selected: list[int]) -> dict[int, int]:
    """Job -> option of the selected options; raises if they break a constraint (a bug)."""
    chosen = {problem.options[k].job: k for k in selected}
    if len(chosen) != len(selected):
        raise AssertionError("CP-SAT chose two options of one job")
    check_choice(problem, chosen)
    return chosen
