"""The online simulator: jobs arrive, a policy picks each one's degree, first-fit places it on the
live cluster, and it runs to completion on its own workers.

Event order at an arrival: every job finishing by then (within 1e-7 ms, as the reference) frees
its workers first; then the arriving job is decided. A decided job is blocked with a reason:
``rejected`` (degree 0), ``no_placement`` (first-fit found no room now), ``deadline`` (its JCT
exceeds beta x its sequential JCT, strictly), or ``horizon`` (it arrives at or after the horizon,
or would still be running there; such a job still holds its workers until the horizon, as in the
reference).
"""

from __future__ import annotations

import heapq
import time
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from pacopt.cluster.jct import JctModel
from pacopt.cluster.metrics import episode_metrics
from pacopt.cluster.policies import Decision, Policy
from pacopt.cluster.solution import JobRecord, Solution
from pacopt.cluster.state import ClusterState

if TYPE_CHECKING:
    from pacopt.cluster.instance import Instance

EPS_MS = 1e-7


def simulate(instance: Instance, policy: Policy, *, seed: int | None = None,
             model: JctModel | None = None, progress: bool = False) -> Solution:
    """Run ``policy`` online over ``instance`` and return its (unvalidated) solution.

    ``model`` lets callers share one :class:`JctModel` (and its caches) across episodes.
    """
    started = time.perf_counter()
    model = model or JctModel(instance.cluster, instance.model)
    cluster = instance.cluster
    horizon = instance.horizon_ms
    state = ClusterState(cluster)
    ending: list[tuple[float, int]] = []
    records: list[JobRecord] = []
    policy.reset(seed)
    tables = {name: model.table(graph) for name, graph in instance.graphs.items()}
    for index, job in enumerate(tqdm(instance.jobs, desc=f"{policy.name}", unit="job",
                                     disable=not progress, leave=False)):
        graph = instance.graphs[job.graph]
        table = tables[job.graph]
        record = JobRecord(id=job.id, graph=job.graph, arrival_ms=job.arrival_ms,
                           max_jct_fraction=job.max_jct_fraction,
                           deadline_ms=job.max_jct_fraction * table.seq_jct_ms, accepted=False)
        records.append(record)
        if horizon is not None and job.arrival_ms >= horizon:
            record.reason = "horizon"
            continue
        while ending and ending[0][0] <= job.arrival_ms + EPS_MS:
            state.release(heapq.heappop(ending)[1])
        state.now_ms = job.arrival_ms
        decision = Decision(job_index=index, job_id=job.id, graph=graph,
                            max_jct_fraction=job.max_jct_fraction, deadline_ms=record.deadline_ms,
                            table=table, state=state, model=model)
        degree = int(policy.choose(decision))
        if not 0 <= degree <= table.max_degree:
            raise ValueError(f"policy '{policy.name}' chose degree {degree} for job '{job.id}'; "
                             f"it must be in 0..{table.max_degree}")
        record.degree = degree
        if degree == 0:
            record.reason = "rejected"
            continue
        placement = decision.placement(degree)
        if placement is None:
            record.reason = "no_placement"
            continue
        timing = model.timing(graph, table.counts[degree], placement)
        if timing.jct_ms > record.deadline_ms:
            record.reason = "deadline"
            continue
        record.workers = [cluster.server_name(s) for s in placement.workers()]
        record.blocks = [block.label for block in placement.blocks]
        record.start_ms, record.jct_ms = job.arrival_ms, timing.jct_ms
        record.comm_overhead_ms = timing.comm_overhead_ms
        end = job.arrival_ms + timing.jct_ms
        if horizon is not None and end > horizon + EPS_MS:
            record.reason = "horizon"  # runs (and holds its workers) until the episode stops
        else:
            record.accepted = True
        state.mount(index, placement.mask, placement.workers(), end)
        heapq.heappush(ending, (end, index))
    solution = Solution(method=policy.name, preset=instance.model.preset, status="heuristic",
                        jobs=records, instance=instance.source, seed=seed)
    solution.metrics = episode_metrics(instance, solution)
    solution.solve_seconds = time.perf_counter() - started
    return solution
