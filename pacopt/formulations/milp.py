"""The offline problem (``docs/model.md``) as a Pyomo MILP, solved by HiGHS through highspy.

**Model.** A binary ``x[k]`` per option; at most one option per job (exactly one for the jobs
``problem.required`` names); at most one option per conflict row (one server at one maximal
instant); maximise ``sum(coefficient[k] * x[k])``, the shared weighted objective of
:func:`pacopt.formulations.offline.objective` (accepted jobs first, worker-time as the
tie-break).

**Pyomo to HiGHS.** Pyomo is the modelling layer; the solve talks to ``highspy.Highs`` directly.
Pyomo's own HiGHS interfaces (appsi and ``contrib.solver``) hide the MIP callbacks this backend
needs (progress, stopping once the accepted count is proven, Ctrl-C) and load the model row by
row, much slower than compiling it: :func:`compile_model` runs Pyomo's
``LinearStandardFormCompiler`` to get CSC arrays, which go to HiGHS in one ``passModel`` call.

**Stopping.** HiGHS would go on closing the gap of the tie-break; the MIP callbacks stop it as
soon as the bound on the weighted objective proves the incumbent's number of accepted jobs (the
headline objective). A SIGINT during the solve only sets a flag that the same callbacks check,
so Ctrl-C ends the search with its incumbent and bound instead of losing them. HiGHS calls them
between nodes and between rounds of root cuts, not inside an LP solve, so on a large instance the
first Ctrl-C can wait for the root LP to finish; a second one raises KeyboardInterrupt at once.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import highspy
import numpy as np
import pyomo.environ as pyo
from pyomo.common.dependencies import scipy_available
from pyomo.core.expr import LinearExpression, MonomialTermExpression
from pyomo.repn.plugins.standard_form import LinearStandardFormCompiler

from pacopt.formulations.offline import (
    ExactResult,
    Objective,
    OfflineProblem,
    Progress,
    check_choice,
    objective,
)
from pacopt.infra.concurrency import Stop
from pacopt.infra.interrupt import run_stoppable
from pacopt.infra.quiet import c_stdout_silenced

#: The thread count HiGHS's global scheduler was last built for (see :func:`solve_milp`).
_scheduler_threads: list[int | None] = [None]
#: Models up to this many options are presolved (see :func:`solve_milp`).
PRESOLVE_MAX_OPTIONS = 10_000

_MS = highspy.HighsModelStatus
#: Statuses after which HiGHS's incumbent and bound are meaningful.
_SOLVED = {_MS.kOptimal, _MS.kInterrupt, _MS.kTimeLimit, _MS.kIterationLimit, _MS.kSolutionLimit,
           _MS.kObjectiveBound, _MS.kObjectiveTarget, _MS.kMemoryLimit, _MS.kHighsInterrupt}


def build_model(problem: OfflineProblem, weights: Objective | None = None) -> pyo.ConcreteModel:
    """The Pyomo model: ``x`` (binary, indexed by option), ``job`` and ``row`` (at most one
    option each; exactly one for the jobs of ``problem.required``), ``objective`` (maximise
    ``weights``, by default :func:`objective`).

    Expressions are built as :class:`LinearExpression` over prebuilt argument lists, which skips
    Pyomo's operator overloading (one intermediate expression per ``+``); optional jobs with fewer
    than two options need no constraint (the bounds of ``x`` say it).
    """
    weights = weights or objective(problem)
    model = pyo.ConcreteModel(name="offline")
    model.x = pyo.Var(range(len(problem.options)), domain=pyo.Binary)
    x = [model.x[k] for k in range(len(problem.options))]
    jobs = [(ks, j in problem.required) for j, ks in enumerate(problem.by_job)
            if len(ks) > 1 or j in problem.required]
    model.job = pyo.Constraint(range(len(jobs)), rule=lambda m, i: (
        1 if jobs[i][1] else None, LinearExpression([x[k] for k in jobs[i][0]]), 1))
    model.row = pyo.Constraint(range(len(problem.rows)), rule=lambda m, i: (
        None, LinearExpression([x[k] for k in problem.rows[i]]), 1))
    model.objective = pyo.Objective(sense=pyo.maximize, expr=LinearExpression(
        [MonomialTermExpression(term) for term in zip(weights.coefficient, x)]))
    return model


@dataclass
class CompiledModel:
    """A linear Pyomo model as HiGHS's column-wise arrays, and the Pyomo variable of each column."""

    columns: list
    sense: highspy.ObjSense
    offset: float
    cost: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    integrality: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    a_start: np.ndarray
    a_index: np.ndarray
    a_value: np.ndarray

    def load(self, highs: highspy.Highs) -> None:
        """Pass the model to ``highs`` (replacing any model it holds)."""
        status = highs.passModel(
            len(self.columns), len(self.row_lower), len(self.a_value),
            int(highspy.MatrixFormat.kColwise), int(self.sense), self.offset, self.cost,
            self.col_lower, self.col_upper, self.row_lower, self.row_upper,
            self.a_start, self.a_index, self.a_value, self.integrality)
        if status == highspy.HighsStatus.kError:
            raise RuntimeError("HiGHS rejected the compiled model")


