"""The online simulator: jobs arrive, a policy picks each one's degree, the placer places it on
the live cluster, and it runs to completion on its own workers.

The placer is the instance's ``model.placement`` (:mod:`pacopt.model.placers`: ``first-fit``,
the reference's and the default, ``best-fit`` or ``compact``). A policy may instead return a
degree and a placement together (:class:`~pacopt.model.decision.Placed`); the simulator checks
that every block is a valid RAMP block of its op's count and free now, and raises
:class:`~pacopt.model.placers.InvalidPlacement` for the policy's author otherwise.

Event order at an arrival: every job finishing by then (within 1e-7 ms, as the reference) frees
its workers first; then the arriving job is decided. A decided job is blocked with a reason:
``rejected`` (degree 0), ``no_placement`` (the placer found no room now), ``deadline`` (its JCT
exceeds beta x its sequential JCT, strictly), or ``horizon`` (it arrives at or after the horizon,
or would still be running there; such a job still holds its workers until the horizon, as in the
reference).

:class:`OnlineEpisode` is the steppable form (one decision at a time, what a gymnasium
environment drives); :func:`simulate` runs a :class:`~pacopt.model.decision.Policy` through it.
"""

from __future__ import annotations

import copy
import heapq
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from pacopt.infra.interrupt import OutOfTime, stop_requested
from pacopt.infra.progress import tqdm
from pacopt.model.decision import Decision, Placed, Policy
from pacopt.model.episode_stats import episode_metrics
from pacopt.model.jct import JctModel
from pacopt.model.placers import InvalidPlacement, check_explicit
from pacopt.model.solution import JobRecord, Solution
from pacopt.model.state import EPS_MS, ClusterState

if TYPE_CHECKING:
    from pacopt.model.instance import Instance


class OnlineEpisode:
    """One pass over an instance's arrivals, decided one job at a time.

    ``decision`` is the arriving job waiting for a degree (``None`` once every job is through);
    :meth:`decide` applies a degree, records the outcome and moves on to the next arrival,
    recording jobs that arrive at or after the horizon on the way. ``records`` grows as jobs are
    decided; :meth:`solution` wraps them up.
    """

    def __init__(self, instance: Instance, model: JctModel | None = None, progress: bool = False):
        self.instance = instance
        self.model = model or JctModel(instance.cluster, instance.model)
        self.placer = instance.model.placement
        self.state = ClusterState(instance.cluster)
        self.tables = {name: self.model.table(graph, progress)
                       for name, graph in instance.graphs.items()}
        self.records: list[JobRecord] = []
        self.decision: Decision | None = None
        self._ending: list[tuple[float, int]] = []
        self._advance()

    @property
    def done(self) -> bool:
        return self.decision is None

    def _advance(self) -> None:
        """Record undecidable arrivals until the next job that needs a decision (or the end)."""
        instance, horizon = self.instance, self.instance.horizon_ms
        self.decision = None
        while len(self.records) < len(instance.jobs):
            index = len(self.records)
            job = instance.jobs[index]
            table = self.tables[job.graph]
            scale = instance.work_scale(job)
            if scale != 1.0:  # a job with its own amount of work (a trace job)
                table = self.model.job_table(table.graph, scale)
            record = JobRecord(id=job.id, graph=job.graph, arrival_ms=job.arrival_ms,
                               max_jct_fraction=job.max_jct_fraction,
                               deadline_ms=job.max_jct_fraction * table.seq_jct_ms, accepted=False)
            self.records.append(record)
            if horizon is not None and job.arrival_ms >= horizon:
                record.reason = "horizon"
                continue
            while self._ending and self._ending[0][0] <= job.arrival_ms + EPS_MS:
                self.state.release(heapq.heappop(self._ending)[1])
            self.state.now_ms = job.arrival_ms
            self.decision = Decision(job_index=index, job_id=job.id,
                                     graph=instance.graphs[job.graph],
                                     max_jct_fraction=job.max_jct_fraction,
                                     deadline_ms=record.deadline_ms, table=table, state=self.state,
                                     model=self.model, horizon_ms=horizon, placer=self.placer,
                                     requested_degree=job.requested_degree)
            return

    def fork(self) -> OnlineEpisode:
        """An independent copy of the episode at this point, sharing the instance, the JCT model
        and the tables: deciding in the fork leaves this episode untouched (what-if play)."""
        fork = copy.copy(self)
        fork.state = self.state.copy()
        fork.records = list(self.records)
        fork._ending = list(self._ending)
        if self.decision is not None:  # the waiting job's record is the one decide() fills in
            index = self.decision.job_index
            fork.records[index] = copy.copy(self.records[index])
            fork.decision = replace(self.decision, state=fork.state)
        return fork

    def decide(self, choice: int | Placed) -> JobRecord:
        """Apply ``choice`` to the waiting job: a degree (0 = reject), placed by the placer, or
        a :class:`~pacopt.model.decision.Placed` (degree and placement, checked: see the
        module doc). Returns the job's record."""
        decision = self.decision
        if decision is None:
            raise RuntimeError("the episode is over: no job is waiting for a decision")
        table = decision.table
        explicit = isinstance(choice, Placed)
        degree = int(choice.degree if explicit else choice)
        low = 1 if explicit else 0  # a placement comes with a degree; reject is 0
        if not low <= degree <= table.max_degree:
            raise ValueError(f"degree {degree} for job '{decision.job_id}' must be in "
                             f"{low}..{table.max_degree}")
        if explicit:
            try:
                check_explicit(decision.graph, table.counts[degree], choice.placement,
                               self.instance.cluster, self.state.occupied,
                               lambda s: self.instance.jobs[int(self.state.owner[s])].id)
            except InvalidPlacement as err:
                raise InvalidPlacement(
                    f"job '{decision.job_id}' at degree {degree}: {err}") from None
            placement = choice.placement
        else:
            placement = decision.placement(degree) if degree else None
        record = self.records[decision.job_index]
        record.degree = degree
        if degree == 0:
            record.reason = "rejected"
        elif placement is None:
            record.reason = "no_placement"
        else:
            timing = self.model.timing(decision.graph, table.counts[degree], placement,
                                       table.work_scale)
            if timing.jct_ms > record.deadline_ms:
                record.reason = "deadline"
            else:
                self._run(record, decision.job_index, placement, timing)
        self._advance()
        return record

    def _run(self, record: JobRecord, index: int, placement, timing) -> None:
        cluster, horizon = self.instance.cluster, self.instance.horizon_ms
        record.workers = [cluster.server_name(s) for s in placement.workers()]
        record.blocks = [block.label for block in placement.blocks]
        record.start_ms, record.jct_ms = record.arrival_ms, timing.jct_ms
        record.comm_overhead_ms = timing.comm_overhead_ms
        end = record.arrival_ms + timing.jct_ms
        if horizon is not None and end > horizon + EPS_MS:
            record.reason = "horizon"  # runs (and holds its workers) until the episode stops
        else:
            record.accepted = True
        self.state.mount(index, placement.mask, placement.workers(), end)
        heapq.heappush(self._ending, (end, index))

    def solution(self, method: str, seed: int | None = None) -> Solution:
        """The episode's (unvalidated) solution; every job must have been decided."""
        if not self.done:
            raise RuntimeError("the episode still has jobs to decide")
        solution = Solution(method=method, preset=self.instance.model.preset, status="heuristic",
                            jobs=self.records, instance=self.instance.source, seed=seed,
                            placement=self.placer)
        solution.metrics = episode_metrics(self.instance, solution)
        return solution


