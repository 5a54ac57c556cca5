"""The offline problem's data: every job's options and the conflicts between them.

All arrivals are known. Each job is rejected or gets one *option*: a degree, a footprint and a
concrete placement, run from its arrival for its JCT. No worker may serve two jobs at once, and
an accepted job must meet its deadline (and finish by the horizon, if the instance has one).

**The candidate set.** For a job at degree d with per-op split counts M, a footprint is a union
of one RAMP block per distinct count in M (ops with equal counts share their block), anywhere on
the cluster, not only where first-fit would put it. Only inclusion-minimal unions are kept.
Each op then sits on the block of its count, which gives the option's placement.

**Large clusters: capped candidates.** On a cluster cut into tiles
(:mod:`pacopt.model.tiles`: aligned copies of a small cluster, 4x4xS where 4 divides) the
candidates of a (job, degree) are at most :data:`CANDIDATE_CAP`: the footprints that lie inside
one tile, enumerated once on the tile, and of those ``CANDIDATE_CAP // tiles`` spread over the tile (disjoint ones
first, in best fit's order on an empty tile: :func:`_spread`), each in every tile;
``problem.capped`` says so. The search then optimises the capped problem, and its own bound
bounds only that. The bound reported is the worker-count relaxation's, built with each (job,
degree)'s width lower-bounded by its largest split count (a block that large is in every
footprint, capped or not) and with the degrees no tile holds but the cluster places, so that
in the ``ddls`` preset (one JCT per degree) it bounds the true problem; in ``physical`` its
JCTs are the capped candidates' shortest, and it bounds the capped problem only, so the bound
reported is :attr:`OfflineProblem.trivial_bound`. The argument below then holds for the true
problem, not for the capped one: the exact runner compares the result with the online
episodes and keeps the better.

**Why the optimum bounds online policies.** Every placement first-fit can produce, on any cluster
state, gives each op a block of its count, so its footprint contains one of these minimal
unions. Replace each accepted job of an online solution by a contained candidate: no worker
gains a job, and in the ``ddls`` preset the JCT is the same (one JCT per (graph, degree)). The
result is a feasible offline solution with the same accepted jobs, so the offline optimum is at
least the online count. Jobs an online policy runs past the horizon count as blocked there, and
the offline model simply rejects them. In the ``physical`` preset the JCT depends on the
placement, and an option's JCT is that of its compact placement. The bound then holds against
policies that place compactly, among them every policy under the ``best-fit`` and ``compact``
placers, whose placements *are* these options (:mod:`pacopt.model.placers`); a spread-out
first-fit placement can time differently.

**Conflicts.** Intervals on a line conflict exactly when one contains the other's start. So it is
enough to check each arrival instant, and only the maximal ones: an instant where nothing ends
before the next arrival is implied by that next one. At each kept instant, each server carries at
most one option (a clique constraint, tighter than pairwise conflicts; even so the LP accepts
almost every job fractionally on large episodes, see :mod:`pacopt.formulations.cpsat`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain

import numpy as np

from pacopt.infra.arrays import concatenated_ranges
from pacopt.infra.interrupt import OutOfTime, out_of_time
from pacopt.model.first_fit import Placement
from pacopt.model.instance import Instance
from pacopt.model.jct import JctModel
from pacopt.model.placers import (  # noqa: F401 (footprints re-exported)
    footprint_placements,
    footprints,
    free_block_score,
    mask_array,
)
from pacopt.model.sizes import option_budget, options_too_many
from pacopt.model.solution import JobRecord, Solution
from pacopt.model.state import EPS_MS
from pacopt.model.tiles import tiling
from pacopt.model.topology import RampCluster

#: Candidates per (job, degree) on a tiled cluster (module doc): enough for every tile to
#: offer its best-fitting footprints, few enough that a model of hundreds of jobs builds in
#: seconds.
CANDIDATE_CAP = 32

#: How backends report: ``progress(seconds, incumbent accepted, bound on accepted)``, either of
#: the last two ``None`` when unknown.
Progress = Callable[[float, int | None, int | None], None]


@dataclass(frozen=True)
class Option:
    """One way to run one job: index into ``instance.jobs``, degree, placement and timing."""

    job: int
    degree: int
    placement: Placement
    jct_ms: float
    comm_overhead_ms: float
    start_ms: float

    @property
    def end_ms(self) -> float:
        return self.start_ms + self.jct_ms

    @property
    def mask(self) -> int:
        return self.placement.mask

    @property
    def workers(self) -> int:
        return self.placement.num_workers

    @property
    def worker_ms(self) -> float:
        """Worker-time the option holds (the tie-break: less is better)."""
        return self.workers * self.jct_ms


@dataclass
class OfflineProblem:
    """Options of every job and the conflict rows between them.

    ``options``: flat list; ``by_job[j]``: indices of job j's options; ``rows``: option index
    lists, each a set of which at most one may be chosen (one server at one maximal instant);
    ``late``: jobs arriving at or after the horizon (never decided); ``required``: jobs that must
    be accepted (the decomposition's "place all of these" subproblem; exactly-one constraints
    propagate far better than at-most-one with an objective).
    """

    instance: Instance
    model: JctModel
    options: list[Option]
    by_job: list[list[int]]
    rows: list[list[int]]
    late: set[int] = field(default_factory=set)
    required: frozenset[int] = frozenset()
    capped: bool = False  # candidates of one tile only (module doc)

    @property
    def num_jobs(self) -> int:
        return len(self.by_job)

    @property
    def relaxation_bounds_all(self) -> bool:
        """Whether the worker-count relaxation bounds the true problem (module doc): always,
        but for capped candidates under ``physical``, where it bounds the capped problem only."""
        return not self.capped or self.instance.model.preset == "ddls"

    @cached_property
    def trivial_bound(self) -> int:
        """A bound on the true problem's accepted jobs without solving anything: the jobs with
        an option, or with capped candidates (which may lack a degree the cluster places) those
        :func:`decidable_jobs` counts."""
        if self.capped:
            return decidable_jobs(self.instance, self.model)
        return sum(1 for options in self.by_job if options)

    @cached_property
    def option_rows(self) -> list[list[int]]:
        """``option_rows[k]``: indices of the conflict rows holding option k."""
        out: list[list[int]] = [[] for _ in self.options]
        for r, row in enumerate(self.rows):
            for k in row:
                out[k].append(r)
        return out


def decidable_jobs(instance: Instance, model: JctModel) -> int:
    """The jobs some degree can run within their deadline (``ddls``: one JCT per degree;
    ``physical``: every job arriving before the horizon, as the JCT depends on the
    placement): a bound on every method's accepted jobs."""
    count = 0
    for job in instance.jobs:
        if instance.horizon_ms is not None and job.arrival_ms >= instance.horizon_ms:
            continue
        table = model.job_table(instance.graphs[job.graph], instance.work_scale(job))
        count += (instance.model.preset != "ddls"
                  or bool((table.jct_ms[table.placed] <= instance.deadline_ms(job)).any()))
    return count


