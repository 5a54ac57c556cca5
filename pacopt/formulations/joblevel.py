"""The job-level exact problem: per-op split counts and their blocks for one job, empty cluster.

Choose, for every forward op, a split count (its backward op gets the same) and, for every count
used, one RAMP block of that size: ops with equal counts share it, as the reference placer's
parent reuse does. Either minimise the model JCT using at most ``budget`` workers, or minimise
the workers whose model JCT meets ``deadline_ms``; ties are broken lexicographically (fewest
workers among the fastest plans, fastest plan among the smallest ones). Why: for one job, the
optimum bounds in the model what any degree rule placed by first-fit achieves within the same
workers, so it shows what per-op counts could gain over PAC-ML's single degree per job.

The model JCT (:func:`model_jct_ms`) sums compute, edge transfers, the join edge's collective
and the parameter syncs per training step: an upper-bound-style model of the simulator, so
:func:`optimise_job` re-simulates each plan and reports both numbers. One solver-independent
formulation (:func:`_formulate`) is solved by HiGHS through Pyomo (``milp``, microseconds per
step) or by CP-SAT (``cpsat``, integer nanoseconds rounded against the plan); deadline mode is a
search over budgets (:func:`_fewest_workers`).

The choices, the cost model, the formulation, its symmetry breaking and the solving are
described in ``docs/notes/joblevel.md``; what was measured, in ``docs/experiments.md`` (Job
level).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import cached_property
from itertools import product

import pyomo.environ as pyo
from ortools.sat.python import cp_model
from pyomo.contrib.solver.common.factory import SolverFactory
from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

from pacopt.infra.interrupt import run_stoppable, stop_requested
from pacopt.model.communication import all_reduce_seconds, one_to_one_seconds
from pacopt.model.first_fit import Placement
from pacopt.model.graph import JobGraph
from pacopt.model.jct import JctModel
from pacopt.model.partition import op_count
from pacopt.model.settings import ModelSettings
from pacopt.model.topology import Block, RampCluster

BACKENDS = ("milp", "cpsat")
# Memory rows count whole MB (shares rounded up, capacity down: never optimistic). Byte-sized
# coefficients (~1e10 next to 0/1 rows) made HiGHS declare a feasible model infeasible.
_MB = 1e6


@dataclass
class JobPlan:
    """The outcome of :func:`optimise_job`.

    ``counts``: split count per forward op; ``placement``: the block of each op (ops with equal
    counts share one); ``workers``: servers in the union of the blocks; ``model_jct_ms``: the
    module's JCT model for this plan; ``simulated_jct_ms``: :meth:`JctModel.timing` of it;
    ``status``: ``optimal`` (the solver proved both the objective and its tie-break), ``feasible``
    (a plan, not proven best), ``infeasible`` (proven: no counts meet the budget / deadline) or
    ``unknown`` (the time limit passed before any plan was found); ``seconds``: wall time of
    building and solving (not of the re-simulation); ``backend``: ``milp`` or ``cpsat``.
    Without a plan, ``counts`` is empty, ``placement`` None, ``workers`` 0 and the JCTs NaN.
    """

    counts: tuple[int, ...]
    placement: Placement | None
    workers: int
    model_jct_ms: float
    simulated_jct_ms: float
    status: str
    seconds: float
    backend: str


def optimise_job(graph: JobGraph, cluster: RampCluster, settings: ModelSettings, *,
                 budget: int | None = None, deadline_ms: float | None = None,
                 backend: str = "milp", time_limit: float | None = None) -> JobPlan:
    """Solve the job-level problem (``docs/notes/joblevel.md``) for ``graph`` on an empty
    ``cluster``.

    Give exactly one of ``budget`` (minimise the model JCT with at most that many workers) or
    ``deadline_ms`` (minimise the workers whose model JCT is at most the deadline). ``time_limit``
    (seconds) bounds building and solving, every solve of the deadline search included; the
    re-simulation of the plan comes on top. HiGHS's clock starts only once Pyomo has handed the
    model over, so the limit can be overshot by the time that hand-over takes.
    """
    if (budget is None) == (deadline_ms is None):
        raise ValueError("give exactly one of budget and deadline_ms")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)
                               or budget < 1):
        raise ValueError(f"budget must be an integer >= 1, got {budget!r}")
    if deadline_ms is not None and not deadline_ms > 0:
        raise ValueError(f"deadline_ms must be > 0, got {deadline_ms!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time_limit must be > 0 seconds, got {time_limit!r}")

    start = time.perf_counter()
    stop_at = None if time_limit is None else start + time_limit
    data = _JobData(graph, cluster, settings)
    lp = _formulate(data)
    step_cap = None if deadline_ms is None else deadline_ms / settings.training_steps
    solver = (_Milp if backend == "milp" else _CpSat)(lp, step_cap)
    if budget is not None:
        outcome = solver.solve(min(budget, cluster.num_servers), tie_break=True, stop_at=stop_at)
    else:
        outcome = _fewest_workers(solver, data, step_cap, stop_at)
    seconds = time.perf_counter() - start
    if outcome.values is None:
        return JobPlan(counts=(), placement=None, workers=0, model_jct_ms=math.nan,
                       simulated_jct_ms=math.nan, status=outcome.status, seconds=seconds,
                       backend=backend)
    counts, placement = lp.plan(outcome.values)
    simulated = JctModel(cluster, settings).timing(graph, counts, placement).jct_ms
    return JobPlan(counts=counts, placement=placement, workers=placement.num_workers,
                   model_jct_ms=data.jct_ms(counts, placement), simulated_jct_ms=simulated,
                   status=outcome.status, seconds=seconds, backend=backend)


def _fewest_workers(solver, data: _JobData, step_ms: float, stop_at: float | None) -> _Outcome:
    """Deadline mode as a search over budgets.

    The least model JCT within W workers, J(W), does not increase with W, so the answer is the
    smallest W with J(W) <= deadline: gallop up from a compute-only lower bound, then bisect.
    Each probe minimises the JCT within W workers under the deadline; the plan found at the
    smallest feasible W has exactly W workers (fewer would make a smaller W feasible) and is the
    fastest such plan, i.e. the lexicographic optimum. A direct minimise-workers model was tried
    first: its LP bound on workers is weak, and HiGHS left even easy cases open
    (``docs/experiments.md``).
    """
    n = data.cluster.num_servers
    low = data.fewest_workers_bound(step_ms)
    if low is None:  # compute alone misses the deadline with every op at its largest count
        return _Outcome("infeasible", None)
    probes: dict[int, _Outcome] = {}

    def feasible(w: int) -> bool:
        probes[w] = solver.solve(w, tie_break=False, stop_at=stop_at)
        return probes[w].values is not None

    def out_of_time() -> bool:
        return stop_requested() or (stop_at is not None and time.perf_counter() >= stop_at)

    bad, w, jump = low - 1, low, 1  # invariant: J(bad) > deadline (for low - 1, by the bound)
    while not feasible(w):
        bad = w
        if w == n or out_of_time():
            status = "infeasible" if w == n and probes[w].status == "infeasible" else "unknown"
            return _Outcome(status, None)
        w, jump = min(n, w + jump), 2 * jump
    good = w
    while good - bad > 1 and not out_of_time():
        mid = (bad + good) // 2
        if feasible(mid):
            good = mid
        else:
            bad = mid
    proven = (good - bad == 1 and probes[good].status == "optimal"
              and (bad < low or probes[bad].status == "infeasible"))
    return _Outcome("optimal" if proven else "feasible", probes[good].values)


def model_jct_ms(graph: JobGraph, cluster: RampCluster, settings: ModelSettings,
                 counts: tuple[int, ...], placement: Placement) -> float:
    """The module's JCT model (``docs/notes/joblevel.md``) of a plan: ``counts`` with one block
    per count."""
    return _JobData(graph, cluster, settings).jct_ms(counts, placement)


def allowed_counts(graph: JobGraph, cluster: RampCluster, settings: ModelSettings
                   ) -> list[tuple[int, ...]]:
    """Per forward op, the split counts the job-level problem may choose (ascending)."""
    top = settings.max_partitions_per_op
    sizes = cluster.placeable_sizes(top)
    return [tuple(m for m in sizes if m <= op_count(op.forward_ms, top, settings.quantum_ms))
            for op in graph.ops]


# ----- the cost model -----------------------------------------------------------------------------
class _JobData:
    """Options, shape classes and every cost of the model, in ms per training step."""

    def __init__(self, graph: JobGraph, cluster: RampCluster, settings: ModelSettings):
        self.graph, self.cluster, self.settings = graph, cluster, settings
        self.physical = settings.preset == "physical"
        self.options = allowed_counts(graph, cluster, settings)
        self.counts = sorted({m for opts in self.options for m in opts})
        # Shape classes of each count, in the cluster's search order; a class's blocks are
        # translates of each other, so every all-reduce cost is the same on all of them.
        self.classes: dict[int, list[tuple[Block, ...]]] = {}
        for m in self.counts:
            by_shape: dict[tuple, list[Block]] = {}
            for block in cluster.blocks(m):
                by_shape.setdefault(block.shape, []).append(block)
            self.classes[m] = [tuple(blocks) for blocks in by_shape.values()]
        # Data edges that move bytes: (u, v, act(u)).
        self.edges = [(u, v, graph.ops[u].activation_bytes) for u, v in graph.deps
                      if graph.ops[u].activation_bytes > 0]

    def comm_ms(self, seconds: float) -> float:
        return self.settings.comm_scale * seconds

    def collective_ms(self, nbytes: float, block: Block) -> float:
        return self.comm_ms(all_reduce_seconds(nbytes, set(block.servers), self.cluster,
                                               self.physical))

    def compute_ms(self, k: int, p: int) -> float:
        op = self.graph.ops[k]
        return (op.forward_ms + op.backward_ms) / p

    def shaped_op_ms(self, k: int, block: Block) -> float:
        """Sync pairs of op k on ``block`` (parallel: the slowest pair), plus its join edge."""
        p = len(block.servers)
        if p == 1:
            return 0.0
        op, total = self.graph.ops[k], 0.0
        if op.parameter_bytes > 0:
            total += max(self.comm_ms(all_reduce_seconds(2 * op.parameter_bytes / p, set(pair),
                                                         self.cluster, self.physical))
                         for pair in self._pair_types(block))
        if k == self.graph.join:
            total += self.collective_ms(op.activation_bytes, block)
        return total

    def edge_ms(self, nbytes: float, p: int, q: int, block: Block | None = None) -> float:
        """Forward plus gradient transfer of one edge; ``block`` (of count p) when p = q > 1."""
        if p == q == 1:
            return 0.0
        if p == q:
            return 2 * self.collective_ms(nbytes, block)
        return 2 * self.comm_ms(one_to_one_seconds(nbytes / (p * q), self.cluster))

    def _pair_types(self, block: Block) -> list[tuple[int, int]]:
        """One server pair of the block per pattern of (same group, same rack, same slot): the
        pair all-reduce depends on nothing else."""
        coords, seen = self.cluster.coords, {}
        for i, a in enumerate(block.servers):
            for b in block.servers[i + 1:]:
                key = tuple(x == y for x, y in zip(coords[a], coords[b]))
                seen.setdefault(key, (a, b))
        return list(seen.values())

    def step_ms(self, counts: tuple[int, ...], placement: Placement) -> float:
        """The model's step time of a plan."""
        block_of = {len(b.servers): b for b in placement.blocks}
        total = math.fsum(self.compute_ms(k, p) + self.shaped_op_ms(k, block_of[p])
                          for k, p in enumerate(counts))
        return total + math.fsum(self.edge_ms(a, counts[u], counts[v], block_of[counts[u]])
                                 for u, v, a in self.edges)

    def jct_ms(self, counts: tuple[int, ...], placement: Placement) -> float:
        return self.settings.training_steps * self.step_ms(counts, placement)

    def fewest_workers_bound(self, step_ms: float) -> int | None:
        """The smallest W whose compute term alone, every op at its largest count <= W (a block
        of count p needs p workers), fits ``step_ms``; None if no W does. Communication only
        adds, so no plan on fewer workers meets that step time."""
        for w in range(1, self.cluster.num_servers + 1):
            compute = math.fsum(self.compute_ms(k, max(p for p in opts if p <= w))
                                for k, opts in enumerate(self.options))
            if compute <= step_ms * (1 + 1e-12):
                return w
        return None

    @cached_property
    def symmetries(self) -> list[tuple[int, ...]]:
        """Non-identity axis reversals mapping each count's blocks onto blocks of the same shape,
        as server permutations (see ``docs/notes/joblevel.md``, symmetry breaking)."""
        cluster = self.cluster
        dims = cluster.dims
        found = []
        for flips in product((False, True), repeat=3):
            if not any(flips):
                continue
            perm = tuple(cluster.index(*(d - 1 - x if f else x
                                         for x, d, f in zip(cluster.coords[s], dims, flips)))
                         for s in range(cluster.num_servers))
            if all(self._maps_onto(blocks, perm)
                   for m in self.counts for blocks in self.classes[m]):
                found.append(perm)
        return found

    @staticmethod
    def _maps_onto(blocks: tuple[Block, ...], perm: tuple[int, ...]) -> bool:
        masks = {b.mask for b in blocks}
        return all(sum(1 << perm[s] for s in b.servers) in masks for b in blocks)


