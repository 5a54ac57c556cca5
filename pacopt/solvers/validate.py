"""The one independent validator every method's solution goes through before it is reported.

It trusts nothing but the instance: it re-derives each job's deadline, rebuilds each running job's
placement from its block labels (each must be a valid RAMP block of the op's split count), checks
that no worker holds two jobs at once and that every worker has the memory, re-times each
placement with the step simulator under the instance's preset, and checks deadlines, the horizon,
the blocking reasons and the summary numbers.

The re-timing is its own: the validator's JCT model (:func:`independent_model`) never reads the
on-disk timing cache nor the solver's in-memory one, so a poisoned cache can mislead a method
but never make its solution pass. On a large cluster part of it may run beside an online
episode, in a helper process with a model of its own (:mod:`pacopt.solvers.presimulate`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from functools import lru_cache
from itertools import pairwise

from pacopt.infra.errors import InputError
from pacopt.model.first_fit import Placement
from pacopt.model.instance import Instance
from pacopt.model.jct import JctModel
from pacopt.model.solution import REASONS, STATUSES, JobRecord, Solution
from pacopt.model.state import EPS_MS
from pacopt.solvers.registry import is_online

REL_TOL = 1e-6


class ValidationError(Exception):
    """A solution breaks the model; ``problems`` lists every violation found."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


@lru_cache(maxsize=8)
def independent_model(cluster, settings) -> JctModel:
    """The validator's JCT model for ``(cluster, settings)``: in memory only (``persist=False``:
    it neither reads nor writes the on-disk cache), one per process, so every timing it checks
    against was simulated here."""
    return JctModel(cluster, settings, persist=False)


def find_problems(instance: Instance, solution: Solution, model: JctModel | None = None,
                  steps: dict | None = None) -> list[str]:
    """Every way ``solution`` violates ``instance``; empty when it is feasible and consistent.

    ``model`` is accepted for compatibility and not used for timing: the JCTs are re-simulated
    by :func:`independent_model` (module doc). ``steps``: step timings the validator's helper
    simulated already (:class:`~pacopt.solvers.presimulate.Presimulation`), taken as its own."""
    model = independent_model(instance.cluster, instance.model)
    if steps:
        model.add_step_timings(steps)
    problems: list[str] = []
    if solution.preset != instance.model.preset:
        problems.append(f"solution preset '{solution.preset}' is not the instance's "
                        f"'{instance.model.preset}'")
    if solution.status not in STATUSES:
        problems.append(f"unknown status '{solution.status}'")
    expected = {job.id: job for job in instance.jobs}
    seen = [record.id for record in solution.jobs]
    if sorted(seen) != sorted(expected):
        missing = sorted(set(expected) - set(seen))[:3]
        extra = sorted(set(seen) - set(expected))[:3]
        problems.append(f"jobs differ from the instance's (missing {missing}, unknown {extra}, "
                        f"{len(seen)} records for {len(expected)} jobs)")
    busy: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for record in solution.jobs:
        job = expected.get(record.id)
        if job is not None:
            problems += _check_job(instance, model, record, job, busy)
    for server, spans in busy.items():
        spans.sort()
        for (s1, e1, a), (s2, _, b) in pairwise(spans):
            if s2 < e1 - EPS_MS:
                problems.append(f"worker {instance.cluster.server_name(server)} holds jobs '{a}' "
                                f"and '{b}' at once ({s2:g} < {e1:g} ms)")
    if solution.bound_accepted is not None and solution.bound_accepted < solution.accepted:
        problems.append(f"bound {solution.bound_accepted} is below the {solution.accepted} "
                        "accepted jobs")
    problems += _claim_problems(solution)
    return problems


def _claim_problems(solution: Solution) -> list[str]:
    """Where the status, bound and gap a solution claims contradict its jobs or its method."""
    out = []
    status, bound, accepted = solution.status, solution.bound_accepted, solution.accepted
    try:
        online = is_online(solution.method)
    except InputError:  # a policy of the caller's own (Python API): no kind to check
        online = False
    if online and status in STATUSES and status not in ("heuristic", "error"):
        out.append(f"method '{solution.method}' is an online policy: its status must be "
                   f"'heuristic', not '{status}'")
    if online and bound is not None:
        out.append(f"method '{solution.method}' is an online policy: it proves no bound")
    if status in ("optimal", "feasible") and bound is None:
        out.append(f"status '{status}' needs a bound_accepted")
    if status == "optimal" and bound not in (None, accepted):
        out.append(f"status 'optimal' but the bound {bound} differs from the {accepted} "
                   "accepted jobs")
    expected = None if bound is None else (bound - accepted) / max(bound, 1)
    if (solution.gap is None) != (expected is None) or (
            expected is not None and not math.isclose(solution.gap, expected, abs_tol=1e-9)):
        out.append(f"gap {solution.gap} should be {expected} (bound {bound}, {accepted} accepted)")
    return out


