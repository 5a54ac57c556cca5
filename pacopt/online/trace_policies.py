"""Two online policies for replayed traces: ``as-requested`` and ``elasticflow``.

``as-requested`` runs every job at the degree its user asked for (the trace's GPUs, capped at what
the cluster can give the graph: :func:`pacopt.model.trace.requested_degree`), what the real
cluster did; the natural baseline of a trace. A job that cannot be placed at that degree now, or
whose deadline that degree misses, is blocked (``no_placement``, ``deadline``): pacopt has no
queue.

``elasticflow`` is ElasticFlow's scheduler (Gu et al., ASPLOS'23: its abstract, and its public
simulator ``pkusys/ElasticFlow``, ``ef_sim_allocation`` and ``allocate_free_gpus``) adapted to
pacopt's jobs. ElasticFlow's jobs are elastic: their GPU count may change at every scheduling
event, and a job admitted now may be scaled down later to make room. Its two steps:

1. *admission control*: order the admitted jobs and the new one by deadline and give each its
   **minimum satisfactory share**, the fewest GPUs (in buddy levels, powers of two) over time with
   which it still meets its deadline given what earlier-deadline jobs hold; admit the new job
   only if every job still gets one;
2. *resource allocation*: give the GPUs still idle, one level at a time, to the job whose
   **marginal return** (the time saved per extra GPU, which diminishes as a job grows) is the
   largest, while any job can use them (work-conserving).

pacopt's jobs are not elastic (degree and workers fixed at arrival, start then or never), so the
admitted jobs are the running ones, the new job's minimum satisfactory share is the smallest
buddy level whose JCT, placed now, meets its deadline (none: rejected), and the spare workers go
to the new job only, one level at a time while its JCT falls. ``docs/traces.md`` states the
adaptation step by step and measures it against the share alone.

The policy reads only the arriving job (its graph's table, deadline, requested degree) and the
live cluster (the running jobs' workers): never a job still to come.
"""

from __future__ import annotations

from pacopt.infra.errors import InputError
from pacopt.model.decision import Decision
from pacopt.model.state import EPS_MS

TRACE_POLICIES = ("as-requested", "elasticflow")


def buddy_levels(max_degree: int) -> tuple[int, ...]:
    """ElasticFlow's GPU levels (powers of two) up to ``max_degree``, ascending."""
    levels, d = [], 1
    while d <= max_degree:
        levels.append(d)
        d *= 2
    return tuple(levels)


class AsRequested:
    """Each job at the degree its user requested (a trace's GPUs, capped to the cluster): what
    the real cluster did, the natural baseline of a trace."""

    name = "as-requested"

    def reset(self, seed: int | None) -> None:
        """Deterministic: no state."""

    def choose(self, decision: Decision) -> int:
        if decision.requested_degree is None:
            raise InputError(f"as-requested: job '{decision.job_id}' has no requested_degree "
                             "(it is given by trace workloads, or per explicit job)")
        return min(decision.requested_degree, decision.max_degree)


class ElasticFlow:
    """ElasticFlow's admission control (the minimum satisfactory share must fit alongside the
    running jobs) and its greedy allocation of idle workers by marginal return, adapted to
    pacopt's non-elastic jobs (module doc)."""

    name = "elasticflow"

    def reset(self, seed: int | None) -> None:
        """Deterministic: no state."""

    def choose(self, decision: Decision) -> int:
        return elasticflow_degree(decision)


def elasticflow_degree(decision: Decision, spare: bool = True) -> int:
    """The degree :class:`ElasticFlow` gives the arriving job: its minimum satisfactory share
    (the smallest buddy level placeable now whose JCT meets the deadline and the horizon; 0 if
    none: declined), then, with ``spare``, one level up at a time while the next level is
    placeable now and shortens the JCT."""
    options = decision.options()
    limit = min(decision.deadline_ms, decision.remaining_ms + EPS_MS)
    levels = [d for d in buddy_levels(decision.max_degree) if options.placeable[d]]
    fitting = [d for d in levels if options.jct_ms[d] <= limit]
    if not fitting:
        return 0
    degree = fitting[0]
    if spare:
        for level in levels:
            if level > degree and options.jct_ms[level] < options.jct_ms[degree]:
                degree = level
            elif level > degree:
                break
    return degree


def make_trace_policy(method: str, instance=None, checkpoint=None):
    """The registry's factory of ``as-requested`` and ``elasticflow`` (see
    :mod:`pacopt.solvers.registry`). ``as-requested`` needs every job's requested degree: an
    instance whose jobs lack one is an :class:`InputError` here, before the episode starts."""
    if checkpoint is not None:
        raise InputError(f"--checkpoint applies to the learned method only, not '{method}'")
    if method == "elasticflow":
        return ElasticFlow()
    if method != "as-requested":
        raise InputError(f"unknown trace policy '{method}'; known: {', '.join(TRACE_POLICIES)}")
    if instance is not None:
        missing = next((job.id for job in instance.jobs if job.requested_degree is None), None)
        if missing is not None:
            raise InputError(f"as-requested: job '{missing}' has no requested_degree; the method "
                             "replays trace workloads (workload.trace), whose jobs carry the "
                             "GPUs their users asked for")
    return AsRequested()