# ----- the formulation, solver-independent --------------------------------------------------------
@dataclass
class _Lp:
    """Rows ``lo <= sum(coef * var) <= hi`` with integer coefficients, integer variable bounds,
    and the two objectives: the step time (float ms per variable) and the worker count."""

    data: _JobData
    lower: list[int] = field(default_factory=list)
    upper: list[int] = field(default_factory=list)
    integral: list[bool] = field(default_factory=list)
    rows: list[tuple[list[tuple[int, int]], float | None, float | None]] = field(
        default_factory=list)
    step: dict[int, float] = field(default_factory=dict)
    workers: list[int] = field(default_factory=list)
    z: dict[tuple[int, int], int] = field(default_factory=dict)
    x: dict[tuple[int, int], int] = field(default_factory=dict)

    def var(self, integral: bool = True, upper: int = 1) -> int:
        self.lower.append(0)
        self.upper.append(upper)
        self.integral.append(integral)
        return len(self.lower) - 1

    def row(self, terms: list[tuple[int, int]], lo: float | None = None, hi: float | None = None):
        self.rows.append((terms, lo, hi))

    def cost(self, var: int, ms: float) -> None:
        if ms:
            self.step[var] = self.step.get(var, 0.0) + ms

    def plan(self, values: list[float]) -> tuple[tuple[int, ...], Placement]:
        """Counts and placement of a solution (values rounded: solvers return near-integers)."""
        data = self.data
        counts = tuple(next(p for p in opts if values[self.z[k, p]] > 0.5)
                       for k, opts in enumerate(data.options))
        block_of = {p: data.cluster.blocks(p)[i] for (p, i), var in self.x.items()
                    if values[var] > 0.5}
        return counts, Placement(tuple(block_of[p] for p in counts))