#: One compile at a time: Pyomo sets its compiler's array hooks on first use without a lock,
#: so two lanes compiling their first windows at once could meet a hook still None ("'NoneType'
#: object is not callable"); the compile is Python, held by the GIL, so little is lost.
_COMPILING = threading.Lock()
# Pyomo imports scipy on first use, from whichever thread comes first: two lanes coming at once
# could deadlock on the import lock. Resolved here, when this module is imported.
bool(scipy_available)


def compile_model(model: pyo.ConcreteModel) -> CompiledModel:
    """Compile a linear Pyomo model (one objective) with ``LinearStandardFormCompiler``.

    ``mixed_form`` keeps each constraint one row with its own sense and ``set_sense=None`` keeps
    the objective's sense, so rows and costs reach HiGHS unnegated.
    """
    with _COMPILING:
        form = LinearStandardFormCompiler().write(model, mixed_form=True, set_sense=None)
    if len(form.objectives) != 1:
        raise ValueError(f"expected one active objective, found {len(form.objectives)}")
    columns = form.columns
    kind = np.fromiter((entry.bound_type for entry in form.rows), dtype=np.int8,
                       count=len(form.rows))  # 1: <=, -1: >=, 0: ==
    rhs = np.asarray(form.rhs, dtype=float)
    inf = highspy.kHighsInf
    a = form.A
    return CompiledModel(
        columns=columns,
        sense=(highspy.ObjSense.kMaximize if form.objectives[0].sense == pyo.maximize
               else highspy.ObjSense.kMinimize),
        offset=float(form.c_offset[0]),
        cost=form.c.toarray().ravel().astype(float),
        col_lower=np.array([-inf if v.lb is None else v.lb for v in columns], dtype=float),
        col_upper=np.array([inf if v.ub is None else v.ub for v in columns], dtype=float),
        integrality=np.array([v.is_integer() for v in columns], dtype=np.int32),
        row_lower=np.where(kind == 1, -inf, rhs),
        row_upper=np.where(kind == -1, inf, rhs),
        a_start=a.indptr[:-1].astype(np.int32),
        a_index=a.indices.astype(np.int32),
        a_value=a.data.astype(float))


