"""A cheap upper bound on accepted jobs: the worker-count relaxation of the offline problem.

Forget where jobs go: each job j either is rejected or runs at one degree d, holding ``w_jd``
workers (the fewest any of its candidate footprints needs) for ``L_jd`` (the shortest of their
JCTs) from its arrival. The only constraint is that, at every maximal arrival instant, the jobs
running hold at most all the workers. Any feasible offline schedule induces a feasible point of
this relaxation with the same accepted jobs, so its optimum (or any dual bound of it) bounds the
offline optimum, and so every online policy.

It has a handful of variables per job instead of hundreds of placed options, so its LP is cheap
even on the largest episodes, and the integer model improves on that bound within a time limit
(HiGHS, with its log off). :func:`solve_relaxation_fully` reports its LP value, dual bound and
best selection separately, closes the gap to the last job and can start from a schedule's
degrees (``benchmarks/bench_bounds.py`` measures how far it gets).

On the paper workload its bound stays above the best known solutions, and neither shape rows at
single instants nor per-cell worker counts tightened it: what binds is that a job keeps its
block for its whole run. How far a bound of this kind can go, and what was tried:
``docs/experiments.md`` (Bounds).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import highspy
import numpy as np

from pacopt.formulations.offline import OfflineProblem, maximal_cliques
from pacopt.infra.interrupt import run_stoppable
from pacopt.infra.quiet import c_stdout_silenced
from pacopt.model.state import EPS_MS


@dataclass
class Relaxation:
    """The worker-count relaxation's answer: ``bound`` on accepted jobs (proven for the
    relaxation, hence for the offline problem), and its best integer selection, job -> degree
    (empty when only the LP was solved); ``interrupted``: Ctrl-C stopped the integer search."""

    bound: int
    selection: dict[int, int]
    interrupted: bool = False


def worker_count_bound(problem: OfflineProblem, time_limit: float | None = 10.0,
                       integral: bool = True) -> int:
    """An upper bound on the accepted jobs of ``problem``.

    ``integral=False`` solves the LP relaxation only; otherwise the integer relaxation runs for up
    to ``time_limit`` seconds and its dual bound is used (its optimum, if proven).
    """
    return solve_relaxation(problem, time_limit, integral).bound


def _add_uncapped_degrees(problem: OfflineProblem, groups: dict) -> None:
    """Add to ``groups`` the (job, degree) pairs of the true problem that a capped one lacks:
    a degree with a block size no tile holds (5 = 5x1x1 on 4x4 tiles) has no capped candidate,
    but the cluster places it. Under ``ddls`` a degree's JCT is the job table's, and its
    largest split count bounds its workers, so the bound holds for the true problem (a whole
    problem's: every job of the instance is in it)."""
    instance, model = problem.instance, problem.model
    horizon = instance.horizon_ms
    for j, job in enumerate(instance.jobs):
        if j in problem.late:
            continue
        table = model.table(instance.graphs[job.graph])
        deadline, scale = instance.deadline_ms(job), instance.work_scale(job)
        for d in range(1, table.max_degree + 1):
            jct = table.jct_ms[d] * scale  # kept as build_problem keeps its options
            if jct > deadline or (horizon is not None and job.arrival_ms + jct > horizon + EPS_MS):
                continue
            if table.placed[d] and (j, d) not in groups:
                groups[j, d] = (max(table.counts[d]), job.arrival_ms, job.arrival_ms + jct)


def relaxation_columns(problem: OfflineProblem) -> dict[tuple[int, int], tuple[int, float, float]]:
    """The relaxation's columns: (job, degree) -> (fewest workers, arrival, earliest end)."""
    groups: dict[tuple[int, int], tuple[int, float, float]] = {}
    for option in problem.options:
        key = (option.job, option.degree)
        width, start, end = groups.get(key, (math.inf, option.start_ms, math.inf))
        # capped candidates (offline module doc): the largest block, in every footprint
        workers = (max(len(b.servers) for b in option.placement.blocks) if problem.capped
                   else option.workers)
        groups[key] = (min(width, workers), start, min(end, option.end_ms))
    if problem.capped and problem.instance.model.preset == "ddls":
        _add_uncapped_degrees(problem, groups)
    return groups


def _relaxation_lp(problem: OfflineProblem, groups: dict, integral: bool
                   ) -> tuple[highspy.HighsLp, list[tuple[int, int]], int]:
    """The relaxation over ``groups`` (:func:`relaxation_columns`) as a HiGHS model: one column
    per (job, degree), at most one per job, the workers at every maximal instant that can
    bind; with the columns' keys and the number of jobs."""
    keys = list(groups)
    widths = np.array([groups[k][0] for k in keys], dtype=float)
    starts = np.array([groups[k][1] for k in keys])
    ends = np.array([groups[k][2] for k in keys])
    rows, cols, vals = [], [], []
    job_of = {}
    for col, (job, _) in enumerate(keys):
        row = job_of.setdefault(job, len(job_of))
        rows.append(row)
        cols.append(col)
        vals.append(1.0)
    upper = [1.0] * len(job_of)
    for active in maximal_cliques(list(zip(starts, ends))):
        if widths[active].sum() <= problem.instance.cluster.num_servers:
            continue  # cannot bind
        row = len(upper)
        rows += [row] * len(active)
        cols += active
        vals += widths[active].tolist()
        upper.append(float(problem.instance.cluster.num_servers))
    from scipy.sparse import csc_array  # here: 0.14 s of imports lp-online never needs

    matrix = csc_array((vals, (rows, cols)), shape=(len(upper), len(keys)))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = len(keys), len(upper)
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.col_cost_ = np.ones(len(keys))
    lp.col_lower_, lp.col_upper_ = np.zeros(len(keys)), np.ones(len(keys))
    lp.row_lower_, lp.row_upper_ = np.full(len(upper), -highspy.kHighsInf), np.array(upper)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_ = matrix.indptr, matrix.indices
    lp.a_matrix_.value_ = matrix.data
    if integral:
        lp.integrality_ = [highspy.HighsVarType.kInteger] * len(keys)
    return lp, keys, len(job_of)


def solve_relaxation(problem: OfflineProblem, time_limit: float | None = 10.0,
                     integral: bool = True) -> Relaxation:
    """Solve the worker-count relaxation (see the module doc and :func:`worker_count_bound`)."""
    groups = relaxation_columns(problem)
    if not groups:
        return Relaxation(bound=0, selection={})
    lp, keys, num_jobs = _relaxation_lp(problem, groups, integral)
    solver = highspy.Highs()
    solver.setOptionValue("output_flag", False)
    if time_limit is not None:
        solver.setOptionValue("time_limit", float(time_limit))
    solver.passModel(lp)
    stop = threading.Event()

    def interrupt(event) -> None:
        if stop.is_set():
            event.interrupt()

    # every phase: a stop asked during presolve or an LP solve must not wait for the MIP search
    for callbacks in (solver.cbSimplexInterrupt, solver.cbIpmInterrupt, solver.cbMipInterrupt):
        callbacks.subscribe(interrupt)
    with c_stdout_silenced():
        _, interrupted = run_stoppable(solver.run, stop.set)
    info = solver.getInfo()
    if integral:
        value = info.mip_dual_bound
    else:  # an LP stopped before its optimum has no valid bound
        optimal = solver.getModelStatus() == highspy.HighsModelStatus.kOptimal
        value = info.objective_function_value if optimal else math.inf
    if not math.isfinite(value):  # stopped before any bound: every job with a degree may run
        value = num_jobs
    selection = {}
    if integral and info.primal_solution_status == 2:  # 2: a feasible integer solution exists
        values = solver.getSolution().col_value
        selection = {keys[c][0]: keys[c][1] for c in range(len(keys)) if values[c] > 0.5}
    return Relaxation(bound=math.floor(value + 1e-6), selection=selection,
                      interrupted=interrupted)


@dataclass
class RelaxationSolve:
    """The worker-count relaxation solved as far as a time limit allows
    (:func:`solve_relaxation_fully`): ``lp``, its LP optimum (``inf`` if unsolved); ``dual``,
    the integer search's dual bound; ``best``, the jobs of its best integer selection
    (``selection``, job -> degree; 0 and empty when none was found); ``seconds`` both took;
    ``interrupted``: Ctrl-C stopped the search."""

    lp: float
    dual: float
    best: int
    selection: dict[int, int]
    seconds: float
    interrupted: bool = False

    @property
    def bound(self) -> int:
        """The proven bound on accepted jobs: the floor of the tighter of the two."""
        return math.floor(min(self.lp, self.dual) + 1e-6)

    @property
    def proven(self) -> bool:
        """Whether the relaxation's integer optimum is proven (its best selection meets the
        bound)."""
        return self.best == self.bound


def solve_relaxation_fully(problem: OfflineProblem, time_limit: float | None = None,
                           threads: int = 1, start: dict[int, int] | None = None
                           ) -> RelaxationSolve:
    """The worker-count relaxation's LP, then its integer optimum (or best dual bound) within
    ``time_limit`` seconds for both, on ``threads`` HiGHS threads, the search started from
    ``start`` (job -> degree), e.g. the degrees of a feasible schedule, which is a feasible
    point of the relaxation (module doc): so its best selection is never below that schedule.
    A job of ``start`` whose degree has no column is left out of the start. Unlike
    :func:`solve_relaxation` the gap is closed to the last job (relative gap 0)."""
    started = time.perf_counter()
    groups = relaxation_columns(problem)
    if not groups:
        return RelaxationSolve(lp=0.0, dual=0.0, best=0, selection={}, seconds=0.0)
    lp, keys, num_jobs = _relaxation_lp(problem, groups, integral=False)
    interrupted = False
    values: dict[str, float] = {}
    selection: dict[int, int] = {}
    for stage in ("lp", "mip"):
        solver = highspy.Highs()
        solver.setOptionValue("output_flag", False)
        solver.setOptionValue("threads", int(threads))
        solver.setOptionValue("mip_rel_gap", 0.0)
        if time_limit is not None:
            left = time_limit - (time.perf_counter() - started)
            solver.setOptionValue("time_limit", max(0.1, left))
        if stage == "mip":
            lp.integrality_ = [highspy.HighsVarType.kInteger] * len(keys)
        solver.passModel(lp)
        if stage == "mip" and start:
            column = {key: c for c, key in enumerate(keys)}
            point = np.zeros(len(keys))
            for job, degree in start.items():
                if (job, degree) in column:
                    point[column[job, degree]] = 1.0
            guess = highspy.HighsSolution()
            guess.col_value = point.tolist()
            solver.setSolution(guess)
        stop = threading.Event()

        def interrupt(event, stop=stop) -> None:
            if stop.is_set():
                event.interrupt()

        for callbacks in (solver.cbSimplexInterrupt, solver.cbIpmInterrupt,
                          solver.cbMipInterrupt):
            callbacks.subscribe(interrupt)
        with c_stdout_silenced():
            _, stopped = run_stoppable(solver.run, stop.set)
        interrupted |= stopped
        info = solver.getInfo()
        if stage == "lp":
            optimal = solver.getModelStatus() == highspy.HighsModelStatus.kOptimal
            values["lp"] = info.objective_function_value if optimal else math.inf
        else:
            values["mip"] = info.mip_dual_bound
            if info.primal_solution_status == 2:  # 2: a feasible integer solution exists
                col = solver.getSolution().col_value
                selection = {keys[c][0]: keys[c][1] for c in range(len(keys)) if col[c] > 0.5}
        if interrupted:
            break
    dual = values.get("mip", math.inf)
    if not math.isfinite(dual):  # stopped before any bound: every job with a degree may run
        dual = float(num_jobs)
    return RelaxationSolve(lp=values["lp"], dual=dual, best=len(selection), selection=selection,
                           seconds=time.perf_counter() - started, interrupted=interrupted)
