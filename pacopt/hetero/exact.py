"""Exact methods for the heterogeneous problem (:mod:`pacopt.hetero.model`).

All three solve the same model over the graph's linear (topological) order, so on every graph,
not only chains, their optima must agree; they share no code beyond the model's arrays except
that the DP and the MILP both price a stage with :func:`~pacopt.hetero.model.least_replicas`,
while CP-SAT writes the stage-time rows itself, so each checks the others.

- **DP** (:func:`solve_dp`): least cost of the first b positions whose last stage has type k,
  over the last stage's start and the type before it; exact, O(n^2 K^2), vectorised.
- **MILP** (:func:`solve_hetero_milp`): the path formulation, one binary column per possible
  stage; its matrix is totally unimodular, but it has O(n^2 K^2) columns, so it is solved by
  column generation in HiGHS, priced in numpy over all columns (:func:`stage_costs`), and the
  final master on the optimum's support in Pyomo + HiGHS.
- **CP-SAT** (:func:`solve_hetero_cpsat`): a compact formulation (per position and type: the
  type, the stage's replicas, the stage time accumulated with big-M resets), in integer ns and
  micro-dollars rounded against the plan.

Every method's answer is re-provisioned (least replicas per stage) and priced in floating point
by :func:`~pacopt.hetero.model.plan_from_types`; the solvers' proven bound is kept. The
recurrences and every row: ``docs/notes/hetero.md``; what was measured (why the MILP is not the
compact model): ``docs/experiments.md`` (Heterogeneous resources).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import highspy
import numpy as np

from pacopt.hetero.model import (
    REL_TOL,
    HeteroPlan,
    HeteroProblem,
    infeasible_plan,
    least_replicas,
    plan_from_types,
)
from pacopt.infra.interrupt import run_stoppable, stop_requested
from pacopt.infra.quiet import c_stdout_silenced

EXACT_METHODS = ("dp", "milp", "cpsat")
_NS = 1_000_000  # CP-SAT's time unit: ns per ms
NO_PLAN = "no type assignment meets the step budget with at most max_replicas replicas per stage"


# ----- dynamic programme ---------------------------------------------------------------------
def solve_dp(problem: HeteroProblem) -> HeteroPlan:
    """The optimum by dynamic programming over the linear order (``docs/notes/hetero.md``)."""
    started = time.perf_counter()
    n, K = problem.num_positions, problem.num_types
    prices = problem.types.prices
    zero = np.zeros((1, K))
    work = np.vstack([zero, np.cumsum(problem.work, axis=0)])     # prefix sums, (n+1, K)
    reduce = np.vstack([zero, np.cumsum(problem.allreduce, axis=0)])
    best = np.full((n + 1, K), np.inf)
    parent = np.zeros((n + 1, K, 2), dtype=np.int64)  # (a, k') of the last stage's start
    others = [np.array([j for j in range(K) if j != k]) for k in range(K)]
    T, rmax = problem.step_budget_ms, problem.max_replicas
    for b in range(1, n + 1):
        for k in range(K):
            # the first stage: positions 0..b-1, no inbound communication
            r0 = least_replicas(work[b, k], 0.0, 0.0, reduce[b, k], T, rmax)
            top, arg = (prices[k] * r0, (0, -1)) if r0 else (np.inf, (0, -1))
            if b > 1:
                a = np.arange(1, b)
                prev = others[k]
                r = least_replicas((work[b, k] - work[a, k])[:, None], problem.comm[a][:, prev, k],
                                   problem.latency[prev, k][None, :],
                                   (reduce[b, k] - reduce[a, k])[:, None], T, rmax)
                total = np.where(r > 0, best[a][:, prev] + prices[k] * r, np.inf)
                flat = int(np.argmin(total))
                if total.flat[flat] < top:
                    i, j = divmod(flat, len(prev))
                    top, arg = float(total.flat[flat]), (int(a[i]), int(prev[j]))
            best[b, k] = top
            parent[b, k] = arg
    seconds = time.perf_counter() - started
    k = int(np.argmin(best[n]))
    if not np.isfinite(best[n, k]):
        return infeasible_plan(problem, "dp", seconds, NO_PLAN)
    labels = np.empty(n, dtype=np.int64)
    b = n
    while b > 0:
        a, prev = parent[b, k]
        labels[a:b] = k
        b, k = int(a), int(prev)
    return plan_from_types(problem, labels, "dp", "optimal", seconds, bound_cost=float(best[n].min()),
                           gap=0.0)


# ----- the compact formulation (CP-SAT) ----------------------------------------------------------
@dataclass
class _Rows:
    """An integer linear model: variable bounds, rows ``lo <= sum c x <= hi``, costs."""

    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    rows: list[tuple[list[tuple[int, float]], float | None, float | None]] = field(
        default_factory=list)
    cost: dict[int, float] = field(default_factory=dict)

    def var(self, lo: float, hi: float) -> int:
        self.lower.append(lo)
        self.upper.append(hi)
        return len(self.lower) - 1

    def row(self, terms, lo=None, hi=None) -> None:
        self.rows.append(([(i, c) for i, c in terms if c != 0], lo, hi))


def _compact(problem: HeteroProblem) -> tuple[_Rows, list[list[int]]]:
    """The compact formulation (``docs/notes/hetero.md``), times in whole ns (costs rounded up, the
    budget down). Returns the rows and the ``y`` variable of each (position, type)."""
    n, K, rmax = problem.num_positions, problem.num_types, problem.max_replicas
    f = _Rows()
    budget = math.floor(problem.step_budget_ms * _NS * (1 + REL_TOL))

    def time_unit(ms: float) -> int:
        return math.ceil(ms * _NS - 1e-6)

    big = budget * rmax
    w = [[time_unit(problem.work[p, k]) for k in range(K)] for p in range(n)]
    a = [[time_unit(problem.allreduce[p, k]) for k in range(K)] for p in range(n)]
    lat = [[time_unit(problem.latency[i, k]) for k in range(K)] for i in range(K)]
    y = [[f.var(0, 1) for _ in range(K)] for _ in range(n)]
    z_by_type: list[list[int]] = [[] for _ in range(K)]
    acc_prev = r_prev = None
    for p in range(n):
        f.row([(y[p][k], 1) for k in range(K)], 1, 1)
        r = [f.var(0, rmax) for _ in range(K)]
        for k in range(K):
            f.row([(r[k], 1), (y[p][k], -1)], lo=0)                       # y <= R
            f.row([(r[k], 1), (y[p][k], -rmax)], hi=0)                    # R <= rmax y
            f.row([(r[k], budget - a[p][k]), (y[p][k], a[p][k] - w[p][k])], lo=0)  # the op fits
        # the op's w + (R - 1) a, linear in (y, R) because R[p,k] is 0 off type k
        work_terms = [(y[p][k], a[p][k] - w[p][k]) for k in range(K)] + \
                     [(r[k], -a[p][k]) for k in range(K)]
        acc = f.var(0, big)
        f.row([(acc, 1)] + [(r[k], -budget) for k in range(K)], hi=0)  # acc <= T R
        if p == 0:
            f.row([(acc, 1)] + work_terms, lo=0)
            for k in range(K):
                f.cost[r[k]] = float(problem.types.prices[k])
                z_by_type[k].append(r[k])
        else:
            s = [f.var(0, 1) for _ in range(K)]
            for k in range(K):
                f.row([(s[k], 1), (y[p][k], -1), (y[p - 1][k], 1)], lo=0)
                f.row([(s[k], 1), (y[p][k], -1)], hi=0)
                f.row([(s[k], 1), (y[p - 1][k], 1)], hi=1)
                f.row([(r[k], 1), (r_prev[k], -1), (s[k], -rmax)], hi=0)  # R changes only at a
                f.row([(r_prev[k], 1), (r[k], -1), (y[p][k], rmax)], hi=rmax)  # start or an end
                z = f.var(0, rmax)                                        # z >= the increase
                f.row([(z, 1), (r[k], -1), (r_prev[k], 1)], lo=0)
                f.cost[z] = float(problem.types.prices[k])
                z_by_type[k].append(z)
            f.row([(acc, 1), (acc_prev, -1)] + work_terms + [(v, big) for v in s], lo=0)
            lam = f.var(0, max(map(max, lat)) * rmax)
            inbound = []
            for k in range(K):
                for j in range(K):
                    if j == k:
                        continue
                    t = f.var(0, 1)
                    f.row([(t, 1), (y[p - 1][j], -1), (y[p][k], -1)], lo=-1)
                    inbound.append((t, -time_unit(problem.comm[p, j, k])))
                    if lat[j][k] > 0:  # lam >= L (R[p,k] - rmax (1 - y[p-1,j]))
                        f.row([(lam, 1), (r[k], -lat[j][k]), (y[p - 1][j], -lat[j][k] * rmax)],
                              lo=-lat[j][k] * rmax)
            f.row([(acc, 1), (lam, -1)] + work_terms + inbound, lo=0)
        acc_prev, r_prev = acc, r
    for k in range(K):  # the fluid cut: budget * replicas of type k >= its work
        f.row([(z, budget) for z in z_by_type[k]] + [(y[p][k], -w[p][k]) for p in range(n)], lo=0)
    return f, y


def _labels(y: list[list[int]], values) -> np.ndarray:
    return np.array([int(np.argmax([values[v] for v in row])) for row in y])


def stage_costs(problem: HeteroProblem) -> list[tuple[np.ndarray, np.ndarray]]:
    """The cost per hour (price x least replicas) of every possible stage, per end b = 1..n:
    ``(first, inner)`` with ``first[k]`` for the stage ``0..b-1`` of type k, and
    ``inner[a-1, k, j]`` for the stage ``a..b-1`` of type k after type j (a = 1..b-1); ``inf``
    where no replica count fits (and where j = k)."""
    n, K = problem.num_positions, problem.num_types
    zero = np.zeros((1, K))
    work = np.vstack([zero, np.cumsum(problem.work, axis=0)])
    reduce = np.vstack([zero, np.cumsum(problem.allreduce, axis=0)])
    T, rmax = problem.step_budget_ms, problem.max_replicas
    prices = problem.types.prices
    comm = problem.comm.transpose(0, 2, 1)           # [a, k, j]: into type k after type j
    latency = problem.latency.T[None, :, :]
    same = np.eye(K, dtype=bool)[None, :, :]
    out = []
    for b in range(1, n + 1):
        first = least_replicas(work[b], 0.0, 0.0, reduce[b], T, rmax)
        a = slice(1, b)
        inner = least_replicas((work[b] - work[a])[:, :, None], comm[a], latency,
                               (reduce[b] - reduce[a])[:, :, None], T, rmax)
        inner[np.broadcast_to(same, inner.shape)] = 0
        out.append((np.where(first > 0, prices * first, np.inf),
                    np.where(inner > 0, prices[None, :, None] * inner, np.inf)))
    return out


class _PathMaster:
    """The restricted path LP of the column generation, in HiGHS (``docs/notes/hetero.md``)."""

    def __init__(self, problem: HeteroProblem, threads: int | None):
        self.n, self.K = problem.num_positions, problem.num_types
        self.prices = problem.types.prices
        self.highs = highspy.Highs()
        self.highs.setOptionValue("output_flag", False)
        if threads is not None:
            self.highs.setOptionValue("threads", int(threads))
        rows = (self.n - 1) * self.K + 1               # node rows, then the source row
        self.source = rows - 1
        lower = np.zeros(rows)
        lower[self.source] = 1.0
        self.highs.addRows(rows, lower, lower.copy(), 0, np.zeros(rows, np.int32),
                           np.array([], np.int32), np.array([]))
        self.columns: list[tuple[int, int, int, int]] = []   # (a, b, k, j); j = -1 at a = 0
        self.costs: list[float] = []
        # an artificial unit of flow, dear enough never to stay in an optimum of a feasible model
        self.artificial_cost = 1e3 * (float(self.prices.max()) * problem.max_replicas * self.n + 1)
        self._add([(self.source, 1.0)], self.artificial_cost)

    def row(self, b: int, k: int) -> int | None:
        return (b - 1) * self.K + k if 0 < b < self.n else None

    def _add(self, entries, cost) -> None:
        index = np.array([i for i, _ in entries], dtype=np.int32)
        value = np.array([v for _, v in entries])
        self.highs.addCol(float(cost), 0.0, highspy.kHighsInf, len(index), index, value)

    def add(self, a: int, b: int, k: int, j: int, cost: float) -> None:
        entries = [(self.row(b, k), 1.0)] if b < self.n else []
        entries.append((self.row(a, j), -1.0) if a else (self.source, 1.0))
        self.costs.append(cost)
        self._add(entries, self.costs[-1])
        self.columns.append((a, b, k, j))

    def solve(self) -> tuple[np.ndarray, float, np.ndarray]:
        """Node duals ``[b, k]`` (0 for b = 0 and b = n), the source dual, and column values
        (the artificial column first, then :attr:`columns`)."""
        with c_stdout_silenced():
            self.highs.run()
        if self.highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"HiGHS: the path LP ended {self.highs.getModelStatus()}")
        solution = self.highs.getSolution()
        dual = np.asarray(solution.row_dual)
        nodes = np.zeros((self.n + 1, self.K))
        nodes[1:self.n] = dual[:self.source].reshape(self.n - 1, self.K)
        return nodes, float(dual[self.source]), np.asarray(solution.col_value)


def solve_hetero_milp(problem: HeteroProblem, time_limit: float | None = 60.0,
               threads: int | None = None) -> HeteroPlan:
    """The optimum by the path MILP, generated column by column (``docs/notes/hetero.md``)."""
    started = time.perf_counter()
    n, K = problem.num_positions, problem.num_types
    costs = stage_costs(problem)
    master = _PathMaster(problem, threads)
    for k in range(K):  # start from the single-type plans that fit
        if np.isfinite(costs[n - 1][0][k]):
            master.add(0, n, k, -1, float(costs[n - 1][0][k]))
    tolerance = 1e-7 * max(1.0, float(problem.types.prices.max()))
    rounds = 0
    while True:
        rounds += 1
        nodes, source, values = master.solve()
        added = 0
        for b in range(1, n + 1):
            # reduced cost of column (a, j) -> (b, k): cost - y[b,k] + y[a,j] (the first stage:
            # cost - y[b,k] - y_source); per k the least over a and j
            first, inner = costs[b - 1]
            reduced = (inner + nodes[1:b][:, None, :]).transpose(1, 0, 2).reshape(K, -1)
            best = reduced.argmin(axis=1) if b > 1 else np.zeros(K, dtype=np.int64)
            value = reduced[np.arange(K), best] if b > 1 else np.full(K, np.inf)
            for k in np.flatnonzero(np.minimum(value, first - source) - nodes[b] < -tolerance):
                if first[k] - source <= value[k]:
                    master.add(0, b, int(k), -1, float(first[k]))
                else:
                    a, j = divmod(int(best[k]), K)
                    master.add(a + 1, b, int(k), j, float(inner[a, k, j]))
                added += 1
        proven = not added
        if proven or stop_requested() or (time_limit is not None
                                          and time.perf_counter() - started > time_limit):
            break
    # Once proven, the restricted LP optimum is integral (the path matrix is totally unimodular
    # and HiGHS's simplex returns a vertex): the final binary master needs only its support.
    keep = [i for i, x in enumerate(values[1:]) if x > 1e-9] if proven else \
        list(range(len(master.columns)))
    chosen, objective = _integral_master(master, keep, None if proven else 0.0, threads)
    seconds = time.perf_counter() - started
    interrupted = stop_requested()
    note = f"{rounds} column-generation rounds, {len(master.columns)} stage columns"
    if chosen is None:
        if proven:
            return infeasible_plan(problem, "milp", seconds, NO_PLAN)
        return HeteroPlan(graph=problem.graph.name, method="milp", status="error",
                          step_budget_ms=problem.step_budget_ms, seconds=seconds,
                          note=f"no plan within the time limit ({note})",
                          interrupted=interrupted)
    labels = np.empty(n, dtype=np.int64)
    for a, b, k, _ in chosen:
        labels[a:b] = k
    plan = _finish(problem, labels, "milp", proven, objective if proven else None, seconds)
    plan.note, plan.interrupted = note, interrupted
    return plan


def _integral_master(master: _PathMaster, keep: list[int], time_limit: float | None,
                     threads: int | None):
    """Solve the restricted master on columns ``keep`` as a MILP in Pyomo + HiGHS (binary stage
    columns, no artificial one). Returns the chosen columns and the objective, or ``(None, None)`` if the columns hold no
    path. (With ``time_limit`` 0 after an unfinished generation, HiGHS still returns the path its
    presolve and first heuristics find, if any.)"""
    # imported here: Pyomo and OR-Tools cost a second of start-up to the dp and greedy methods
    import pyomo.environ as pyo
    from pyomo.contrib.solver.common.factory import SolverFactory
    from pyomo.contrib.solver.common.results import SolutionStatus
    from pyomo.core.expr import LinearExpression, MonomialTermExpression

    columns = master.columns
    into: dict[tuple[int, int], list[int]] = {}
    out_of: dict[tuple[int, int], list[int]] = {}
    for i in keep:
        a, b, k, j = columns[i]
        into.setdefault((b, k), []).append(i)
        out_of.setdefault((a, j), []).append(i)
    if (0, -1) not in out_of:  # no first stage at all: no path
        return None, None
    m = pyo.ConcreteModel(name="hetero-path")
    m.x = pyo.Var(keep, domain=pyo.Binary)
    # Expressions over prebuilt argument lists skip Pyomo's operator overloading (milp.py)
    m.source = pyo.Constraint(expr=(1, LinearExpression([m.x[i] for i in out_of[0, -1]]), 1))
    nodes = sorted(set(into) | set(out_of) - {(0, -1)})
    nodes = [v for v in nodes if v[0] < master.n]
    m.flow = pyo.Constraint(range(len(nodes)), rule=lambda _, r: (0, LinearExpression(
        [m.x[i] for i in into.get(nodes[r], [])] +
        [MonomialTermExpression((-1, m.x[i])) for i in out_of.get(nodes[r], [])]), 0))
    m.cost = pyo.Objective(expr=LinearExpression(
        [MonomialTermExpression((master.costs[i], m.x[i])) for i in keep]))
    options = {"load_solutions": False, "raise_exception_on_nonoptimal_result": False}
    if time_limit is not None:
        options["time_limit"] = max(1.0, time_limit)
    if threads is not None:
        options["threads"] = threads
    with c_stdout_silenced():
        result = SolverFactory("highs").solve(m, **options)
    if result.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
        return None, None
    result.solution_loader.load_vars()
    chosen = [columns[i] for i in keep if (m.x[i].value or 0) > 0.5]
    return chosen, float(result.incumbent_objective)


def solve_hetero_cpsat(problem: HeteroProblem, time_limit: float | None = 60.0,
                threads: int | None = None) -> HeteroPlan:
    """The optimum by the compact formulation in CP-SAT (times in whole ns, rounded against the
    plan: ``optimal`` is proven for that rounded model, which is the real one on data exact at
    1 ns and at most 1 ns per term stricter otherwise)."""
    from ortools.sat.python import cp_model

    started = time.perf_counter()
    f, y = _compact(problem)
    model = cp_model.CpModel()
    x = [model.new_int_var(int(lo), int(hi), f"v{i}") for i, (lo, hi) in
         enumerate(zip(f.lower, f.upper))]
    for terms, lo, hi in f.rows:
        model.add_linear_constraint(sum(int(c) * x[i] for i, c in terms),
                                    -cp_model.INT_MAX if lo is None else math.ceil(lo),
                                    cp_model.INT_MAX if hi is None else math.floor(hi))
    micro = {i: round(c * 1e6) for i, c in f.cost.items()}
    model.minimize(sum(c * x[i] for i, c in micro.items()))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = threads or 8
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = max(0.01, time_limit - (time.perf_counter() - started))
    solver.parameters.catch_sigint_signal = False  # run_stoppable's handler stops the search
    status, interrupted = run_stoppable(lambda: solver.solve(model), solver.stop_search)
    seconds = time.perf_counter() - started
    if status == cp_model.INFEASIBLE:
        return infeasible_plan(problem, "cpsat", seconds, NO_PLAN)
    if status == cp_model.MODEL_INVALID:
        raise RuntimeError(f"CP-SAT rejected the hetero model: {model.validate()}")
    bound = solver.best_objective_bound / 1e6
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return HeteroPlan(graph=problem.graph.name, method="cpsat", status="error",
                          step_budget_ms=problem.step_budget_ms, seconds=seconds,
                          note="no plan found within the time limit", interrupted=interrupted)
    values = [solver.value(v) for v in x]
    plan = _finish(problem, _labels(y, values), "cpsat", status == cp_model.OPTIMAL, bound,
                   seconds)
    plan.interrupted = interrupted
    return plan


def _finish(problem, labels, method, proven, bound, seconds) -> HeteroPlan:
    plan = plan_from_types(problem, labels, method, "optimal" if proven else "feasible", seconds)
    if plan.status == "infeasible":  # cannot happen for a solver's feasible point; keep it loud
        plan.status, plan.note = "error", f"the {method} plan re-evaluates as infeasible"
        return plan
    if bound is not None:
        plan.bound_cost = min(bound, plan.cost_per_hour)
        plan.gap = 0.0 if proven else (plan.cost_per_hour - plan.bound_cost) / max(
            plan.cost_per_hour, 1e-12)
    return plan