class _MilpSearch:
    """What the HiGHS callbacks see and update during one solve.

    Incumbent counts come from the incumbents themselves; bounds from HiGHS's dual
    bound on the weighted objective, converted by :meth:`Objective.accepted_bound` and capped by
    ``bound`` (the jobs that have any option). Callbacks run inside HiGHS, so they never raise:
    an exception (say, from ``progress``) is kept, the solve interrupted, and it is re-raised
    once HiGHS has returned.
    """

    def __init__(self, weights: Objective, cost: np.ndarray, bound: int, started: float,
                 progress: Progress | None):
        self.weights = weights
        self.cost = cost
        self.started = started
        self.progress = progress
        self.values: np.ndarray | None = None  # column values of the best incumbent seen
        self.value = -math.inf  # and its weighted objective
        self.accepted: int | None = None
        self.bound = bound
        self.trace: list[tuple[float, int | None, int | None]] = []
        self.stop_requested = False  # by Ctrl-C
        self.halted = False  # by a shared Stop (another search's request, not the user's)
        self.error: BaseException | None = None

    @property
    def proven(self) -> bool:
        return self.accepted is not None and self.bound <= self.accepted

    def request_stop(self) -> None:
        """Ask the search to stop at HiGHS's next callback (Ctrl-C does)."""
        self.stop_requested = True

    def halt(self) -> None:
        """Stop at HiGHS's next callback without counting as interrupted (a shared Stop)."""
        self.halted = True

    def update(self, values: np.ndarray | None = None, dual_bound: float | None = None) -> None:
        """Take a solution, if better than the incumbent, and/or a dual bound; report to
        ``progress`` if the accepted count or its bound improved.

        HiGHS reports improving solutions only, but the warm start, seeded before the run, can
        beat its first ones (such as the all-zero one).
        """
        improved = False
        if values is not None and float(self.cost @ values) > self.value:
            accepted = int(np.count_nonzero(values > 0.5))
            # a better weighted objective never accepts fewer jobs
            improved = self.accepted is None or accepted > self.accepted
            self.values, self.value, self.accepted = values, float(self.cost @ values), accepted
        if dual_bound is not None and math.isfinite(dual_bound):
            bound = self.weights.accepted_bound(dual_bound)
            if bound < self.bound:
                self.bound, improved = bound, True
        if improved:
            entry = (time.perf_counter() - self.started, self.accepted, self.bound)
            self.trace.append(entry)
            if self.progress is not None:
                self.progress(*entry)

    def on_solution(self, event) -> None:
        """kCallbackMipImprovingSolution: a new incumbent."""
        self._guarded(event, lambda: self.update(
            values=np.array(event.data_out.mip_solution)))  # a copy: HiGHS reuses the buffer

    def on_mip_interrupt(self, event) -> None:
        """kCallbackMipInterrupt (called often during the search): a chance to stop."""
        self._guarded(event, lambda: self.update(dual_bound=event.data_out.mip_dual_bound))

    def _guarded(self, event, step: Callable[[], None]) -> None:
        try:
            step()
        except BaseException as err:  # noqa: BLE001 -- kept and re-raised after the solve
            self.error = self.error or err
        if self.stop_requested or self.halted or self.error is not None or self.proven:
            event.interrupt()


def _run(highs: highspy.Highs, search: _MilpSearch) -> highspy.HighsStatus:
    """``highs.run()`` with Ctrl-C asking ``search`` to stop (see :func:`run_stoppable`) and
    HiGHS's stray prints kept off stdout; an error a callback kept is raised here."""
    with c_stdout_silenced():
        status, _ = run_stoppable(highs.run, search.request_stop)
    if search.error is not None:
        raise search.error
    return status


