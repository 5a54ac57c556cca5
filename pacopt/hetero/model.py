"""The job-level heterogeneous problem (pacopt's version of HeterPS): model, plans, validator.

HeterPS (Liu et al., arXiv 2111.10635) assigns each layer of a DNN to a resource type and
provisions resources so as to minimise monetary cost under a throughput requirement. Only its
abstract was at hand, so the model here is **pacopt's own design**; ``docs/notes/hetero.md``
gives it in full (every term, what is conservative, what is not modelled).

The ops are taken in the graph's topological order (:attr:`JobGraph.topological_order`); each
gets one type, and a **stage** is a maximal run of consecutive positions with one type. Stage s
(type k, after a stage of type k' unless it is the first) runs on r_s data-parallel replicas of
type k, each taking 1/r_s of the batch, and its time per training step, in ms, is::

    t_s(r) = (W_s + C_s) / r + L_s + (r - 1) / r * A_s

W_s: the ops' forward + backward time on type k; C_s: the activations crossing into the stage
and their gradients, over the k'-k link; L_s: that link's latency, both ways; A_s: the ring
all-reduce of the stage's gradients among its replicas; C_s = L_s = 0 for the first stage. The
job runs at ``1000 / max_s t_s`` steps/s, so a throughput of X steps/s is a step budget
T = 1000 / X ms (a deadline D ms for ``training_steps`` steps: T = D / training_steps). The
objective is the least cost per hour, sum_s price(k_s) * r_s, with t_s(r_s) <= T for every
stage; given the stages, each stage's least feasible r is in closed form
(:func:`least_replicas`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from pacopt.hetero.types import ResourceTypes, type_op_times
from pacopt.infra.errors import InputError
from pacopt.model.graph import JobGraph

#: Relative slack on the step budget when checking a stage (float noise, not a modelling margin).
REL_TOL = 1e-9
#: Result statuses, as for the cluster problems: ``optimal`` only when a solver proved it.
STATUSES = ("optimal", "feasible", "heuristic", "infeasible", "error")


@dataclass(frozen=True)
class HeteroProblem:
    """One job, the resource types and the step budget, precomputed over the linear order.

    Arrays are indexed by position p of ``order`` (not by op index) and type index k:
    ``work[p, k]`` ms, ``allreduce[p, k]`` ms (the op's share of A_s), ``cut[p]`` bytes entering
    position p, ``comm[p, k', k]`` ms (C_s of a stage of type k starting at p after type k'),
    ``latency[k', k]`` ms (L_s).
    """

    graph: JobGraph
    types: ResourceTypes
    step_budget_ms: float
    training_steps: int
    order: tuple[int, ...]
    work: np.ndarray
    allreduce: np.ndarray
    cut: np.ndarray
    comm: np.ndarray
    latency: np.ndarray
    times_from: str

    @property
    def num_positions(self) -> int:
        return len(self.order)

    @property
    def num_types(self) -> int:
        return len(self.types.names)

    @property
    def max_replicas(self) -> int:
        return self.types.max_replicas

    @property
    def throughput(self) -> float:
        """The required steps per second."""
        return 1000.0 / self.step_budget_ms


def step_budget(throughput: float | None = None, deadline_ms: float | None = None,
                training_steps: int = 50) -> float:
    """The step budget T (ms) from a throughput (steps/s) or a deadline for ``training_steps``."""
    if (throughput is None) == (deadline_ms is None):
        raise InputError("give exactly one of throughput or deadline_ms")
    if training_steps < 1:
        raise InputError(f"training_steps: must be >= 1, got {training_steps}")
    value, name = (throughput, "throughput") if throughput is not None else (deadline_ms,
                                                                             "deadline_ms")
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise InputError(f"{name}: must be a number > 0, got {value!r}")
    return 1000.0 / throughput if throughput is not None else deadline_ms / training_steps


def cut_bytes(graph: JobGraph, order: tuple[int, ...]) -> np.ndarray:
    """Bytes entering each position of ``order``: the activations of earlier ops still consumed
    at or after it (an op's output is sent once however many later consumers it has)."""
    pos = {op: p for p, op in enumerate(order)}
    last_use = [max((pos[v] for v in graph.successors[u]), default=-1) for u in range(graph.num_ops)]
    delta = np.zeros(len(order) + 1)
    for u in range(graph.num_ops):
        if last_use[u] > pos[u]:  # live on the boundaries pos[u]+1 .. last_use
            delta[pos[u] + 1] += graph.ops[u].activation_bytes
            delta[last_use[u] + 1] -= graph.ops[u].activation_bytes
    cut = np.cumsum(delta)[:-1]
    cut[0] = 0.0
    return cut


def build_hetero_problem(graph: JobGraph, types: ResourceTypes, step_budget_ms: float,
                  training_steps: int = 50) -> HeteroProblem:
    """Precompute the arrays of the model (module docstring) for ``graph`` on ``types``."""
    order = graph.topological_order
    times, times_from = type_op_times(graph, types)
    names = types.names
    self_bw = np.array([types.link(k, k).bandwidth for k in names])
    params = np.array([graph.ops[i].parameter_bytes for i in order])
    pair_bw = np.array([[types.link(a, b).bandwidth for b in names] for a in names])
    latency = np.array([[2e3 * types.link(a, b).latency for b in names] for a in names])
    cut = cut_bytes(graph, order)
    return HeteroProblem(
        graph=graph, types=types, step_budget_ms=float(step_budget_ms),
        training_steps=training_steps, order=order, work=times[list(order)],
        allreduce=2e3 * params[:, None] / self_bw[None, :], cut=cut,
        comm=2e3 * cut[:, None, None] / pair_bw[None, :, :], latency=latency,
        times_from=times_from)


# ----- one stage -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class StageTerms:
    """The terms of t_s(r) for one stage (ms): compute W, input communication C and latency L,
    all-reduce A."""

    compute_ms: float
    comm_ms: float
    latency_ms: float
    allreduce_ms: float

    def time_ms(self, replicas: int) -> float:
        """t_s(r) of the module docstring."""
        r = replicas
        return (self.compute_ms + self.comm_ms) / r + self.latency_ms + (r - 1) / r * self.allreduce_ms


def stage_terms(problem: HeteroProblem, first: int, end: int, k: int, prev: int | None) -> StageTerms:
    """Terms of the stage on positions ``first..end-1`` of type ``k`` after a stage of ``prev``."""
    inbound = prev is not None and first > 0
    return StageTerms(
        compute_ms=float(math.fsum(problem.work[first:end, k])),
        comm_ms=float(problem.comm[first, prev, k]) if inbound else 0.0,
        latency_ms=float(problem.latency[prev, k]) if inbound else 0.0,
        allreduce_ms=float(math.fsum(problem.allreduce[first:end, k])))


def least_replicas(compute, comm, latency, allreduce, budget: float, max_replicas: int):
    """The least r with t_s(r) <= budget (closed form, numpy-vectorised), or 0 where none
    <= ``max_replicas`` exists."""
    compute, comm, latency, allreduce = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (compute, comm, latency, allreduce)))
    limit = budget * (1 + REL_TOL)
    need = compute + comm - allreduce
    room = limit - latency - allreduce
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(room > 0, np.ceil(need / np.where(room > 0, room, 1.0) - 1e-12), np.inf)
    r = np.where(compute + comm + latency <= limit, 1.0, np.maximum(r, 2.0))
    return np.where(r <= max_replicas, r, 0).astype(np.int64)


# ----- plans ------------------------------------------------------------------------------------
@dataclass
class Stage:
    """One pipeline stage of a plan: positions ``first..last`` of the linear order."""

    type: str
    first: int
    last: int
    replicas: int
    compute_ms: float
    comm_ms: float
    latency_ms: float
    allreduce_ms: float
    time_ms: float


@dataclass
class HeteroPlan:
    """What every method returns. ``assignment`` is a type name per op (by op id); ``stages``
    follow the linear order. ``bound_cost`` and ``gap`` only for exact methods."""

    graph: str
    method: str
    status: str
    step_budget_ms: float
    cost_per_hour: float | None = None
    job_cost: float | None = None
    step_ms: float | None = None
    assignment: dict[str, str] = field(default_factory=dict)
    stages: list[Stage] = field(default_factory=list)
    bound_cost: float | None = None
    gap: float | None = None
    seconds: float = 0.0
    validated: bool = False
    times_from: str = ""
    note: str = ""
    interrupted: bool = False  # Ctrl-C stopped the method: the plan is its best so far

    @property
    def steps_per_s(self) -> float | None:
        return None if not self.step_ms else 1000.0 / self.step_ms

    def to_dict(self) -> dict:
        """A JSON-ready dict (stages as objects, the achieved steps/s included)."""
        return {**asdict(self), "throughput_required": 1000.0 / self.step_budget_ms,
                "steps_per_s": self.steps_per_s}


def stage_runs(labels) -> list[tuple[int, int]]:
    """Maximal runs of equal labels: ``(first, end)`` position pairs."""
    runs, first = [], 0
    for p in range(1, len(labels) + 1):
        if p == len(labels) or labels[p] != labels[first]:
            runs.append((first, p))
            first = p
    return runs


def plan_from_types(problem: HeteroProblem, type_of_position, method: str, status: str,
                    seconds: float = 0.0, **extra) -> HeteroPlan:
    """The plan of a type per position (indices), each stage with its least replicas; an
    ``infeasible`` plan if some stage cannot meet the budget with ``max_replicas``."""
    labels = [int(k) for k in type_of_position]
    names = problem.types.names
    plan = HeteroPlan(graph=problem.graph.name, method=method, status=status,
                      step_budget_ms=problem.step_budget_ms, seconds=seconds,
                      times_from=problem.times_from, **extra)
    plan.assignment = {problem.graph.ops[op].id: names[k] for op, k in zip(problem.order, labels)}
    prev = None
    for first, end in stage_runs(labels):
        k = labels[first]
        terms = stage_terms(problem, first, end, k, prev)
        r = int(least_replicas(terms.compute_ms, terms.comm_ms, terms.latency_ms,
                               terms.allreduce_ms, problem.step_budget_ms, problem.max_replicas))
        if r == 0:
            return HeteroPlan(graph=plan.graph, method=method, status="infeasible",
                              step_budget_ms=problem.step_budget_ms, seconds=seconds,
                              times_from=problem.times_from,
                              note=f"a {names[k]} stage at positions {first}..{end - 1} cannot "
                                   f"meet the step budget with {problem.max_replicas} replicas")
        plan.stages.append(Stage(type=names[k], first=first, last=end - 1, replicas=r,
                                 time_ms=terms.time_ms(r), **asdict(terms)))
        prev = k
    _price(problem, plan)
    return plan


def infeasible_plan(problem: HeteroProblem, method: str, seconds: float, note: str) -> HeteroPlan:
    """The answer when no assignment meets the step budget."""
    return HeteroPlan(graph=problem.graph.name, method=method, status="infeasible",
                      step_budget_ms=problem.step_budget_ms, seconds=seconds,
                      times_from=problem.times_from, note=note)


def _price(problem: HeteroProblem, plan: HeteroPlan) -> None:
    prices = dict(zip(problem.types.names, problem.types.prices))
    plan.cost_per_hour = float(math.fsum(prices[s.type] * s.replicas for s in plan.stages))
    plan.step_ms = max(s.time_ms for s in plan.stages)
    plan.job_cost = plan.cost_per_hour * problem.training_steps * plan.step_ms / 3.6e6


# ----- the validator --------------------------------------------------------------------------------
def plan_problems(problem: HeteroProblem, plan: HeteroPlan) -> list[str]:
    """Everything wrong with ``plan``, re-derived from the model alone (empty if valid): every op
    has a known type, stages are the maximal runs of the linear order, replicas are within
    bounds, every stage time (recomputed) meets the budget, and the cost and step time match."""
    if plan.status == "infeasible":
        return [] if not plan.stages else ["an infeasible plan has stages"]
    if plan.status not in STATUSES or plan.status == "error":
        return [f"status '{plan.status}' is not a solved status"]
    names = problem.types.names
    ops = problem.graph.ops
    out = []
    labels = []
    for op in problem.order:
        name = plan.assignment.get(ops[op].id)
        if name not in names:
            return [f"op '{ops[op].id}' has no known type (got {name!r})"]
        labels.append(names.index(name))
    runs = stage_runs(labels)
    if [(s.first, s.last + 1, s.type) for s in plan.stages] != \
            [(a, b, names[labels[a]]) for a, b in runs]:
        return ["the stages are not the maximal runs of one type along the linear order"]
    limit = problem.step_budget_ms * (1 + REL_TOL)
    times, prices = [], dict(zip(names, problem.types.prices))
    for i, s in enumerate(plan.stages):
        if not (isinstance(s.replicas, int) and 1 <= s.replicas <= problem.max_replicas):
            out.append(f"stage {i}: replicas {s.replicas!r} not in 1..{problem.max_replicas}")
            continue
        k = labels[s.first]
        prev = labels[s.first - 1] if s.first else None
        t = stage_terms(problem, s.first, s.last + 1, k, prev).time_ms(s.replicas)
        times.append(t)
        if t > limit:
            out.append(f"stage {i} ({s.type}): {t:.6g} ms per step exceeds the budget "
                       f"{problem.step_budget_ms:.6g} ms")
        if not math.isclose(t, s.time_ms, rel_tol=1e-9, abs_tol=1e-12):
            out.append(f"stage {i}: reported time {s.time_ms} ms, recomputed {t} ms")
    if out:
        return out
    cost = math.fsum(prices[s.type] * s.replicas for s in plan.stages)
    if plan.cost_per_hour is None or not math.isclose(cost, plan.cost_per_hour, rel_tol=1e-9,
                                                      abs_tol=1e-9):
        out.append(f"reported cost {plan.cost_per_hour} per hour, recomputed {cost}")
    if plan.step_ms is None or not math.isclose(max(times), plan.step_ms, rel_tol=1e-9):
        out.append(f"reported step {plan.step_ms} ms, recomputed {max(times)} ms")
    if plan.bound_cost is not None and plan.bound_cost > cost * (1 + 1e-6) + 1e-9:
        out.append(f"bound {plan.bound_cost} exceeds the plan's cost {cost}")
    return out