def restrict(problem: OfflineProblem, jobs: set[int], required: set[int] = frozenset(),
             fixed: dict[int, int] | None = None) -> tuple[OfflineProblem, list[int]]:
    """The problem with only the options of ``jobs`` (job indices unchanged; those in
    ``required`` must be accepted), and for each of its options the index of the same option in
    ``problem``. Jobs in ``fixed`` (job -> option, included in ``jobs``) keep only that option."""
    fixed = fixed or {}
    original = sorted(k for j in jobs for k in ([fixed[j]] if j in fixed else problem.by_job[j]))
    new_index = {k: i for i, k in enumerate(original)}
    by_job: list[list[int]] = [[] for _ in problem.by_job]
    for i, k in enumerate(original):
        by_job[problem.options[k].job].append(i)
    rows = []
    for r in sorted({r for k in original for r in problem.option_rows[k]}):
        kept = [new_index[k] for k in problem.rows[r] if k in new_index]
        if len({problem.options[original[i]].job for i in kept}) >= 2:
            rows.append(kept)
    sub = OfflineProblem(instance=problem.instance, model=problem.model,
                         options=[problem.options[k] for k in original], by_job=by_job, rows=rows,
                         late=problem.late, required=frozenset(required),
                         capped=problem.capped)
    return sub, original