def _formulate(data: _JobData) -> _Lp:
    """Build the rows of the formulation (``docs/notes/joblevel.md``; the backends add the
    worker cap and the deadline)."""
    lp, cluster = _Lp(data), data.cluster
    n = cluster.num_servers
    used = [lp.var() for _ in range(n)]
    lp.workers = used
    for perm in data.symmetries:
        lp.row([(used[0], 1), (used[perm[0]], -1)], lo=0)

    # Blocks and shape classes; h[p][c] is the class indicator, covers[p][s] the blocks on s.
    h: dict[int, list[int]] = {}
    covers: dict[int, list[list[tuple[int, int]]]] = {}
    for p in data.counts:
        h[p] = []
        covers[p] = [[] for _ in range(n)]
        index = {b.mask: i for i, b in enumerate(cluster.blocks(p))}
        for blocks in data.classes[p]:
            cls = lp.var()
            h[p].append(cls)
            members = []
            for block in blocks:
                x = lp.x[p, index[block.mask]] = lp.var()
                members.append((x, 1))
                for s in block.servers:
                    covers[p][s].append((x, 1))
            lp.row(members + [(cls, -1)], lo=0, hi=0)
        lp.row([(c, 1) for c in h[p]], hi=1)
        for s in range(n):
            if covers[p][s]:
                lp.row([(used[s], 1)] + [(x, -1) for x, _ in covers[p][s]], lo=0)

    def by_class(p: int, source: int, costs: list[float]) -> None:
        """Charge ``costs[c]`` when indicator ``source`` is on and count p uses class c."""
        if len(costs) == 1:
            lp.cost(source, costs[0])
            return
        parts = [lp.var(integral=False) for _ in costs]
        lp.row([(g, 1) for g in parts] + [(source, -1)], lo=0, hi=0)
        for g, cls, ms in zip(parts, h[p], costs):
            lp.row([(g, 1), (cls, -1)], hi=0)
            lp.cost(g, ms)

    for k, opts in enumerate(data.options):
        for p in opts:
            z = lp.z[k, p] = lp.var()
            lp.row([(z, 1)] + [(c, -1) for c in h[p]], hi=0)
            lp.cost(z, data.compute_ms(k, p))
            if p > 1:
                by_class(p, z, [data.shaped_op_ms(k, blocks[0]) for blocks in data.classes[p]])
        lp.row([(lp.z[k, p], 1) for p in opts], lo=1, hi=1)

    for u, v, nbytes in data.edges:
        ou, ov = data.options[u], data.options[v]
        if len(ou) == 1 or len(ov) == 1:  # one end is fixed at count 1: linear in the other
            free, opts = (v, ov) if len(ou) == 1 else (u, ou)
            for p in opts:
                lp.cost(lp.z[free, p], data.edge_ms(nbytes, 1, p))
            continue
        w = {(p, q): lp.var(integral=False) for p in ou for q in ov}
        for p in ou:
            lp.row([(w[p, q], 1) for q in ov] + [(lp.z[u, p], -1)], lo=0, hi=0)
        for q in ov:
            lp.row([(w[p, q], 1) for p in ou] + [(lp.z[v, q], -1)], lo=0, hi=0)
        for (p, q), var in w.items():
            if p != q:
                lp.cost(var, data.edge_ms(nbytes, p, q))
            elif p > 1:
                by_class(p, var, [data.edge_ms(nbytes, p, p, blocks[0])
                                  for blocks in data.classes[p]])

    memory = [op.memory_bytes for op in data.graph.ops]
    if sum(memory) > cluster.worker_memory:  # otherwise no server can ever overflow
        for s in range(n):
            shares = []
            for p in data.counts:
                if not covers[p][s]:
                    continue
                load = [(lp.z[k, p], math.ceil(memory[k] / p / _MB))
                        for k, opts in enumerate(data.options) if p in opts and memory[k] > 0]
                top = sum(c for _, c in load)
                if not top:
                    continue
                share = lp.var(integral=False, upper=top)
                shares.append((share, 1))
                # share >= load - top * (1 - [the block of count p covers s])
                lp.row([(share, 1)] + [(z, -c) for z, c in load]
                       + [(x, -top) for x, _ in covers[p][s]], lo=-top)
            if shares:
                lp.row(shares, hi=math.floor(cluster.worker_memory / _MB))
    return lp