def solve_milp(problem: OfflineProblem, *, time_limit: float | None = None,
               threads: int | None = None, warm_start: dict[int, int] | None = None,
               progress: Progress | None = None, stop: Stop | None = None) -> ExactResult:
    """Solve the offline problem exactly (up to ``time_limit`` seconds) with HiGHS.

    ``time_limit`` covers the whole call, model building included; ``threads`` is HiGHS's thread
    count (default: its own choice). ``warm_start`` (job index -> option index) must be feasible
    (see :func:`pacopt.solvers.warm.warm_start_from`); HiGHS starts from it. ``progress`` is
    called with (seconds, incumbent accepted, bound on accepted) whenever either improves, from
    the thread running HiGHS; every call is also kept in the result's ``trace``. ``stop``, set
    from any thread, ends the search like Ctrl-C (without marking the result interrupted).

    The search stops as soon as the incumbent's accepted count is proven, even if the
    worker-time tie-break is not. The status is ``optimal`` iff the bound equals the number of
    accepted jobs, ``feasible`` otherwise (also after Ctrl-C or the time limit, with the best
    incumbent found, possibly accepting nobody), ``error`` if HiGHS fails. Jobs in
    ``problem.required`` must be accepted: then the status is ``infeasible`` when that is proven
    impossible, and ``error`` when the search stops before finding a solution that does it.
    """
    started = time.perf_counter()
    if warm_start is not None:
        check_choice(problem, warm_start)
    if any(not problem.by_job[j] for j in problem.required):
        return ExactResult(chosen={}, status="infeasible", bound_accepted=None,
                           seconds=time.perf_counter() - started)
    if not problem.options:  # nobody can be accepted (HiGHS would call the model empty)
        return ExactResult(chosen={}, status="optimal", bound_accepted=0,
                           seconds=time.perf_counter() - started)
    weights = objective(problem)
    compiled = compile_model(build_model(problem, weights))
    option_of = np.fromiter((v.index() for v in compiled.columns), dtype=np.int64,
                            count=len(compiled.columns))

    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    # The callbacks stop the search once the accepted count is proven; HiGHS's default relative
    # gap (1e-4 of the weighted objective) could stop it earlier with that count still open.
    highs.setOptionValue("mip_rel_gap", 0.0)
    # HiGHS's presolve (it removes dominated placements) pays off on small models such as the
    # window steps; on large ones it runs long on the overlapping clique rows, checking the time
    # limit only between its rounds, and the search does no better after it
    # (docs/experiments.md, Exact search: MILP backend).
    presolve = len(problem.options) <= PRESOLVE_MAX_OPTIONS
    highs.setOptionValue("presolve", "on" if presolve else "off")
    if threads is not None:
        highs.setOptionValue("threads", int(threads))
    if time_limit is not None:
        highs.setOptionValue("time_limit", max(0.0, time_limit - (time.perf_counter() - started)))
    compiled.load(highs)
    trivial_bound = sum(1 for ks in problem.by_job if ks)
    search = _MilpSearch(weights, compiled.cost, trivial_bound, started, progress)
    if warm_start:
        start = highspy.HighsSolution()
        start.col_value = np.isin(option_of, list(warm_start.values())).astype(float)
        if highs.setSolution(start) == highspy.HighsStatus.kError:
            raise RuntimeError("HiGHS refused the warm start")
        if problem.required <= warm_start.keys():
            # Also the first incumbent here: kept even if HiGHS stops before taking it up.
            search.update(values=np.asarray(start.col_value))
    highs.cbMipImprovingSolution.subscribe(search.on_solution)
    highs.cbMipInterrupt.subscribe(search.on_mip_interrupt)
    if threads is not None and threads != _scheduler_threads[0]:
        # HiGHS's scheduler keeps the thread count of its first solve in this process; a later
        # solve asking for another count fails unless the scheduler is rebuilt. Rebuilding it
        # while another HiGHS runs (a portfolio lane) would pull it from under that solve, so
        # it is rebuilt only on a change (the portfolio keeps one count per run).
        highspy.Highs.resetGlobalScheduler(True)
        _scheduler_threads[0] = threads
    with stop.subscribed(search.halt) if stop else nullcontext():
        run_status = _run(highs, search)

    model_status = highs.getModelStatus()
    info = highs.getInfo()
    if info.primal_solution_status == highspy.kSolutionStatusFeasible:
        search.update(values=np.asarray(highs.getSolution().col_value))
    if model_status in _SOLVED and run_status != highspy.HighsStatus.kError:
        search.update(dual_bound=info.mip_dual_bound)
        status = None
    else:
        status = "infeasible" if model_status == _MS.kInfeasible else "error"

    chosen = {}
    if search.values is not None:
        for column in np.flatnonzero(search.values > 0.5):
            k = int(option_of[column])
            chosen[problem.options[k].job] = k
    check_choice(problem, chosen)
    if status is None and not problem.required <= chosen.keys():
        status = "error"  # stopped before any solution (the empty one is not allowed)
    if status is None:
        status = "optimal" if search.bound == len(chosen) else "feasible"
    return ExactResult(chosen=chosen, status=status,
                       bound_accepted=search.bound if status in ("optimal", "feasible") else None,
                       seconds=time.perf_counter() - started, trace=search.trace,
                       interrupted=search.stop_requested)