def simulate(instance: Instance, policy: Policy, *, seed: int | None = None,
             model: JctModel | None = None, progress: bool = False,
             on_record: Callable[[JobRecord], None] | None = None) -> Solution:
    """Run ``policy`` online over ``instance`` and return its (unvalidated) solution.

    ``model`` lets callers share one :class:`JctModel` (and its caches) across episodes. Once a
    stop is requested (Ctrl-C; :mod:`pacopt.infra.interrupt`) every job still to come is
    rejected: the jobs decided so far stand, and the episode ends at once, complete and valid.
    A policy with a ``result_metrics()`` method adds what it returns to the solution's metrics
    (``pac-ml``: the checkpoints it played and their metadata). ``on_record`` is called with
    each decided job's record (the validator's helper reads the placements as they come).
    """
    started = time.perf_counter()
    episode = OnlineEpisode(instance, model, progress)
    policy.reset(seed)
    # disable=None: tqdm shows the bar only on a terminal
    with tqdm(total=len(instance.jobs), desc=policy.name, unit="job", leave=False,
              disable=None if progress else True) as bar:
        while not episode.done:
            try:
                choice = 0 if stop_requested() else policy.choose(episode.decision)
            except OutOfTime:  # Ctrl-C inside a footprint menu or conflict rows: reject it
                if not stop_requested():
                    raise
                choice = 0
            record = episode.decide(choice if isinstance(choice, Placed) else int(choice))
            if on_record is not None:
                on_record(record)
            bar.update(len(episode.records) - (0 if episode.done else 1) - bar.n)
    solution = episode.solution(policy.name, seed)
    extra = getattr(policy, "result_metrics", None)  # a policy's own record (docstring)
    if extra is not None:
        solution.metrics.update(extra())
    solution.solve_seconds = time.perf_counter() - started
    return solution