# ----- backends -----------------------------------------------------------------------------------
def _seconds_left(stop_at: float | None, share: float = 1.0) -> float | None:
    """A solver's time limit: ``share`` of what is left before ``stop_at`` (at least 10 ms)."""
    if stop_at is None:
        return None
    return max(share * (stop_at - time.perf_counter()), 0.01)


@dataclass
class _Outcome:
    status: str                  # optimal / feasible / infeasible / unknown
    values: list[float] | None   # one per variable, None without a solution
    objective: float | None = None  # the solver's objective value, in its own units


class _Milp:
    """The formulation in Pyomo, solved by HiGHS; step time in microseconds.

    The tie-break is a second solve, fewest workers with the JCT capped at the first optimum (a
    float weighting of the two would drown in HiGHS's tolerances).
    """

    PHASE_ONE_SHARE = 0.8  # of the time limit; the tie-break solve gets the rest

    def __init__(self, lp: _Lp, step_cap_ms: float | None):
        self.lp = lp
        self.solver = SolverFactory("highs")
        m = self.model = pyo.ConcreteModel()
        n = len(lp.lower)
        m.v = pyo.Var(range(n), bounds=lambda _, i: (lp.lower[i], lp.upper[i]),
                      within=lambda _, i: pyo.Binary if lp.integral[i] else pyo.Reals)
        m.rows = pyo.Constraint(range(len(lp.rows)), rule=lambda _, r: self._row(r))
        self.jct = pyo.quicksum(1000.0 * ms * m.v[i] for i, ms in lp.step.items())
        self.workers = pyo.quicksum(m.v[i] for i in lp.workers)
        self.largest_cost = 1000.0 * max(lp.step.values(), default=0.0)
        if step_cap_ms is not None:
            m.deadline = pyo.Constraint(expr=self.jct <= 1000.0 * step_cap_ms)

    def _row(self, r: int):
        terms, lo, hi = self.lp.rows[r]
        return (lo, pyo.quicksum(c * self.model.v[i] for i, c in terms), hi)

    def _replace(self, name: str, component) -> None:
        if hasattr(self.model, name):
            self.model.del_component(name)
        if component is not None:
            self.model.add_component(name, component)

    def solve(self, workers_cap: int, tie_break: bool, stop_at: float | None) -> _Outcome:
        """Least JCT within ``workers_cap`` workers; with ``tie_break``, then fewest workers."""
        self._replace("budget", pyo.Constraint(expr=self.workers <= workers_cap))
        self._replace("tie", None)
        share = self.PHASE_ONE_SHARE if tie_break else 1.0
        first = self._minimise(self.jct, _seconds_left(stop_at, share))
        if not tie_break or first.values is None:
            return first
        # Cap the JCT at its optimum, plus room for the solver's tolerances: a cap within 1e-6 of
        # a 1e5 coefficient made HiGHS's presolve declare the optimum itself infeasible.
        slack = 1e-3 + 1e-8 * max(abs(first.objective), self.largest_cost)
        self._replace("tie", pyo.Constraint(expr=self.jct <= first.objective + slack))
        second = self._minimise(self.workers, _seconds_left(stop_at))
        if second.values is None:
            return _Outcome("feasible", first.values)
        both = first.status == second.status == "optimal"
        return _Outcome("optimal" if both else "feasible", second.values)

    def _minimise(self, expr, time_limit: float | None) -> _Outcome:
        m = self.model
        self._replace("objective", pyo.Objective(expr=expr))
        options = {"rel_gap": 1e-9, "load_solutions": False,
                   "raise_exception_on_nonoptimal_result": False}
        if time_limit is not None:
            options["time_limit"] = time_limit
        result = self.solver.solve(m, **options)
        condition = result.termination_condition
        if condition in (TerminationCondition.provenInfeasible,
                         TerminationCondition.infeasibleOrUnbounded):
            return _Outcome("infeasible", None)
        if result.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
            return _Outcome("unknown", None)
        result.solution_loader.load_vars()
        values = [m.v[i].value or 0.0 for i in range(len(self.lp.lower))]
        proven = condition == TerminationCondition.convergenceCriteriaSatisfied
        return _Outcome("optimal" if proven else "feasible", values, result.incumbent_objective)