def build_problem(instance: Instance, model: JctModel | None = None,
                  stop_at: float | None = None) -> OfflineProblem:
    """Enumerate every job's options (deadline and horizon met) and the conflict rows; an
    :class:`~pacopt.infra.errors.InputError` when they would not fit in the memory available
    (:func:`~pacopt.model.sizes.option_budget`), :class:`~pacopt.infra.interrupt.OutOfTime`
    when ``stop_at`` (a ``time.perf_counter()`` value) passes or a stop is requested first."""
    model = model or JctModel(instance.cluster, instance.model)
    cluster, horizon = instance.cluster, instance.horizon_ms
    patterns: dict[tuple[str, int], list[tuple[Placement, float, float]]] = {}
    options: list[Option] = []
    by_job: list[list[int]] = []
    late: set[int] = set()
    budget = option_budget()  # what the memory available now takes (pacopt.model.sizes)
    for j, job in enumerate(instance.jobs):
        if len(options) > budget:
            raise options_too_many(len(options), j, len(instance.jobs))
        if out_of_time(stop_at):
            raise OutOfTime(f"building the offline problem at job {j} of {len(instance.jobs)}")
        by_job.append([])
        if horizon is not None and job.arrival_ms >= horizon:
            late.add(j)
            continue
        graph = instance.graphs[job.graph]
        table = model.table(graph)
        deadline = instance.deadline_ms(job)
        scale = instance.work_scale(job)  # a trace job's own amount of work scales its times
        for d in range(1, table.max_degree + 1):
            if not table.placed[d]:
                continue
            if (job.graph, d) not in patterns:
                patterns[job.graph, d] = pattern_options(graph, table.counts[d], model, cluster,
                                                         stop_at)
            for placement, jct, comm in patterns[job.graph, d]:
                if scale != 1.0:  # as JctModel.timing scales them
                    jct, comm = jct * scale, comm * scale
                if jct > deadline or (horizon is not None and job.arrival_ms + jct > horizon + EPS_MS):
                    continue
                by_job[j].append(len(options))
                options.append(Option(job=j, degree=d, placement=placement, jct_ms=jct,
                                      comm_overhead_ms=comm, start_ms=job.arrival_ms))
    return OfflineProblem(instance=instance, model=model, options=options, by_job=by_job,
                          rows=conflict_rows(options, stop_at), late=late,
                          capped=tiling(cluster) is not None)