def summary_problems(data: dict, solution: Solution) -> list[str]:
    """Where a result file's summary keys (``accepted``, ``arrived``, ``blocking_rate``)
    contradict its own jobs (``solution`` is the file read back; it recomputes them)."""
    out = []
    for key, value in (("accepted", solution.accepted), ("arrived", solution.arrived),
                       ("blocking_rate", solution.blocking_rate)):
        if key not in data:
            out.append(f"summary key '{key}' is missing")
        elif (isinstance(data[key], bool) or not isinstance(data[key], (int, float))
              or not math.isclose(data[key], value, abs_tol=1e-9)):
            out.append(f"summary says {key} {data[key]!r}, its jobs give {value}")
    return out


def _check_job(instance: Instance, model: JctModel, record: JobRecord, job, busy) -> list[str]:
    where = f"job '{record.id}'"
    out: list[str] = []
    graph = instance.graphs[job.graph]
    deadline = instance.deadline_ms(job)
    horizon = instance.horizon_ms
    if record.graph != job.graph or not math.isclose(record.arrival_ms, job.arrival_ms):
        out.append(f"{where}: graph or arrival differ from the instance")
    if not math.isclose(record.deadline_ms, deadline, rel_tol=1e-9):
        out.append(f"{where}: deadline {record.deadline_ms} should be {deadline}")
    if record.accepted and record.reason is not None:
        out.append(f"{where}: accepted but carries reason '{record.reason}'")
    if not record.accepted and record.reason not in REASONS:
        out.append(f"{where}: blocked without a valid reason ({record.reason!r})")
    if record.reason == "rejected" and record.degree != 0:
        out.append(f"{where}: rejected but degree {record.degree}")
    if record.reason == "horizon" and horizon is None:
        out.append(f"{where}: blocked for the horizon, but the instance has none")
    late = horizon is not None and job.arrival_ms >= horizon
    if late and (record.accepted or record.reason != "horizon"):
        out.append(f"{where}: arrives at or after the horizon, so it must be blocked ('horizon')")
    holds = record.accepted or (record.reason == "horizon" and record.start_ms is not None)
    if not holds:
        return out
    if late:
        return out
    if record.start_ms is None or not math.isclose(record.start_ms, job.arrival_ms, abs_tol=EPS_MS):
        out.append(f"{where}: must start at its arrival {job.arrival_ms} (got {record.start_ms})")
        return out
    try:
        placement, counts = rebuild_placement(instance, model, graph, record.degree,
                                              record.blocks)
    except InputError as err:
        return out + [f"{where}: {err}"]
    names = sorted(instance.cluster.server_name(s) for s in placement.workers())
    if sorted(record.workers) != names:
        out.append(f"{where}: workers {sorted(record.workers)} are not the union of its blocks "
                   f"{names}")
    capacity = instance.cluster.worker_memory
    full = [] if placement.fits_memory(graph, capacity) else [
        s for s, used in placement.memory_use(graph).items() if used > capacity]
    if full:
        out.append(f"{where}: exceeds the memory of worker {instance.cluster.server_name(full[0])}")
    jct = model.timing(graph, counts, placement, instance.work_scale(job)).jct_ms
    if record.jct_ms is None or not math.isclose(record.jct_ms, jct, rel_tol=REL_TOL):
        out.append(f"{where}: reported JCT {record.jct_ms} ms, re-simulated {jct} ms")
    if record.accepted and jct > deadline:
        out.append(f"{where}: accepted but its JCT {jct:g} ms misses the deadline {deadline:g} ms")
    end = job.arrival_ms + jct
    if record.accepted and horizon is not None and end > horizon + EPS_MS:
        out.append(f"{where}: accepted but still running at the horizon ({end:g} ms)")
    if record.reason == "horizon" and horizon is not None and end <= horizon + EPS_MS:
        out.append(f"{where}: blocked for the horizon but finishes before it")
    stop = min(end, horizon) if horizon is not None else end
    for server in placement.workers():
        busy[server].append((job.arrival_ms, stop, record.id))
    return out


def rebuild_placement(instance: Instance, model: JctModel, graph, degree: int,
                      blocks: list[str]) -> tuple[Placement, tuple[int, ...]]:
    """Rebuild a record's placement from its degree and block labels; the split counts come
    from the degree through the partitioning rule (``model``'s, the validator's own, under the
    instance's settings). Anything malformed is an :class:`InputError`."""
    if not 1 <= degree <= instance.model.max_partitions_per_op:
        raise InputError(f"degree {degree} outside 1..{instance.model.max_partitions_per_op}")
    counts = model.counts(graph, degree)
    if len(blocks) != graph.num_ops:
        raise InputError(f"{len(blocks)} blocks for {graph.num_ops} ops")
    placed = tuple(instance.cluster.block_from_label(label, m) for label, m in zip(blocks, counts))
    return Placement(placed), counts


def validate(instance: Instance, solution: Solution, model: JctModel | None = None,
             steps: dict | None = None) -> Solution:
    """Mark ``solution`` validated, or raise :class:`ValidationError` listing every problem
    (``steps``: as :func:`find_problems`)."""
    problems = find_problems(instance, solution, model, steps)
    if problems:
        solution.validated = False
        raise ValidationError(problems)
    solution.validated = True
    return solution