class _CpSat:
    """The formulation in OR-Tools CP-SAT; step time in integer nanoseconds, rounded up.

    The tie-break is exact in one solve: minimise ``jct * (servers + 1) + workers``.
    """

    NS_PER_MS = 1_000_000
    # CP-SAT's portfolio needs its LP-based and LNS workers to close these models quickly, so it
    # gets 8 whatever the core count (docs/experiments.md).
    WORKERS = 8

    def __init__(self, lp: _Lp, step_cap_ms: float | None):
        self.lp = lp
        self.step_ns = {i: self._ns(ms, math.ceil) for i, ms in lp.step.items()}
        self.step_cap = None if step_cap_ms is None else self._ns(step_cap_ms, math.floor)

    @classmethod
    def _ns(cls, ms: float, rounding) -> int:
        """Integer ns, rounded as asked but forgiving float noise: profile times have whole ns,
        and 0.05 ms must stay 50000 ns (not 50001) so that a plan exactly at a deadline, like
        the sequential plan at beta = 1, still meets it."""
        noise = 1e-6 if rounding is math.ceil else -1e-6
        return rounding(ms * cls.NS_PER_MS - noise)

    def solve(self, workers_cap: int, tie_break: bool, stop_at: float | None) -> _Outcome:
        """Least JCT within ``workers_cap`` workers; with ``tie_break``, then fewest workers.
        (Rebuilt per call: cheaper than editing the previous call's constraints.)"""
        lp = self.lp
        model = cp_model.CpModel()
        x = [model.new_int_var(lo, hi, f"v{i}") for i, (lo, hi) in enumerate(zip(lp.lower,
                                                                              lp.upper))]
        for terms, lo, hi in lp.rows:
            model.add_linear_constraint(sum(c * x[i] for i, c in terms),
                                        -cp_model.INT_MAX if lo is None else math.ceil(lo),
                                        cp_model.INT_MAX if hi is None else math.floor(hi))
        jct = sum(ns * x[i] for i, ns in self.step_ns.items())
        workers = sum(x[i] for i in lp.workers)
        model.add(workers <= workers_cap)
        if self.step_cap is not None:
            model.add(jct <= self.step_cap)
        model.minimize(jct * (len(lp.workers) + 1) + workers if tie_break else jct)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = self.WORKERS
        if stop_at is not None:
            solver.parameters.max_time_in_seconds = _seconds_left(stop_at)
        solver.parameters.catch_sigint_signal = False  # run_stoppable's handler stops it
        status, _ = run_stoppable(lambda: solver.solve(model), solver.stop_search)
        if status == cp_model.INFEASIBLE:
            return _Outcome("infeasible", None)
        if status == cp_model.MODEL_INVALID:
            raise RuntimeError(f"CP-SAT rejected the job-level model: {model.validate()}")
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return _Outcome("unknown", None)
        return _Outcome("optimal" if status == cp_model.OPTIMAL else "feasible",
                        [float(solver.value(v)) for v in x])