def candidate_placements(graph, counts, cluster: RampCluster,
                         deadline: float | None = None) -> list[Placement]:
    """The candidate placements of ``graph`` at per-op ``counts``: every minimal footprint
    (:func:`~pacopt.model.placers.footprint_placements`, shared with the online best-fit
    placer), or on a tiled cluster those inside one tile, in every tile (module doc)."""
    tiles = tiling(cluster)
    if tiles is None:
        return footprint_placements(graph, counts, cluster, deadline)
    inside = footprint_placements(graph, counts, tiles.tile, deadline)
    if len(inside) > (keep := max(1, CANDIDATE_CAP // tiles.num_tiles)):
        inside = [inside[i] for i in _spread(inside, tiles.tile, keep)]
    return [tiles.placement(p, t) for t in range(tiles.num_tiles) for p in inside]


def _spread(placements: list[Placement], tile: RampCluster, keep: int) -> list[int]:
    """``keep`` of ``placements`` (their indices, in order): in best fit's order on an empty
    tile (the fewest weighted blocks broken first), those disjoint from every one taken before
    them first, as a buddy allocator packs a region, then the next best."""
    scorer = free_block_score(tile)
    broken = scorer.hits(mask_array((p.mask for p in placements), tile)) @ scorer.weights
    order = [int(i) for i in np.argsort(broken, kind="stable")]
    taken, used = [], 0
    for i in order:
        if len(taken) < keep and not placements[i].mask & used:
            taken.append(i)
            used |= placements[i].mask
    rest = [i for i in order if i not in set(taken)]
    return sorted(taken + rest[:keep - len(taken)])


def pattern_options(graph, counts, model: JctModel, cluster: RampCluster,
                    deadline: float | None = None):
    """(placement, JCT, exposed communication) of every candidate placement of ``graph`` at
    per-op ``counts`` (:func:`candidate_placements`)."""
    placements = candidate_placements(graph, counts, cluster, deadline)
    out = []
    for n in range(0, len(placements), 64):  # the steps of 64 at a time (JctModel.timings)
        if out_of_time(deadline):
            raise OutOfTime(f"timing the candidates of {graph.name}")
        batch = placements[n:n + 64]
        timings = model.timings(graph, [(counts, placement) for placement in batch])
        out += [(p, t.jct_ms, t.comm_overhead_ms) for p, t in zip(batch, timings)]
    return out


def maximal_cliques(intervals: list[tuple[float, float]]) -> list[list[int]]:
    """Indices of the intervals ``[start, end)`` running at each maximal arrival instant.

    An instant where everything running is still running at the next start is implied by that
    next instant and left out (an end within :data:`EPS_MS` of an instant counts as over).
    Each clique lists its intervals by start, then by index.
    """
    return [active.tolist() for active in _cliques(*_bounds(intervals))]


def _bounds(intervals: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """The intervals' starts and ends as two arrays."""
    return (np.array([iv[0] for iv in intervals], dtype=float),
            np.array([iv[1] for iv in intervals], dtype=float))


def _cliques(starts: np.ndarray, ends: np.ndarray):
    """:func:`maximal_cliques` as index arrays, one maximal instant at a time."""
    order = np.argsort(starts, kind="stable")
    ordered = starts[order]
    instants = np.unique(ordered)
    heads = np.searchsorted(ordered, instants, side="right")  # who has started by each
    active, head = order[:0], 0
    for i, t in enumerate(instants.tolist()):
        active = np.concatenate([active, order[head:heads[i]]])
        head = heads[i]
        active = active[ends[active] > t + EPS_MS]
        if i + 1 == len(instants) or (ends[active] <= instants[i + 1] + EPS_MS).any():
            yield active


def conflict_rows(options: list[Option], deadline: float | None = None) -> list[list[int]]:
    """One row per (maximal instant, server) holding options of at least two jobs
    (:class:`~pacopt.infra.interrupt.OutOfTime` past ``deadline``)."""
    return conflict_rows_of([(o.start_ms, o.end_ms) for o in options], [o.job for o in options],
                            [o.placement.workers() for o in options], deadline)


def conflict_rows_of(intervals: list[tuple[float, float]], jobs: list[int],
                     servers: list[tuple[int, ...]],
                     deadline: float | None = None) -> list[list[int]]:
    """:func:`conflict_rows` of columns given as their ``[start, end)`` intervals, jobs and
    servers (each column's ascending): :meth:`ColumnSet.conflict_rows`."""
    return ColumnSet(*_bounds(intervals), np.asarray(jobs, dtype=np.int64),
                     servers).conflict_rows(deadline=deadline)


class ColumnSet:
    """Columns as arrays: each one's ``[start, end)``, job and servers (held end to end, each
    column's ascending), for :meth:`conflict_rows` over all of them or over some."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, jobs: np.ndarray,
                 servers: list[tuple[int, ...]]):
        self.starts, self.ends, self.jobs = starts, ends, jobs
        self.sizes = np.fromiter(map(len, servers), dtype=np.int64, count=len(servers))
        self.held = np.fromiter(chain.from_iterable(servers), dtype=np.int64,
                                count=int(self.sizes.sum()))
        self.first = np.cumsum(self.sizes) - self.sizes  # where each column's servers begin

    def conflict_rows(self, members: np.ndarray | None = None,
                      deadline: float | None = None) -> list[list[int]]:
        """One row per (maximal instant, server) holding columns of at least two jobs, of the
        columns ``members`` (default all; rows name columns by their index in the set). Rows
        come by maximal instant, then by server; a row lists its columns as its clique does
        (by start, then index), and one that recurs (on another server or at a later instant)
        is kept once (:class:`~pacopt.infra.interrupt.OutOfTime` past ``deadline``)."""
        rows: list[list[int]] = []
        kept: set[tuple[int, ...]] = set()
        if members is None:
            members = np.arange(len(self.starts))
        for local in _cliques(self.starts[members], self.ends[members]):
            if out_of_time(deadline):
                raise OutOfTime("building the conflict rows")
            active = members[local]
            lengths = self.sizes[active]
            total = int(lengths.sum())
            if not total:
                continue
            # every (server, column) pair of the clique, by server, columns in clique order
            held = self.held[concatenated_ranges(self.first[active], lengths)]
            by_server = np.argsort(held, kind="stable")
            server, column = held[by_server], np.repeat(active, lengths)[by_server]
            bounds = np.flatnonzero(np.diff(server)) + 1
            begin = np.concatenate([[0], bounds])
            end = np.concatenate([bounds, [total]])
            owner = self.jobs[column]
            mixed = np.minimum.reduceat(owner, begin) != np.maximum.reduceat(owner, begin)
            for a, b in zip(begin[mixed].tolist(), end[mixed].tolist()):  # two jobs or more
                key = tuple(column[a:b].tolist())
                if key not in kept:
                    kept.add(key)
                    rows.append(list(key))
        return rows


def to_solution(problem: OfflineProblem, chosen: dict[int, int], *, method: str, status: str,
                bound_accepted: int | None, solve_seconds: float) -> Solution:
    """The result of choosing option ``chosen[j]`` for each accepted job j (others rejected)."""
    instance, cluster = problem.instance, problem.instance.cluster
    records = []
    for j, job in enumerate(instance.jobs):
        record = JobRecord(id=job.id, graph=job.graph, arrival_ms=job.arrival_ms,
                           max_jct_fraction=job.max_jct_fraction,
                           deadline_ms=instance.deadline_ms(job), accepted=False)
        if j in problem.late:
            record.reason = "horizon"
        elif j not in chosen:
            record.reason = "rejected"
        else:
            option = problem.options[chosen[j]]
            record.accepted = True
            record.degree = option.degree
            record.workers = [cluster.server_name(s) for s in option.placement.workers()]
            record.blocks = [block.label for block in option.placement.blocks]
            record.start_ms, record.jct_ms = option.start_ms, option.jct_ms
            record.comm_overhead_ms = option.comm_overhead_ms
        records.append(record)
    accepted = len(chosen)
    gap = None if bound_accepted is None else (bound_accepted - accepted) / max(bound_accepted, 1)
    return Solution(method=method, preset=instance.model.preset, status=status, jobs=records,
                    instance=instance.source, placement="offline",
                    bound_accepted=bound_accepted, gap=gap, solve_seconds=solve_seconds)


# ----- what every backend takes and returns, and the objective they share --------------------------
@dataclass
class ExactResult:
    """A backend's answer: ``chosen[j]`` = option index of each accepted job j.

    ``status``: ``optimal`` only when the solver's own bound proves that no solution accepts more
    jobs (``bound_accepted == len(chosen)``); ``feasible`` when a bound remains above the
    incumbent; ``infeasible`` / ``error`` otherwise. ``trace``: (seconds, incumbent accepted,
    bound on accepted) each time either improved. ``interrupted``: Ctrl-C stopped the search.
    """

    chosen: dict[int, int]
    status: str
    bound_accepted: int | None
    seconds: float
    trace: list[tuple[float, int | None, int | None]] = field(default_factory=list)
    interrupted: bool = False


@dataclass(frozen=True)
class Objective:
    """Maximise ``scale * accepted - sum(tiebreak)``: the integer tie-break (worker-time in
    worker-seconds, rounded up) sums to less than ``scale``, so it never trades away a job.

    ``coefficient[k]`` is option k's objective coefficient; :meth:`accepted_bound` turns a bound on
    the weighted objective into a bound on accepted jobs.
    """

    scale: int
    coefficient: tuple[int, ...]

    def accepted_bound(self, objective_bound: float) -> int:
        # accepted * scale - tiebreak <= bound, and 0 <= tiebreak < scale
        return int(-(-(objective_bound - 1e-6) // self.scale))


def objective(problem: OfflineProblem) -> Objective:
    """The shared weighted objective of the offline problem (see :class:`Objective`)."""
    tiebreak = [int(-(-o.worker_ms // 1000)) for o in problem.options]
    worst = sum(max((tiebreak[k] for k in ks), default=0) for ks in problem.by_job)
    scale = worst + 1
    return Objective(scale=scale, coefficient=tuple(scale - t for t in tiebreak))


# ----- choices: a set of options, one per accepted job ----------------------------------------------
def greedy_choice(problem: OfflineProblem, candidates: dict[int, list[int]]) -> dict[int, int]:
    """A feasible choice built greedily: jobs in arrival order, each taking the first of its
    ``candidates[j]`` (option indices, in order of preference) that conflicts with none taken so
    far, or nothing."""
    rows_of = problem.option_rows
    taken_rows: set[int] = set()
    chosen: dict[int, int] = {}
    for j in sorted(candidates):  # instance.jobs is sorted by arrival
        k = next((k for k in candidates[j] if taken_rows.isdisjoint(rows_of[k])), None)
        if k is not None:
            chosen[j] = k
            taken_rows.update(rows_of[k])
    return chosen


def check_choice(problem: OfflineProblem, chosen: dict[int, int]) -> None:
    """Raise :class:`AssertionError` unless ``chosen`` gives each job one of its own options and
    takes at most one option from every conflict row.

    Backends run it on every answer: a violation means a bug (in a model, its compilation or the
    mapping back from solver columns), never a property of the instance.
    """
    for j, k in chosen.items():
        if not 0 <= k < len(problem.options) or problem.options[k].job != j:
            raise AssertionError(f"option {k} chosen for job {j} is not one of its options")
    taken = set(chosen.values())
    for i, row in enumerate(problem.rows):
        clash = taken.intersection(row)
        if len(clash) > 1:
            raise AssertionError(f"conflict row {i} holds options {sorted(clash)} of jobs "
                                 f"{sorted(problem.options[k].job for k in clash)}")


def choice_value(problem: OfflineProblem, choice: dict[int, int]) -> tuple[int, float]:
    """What the exact methods maximise, comparable as a tuple: accepted jobs, then less
    worker-time."""
    return len(choice), -sum(problem.options[k].worker_ms for k in choice.values())
