"""Rollout: one step of policy improvement over a base policy, by simulation.

At each decision a :class:`Rollout` forks the episode once per worthwhile degree
(:meth:`~pacopt.model.decision.Decision.worthwhile_mask`), applies that degree, lets the base
policy decide the next ``horizon`` arrivals, and picks the degree whose forks accept the most jobs
on average (ties go to the base policy's own choice). With a ``terminal_weight`` a fork's score
also counts what it leaves behind: the worker-time its running jobs still hold when it ends, in
jobs' worth (a job's worth: the mean sequential JCT of the instance's graphs) times the weight,
is taken off, as the beam search prices a state's future (:mod:`pacopt.solvers.beam`). Forks of
a short horizon mostly tie; this breaks the ties towards the degree that leaves the cluster
freer. Which arrivals the forks play:

- **hindsight** (``futures=None``): the episode's own future arrivals. Offline, where every
  arrival is known, this is a legitimate heuristic (the exact methods' warm start); online it
  reads the future, so the agent's training only uses it to label training episodes.
- **sampled** (``futures`` given): job streams drawn from the same workload family, the same
  streams for every degree (common random numbers, so the comparison is not drowned in noise).
  This uses only what an online policy knows (the state now and the family), so its choice is
  a function of what the agent observes; the hindsight choices, which depend on the real
  future, proved hard to imitate on strict deadlines (beta B, C).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from pacopt.infra.interrupt import out_of_time
from pacopt.model.decision import Policy
from pacopt.model.instance import Instance
from pacopt.model.jct import JctModel
from pacopt.model.simulator import OnlineEpisode
from pacopt.model.solution import Solution
from pacopt.model.workload import JobSpec

#: Sampled-future defaults: streams per decision, and arrivals each fork plays. A shorter
#: horizon favours greedy choices and loses to ``tuned`` (``docs/experiments.md``, Warm starts).
SAMPLED_FUTURES = 8
SAMPLED_HORIZON = 100


class Rollout:
    """Rollout improvement over ``base`` (see the module doc). ``base`` decides from the decision
    alone, as every heuristic and fixed rule does (the forks share it), or, if it remembers past
    arrivals (the learned agent), has ``fork()``: each fork then plays its own copy, so the
    forks' histories never mix with each other or with the episode's."""

    def __init__(self, base: Policy, horizon: int = SAMPLED_HORIZON,
                 futures: Sequence[Sequence[JobSpec]] | None = None, significance: float = 0.0,
                 terminal_weight: float = 0.0):
        self.base = base
        self.horizon = horizon
        self.futures = futures
        self.significance = significance  # :meth:`choose`'s guard (see :func:`guarded`)
        self.terminal_weight = terminal_weight  # jobs per job's worth held at a fork's end

    @property
    def name(self) -> str:
        return f"rollout({self.base.name})"

    def _fork(self, episode: OnlineEpisode, future: Sequence[JobSpec] | None) -> OnlineEpisode:
        """A fork whose arrivals after the waiting job are ``future``'s (hindsight: its own),
        shifted so that they keep their gaps to the job that arrives now."""
        fork = episode.fork()
        if future is None:
            return fork
        index = fork.decision.job_index
        jobs = episode.instance.jobs
        after = list(future[index + 1:index + 1 + self.horizon])
        shift = jobs[index].arrival_ms - future[index].arrival_ms
        if shift:
            after = [replace(job, arrival_ms=job.arrival_ms + shift) for job in after]
        fork.instance = replace(episode.instance, jobs=jobs[:index + 1] + after)
        return fork

    def _score(self, episode: OnlineEpisode, degree: int, future, worth: float) -> float:
        """Accepted jobs among the waiting one and the next ``horizon`` arrivals, after
        ``degree``, less the terminal cost (module doc; ``worth``: a job's worth, ms) when there
        is a ``terminal_weight``."""
        fork = self._fork(episode, future)
        base = self.base.fork() if hasattr(self.base, "fork") else self.base
        start = fork.decision.job_index
        fork.decide(degree)
        while not fork.done and fork.decision.job_index <= start + self.horizon:
            fork.decide(int(base.choose(fork.decision)))
        accepted = sum(r.accepted for r in fork.records[start:start + self.horizon + 1])
        if not self.terminal_weight:
            return accepted
        return accepted - self.terminal_weight * fork.state.worker_ms_held() / worth

    def scores(self, episode: OnlineEpisode,
               allowed: np.ndarray | None = None) -> tuple[int, dict[int, float]]:
        """The base policy's choice for the episode's waiting job (reject if ``allowed`` forbids
        it) and, for every allowed degree (default: the worthwhile ones), the mean number of
        jobs its forks accept, each departure from the base's choice lowered by
        ``significance`` standard errors (:func:`guarded`); only the one candidate, unscored,
        when there is no choice."""
        base_choice, per_stream = self.stream_scores(episode, allowed)
        return base_choice, guarded(per_stream, base_choice, self.significance)

    def stream_scores(self, episode: OnlineEpisode, allowed: np.ndarray | None = None
                      ) -> tuple[int, dict[int, np.ndarray]]:
        """:meth:`scores` before the mean: the jobs accepted in each stream's fork, in the
        streams' order (the same streams for every degree, so they pair up)."""
        decision = episode.decision
        if allowed is None:
            allowed = decision.worthwhile_mask()
        base_choice = int(self.base.choose(decision))
        if not allowed[base_choice]:
            base_choice = 0
        candidates = np.flatnonzero(allowed).tolist()
        if len(candidates) == 1:
            return base_choice, {candidates[0]: np.zeros(1)}
        futures = [None] if self.futures is None else self.futures
        worth = _job_worth(episode) if self.terminal_weight else 1.0
        return base_choice, {d: np.array([self._score(episode, d, f, worth) for f in futures],
                                         dtype=float)
                             for d in candidates}

    def choose(self, episode: OnlineEpisode, allowed: np.ndarray | None = None) -> int:
        """The best degree for the episode's waiting job among ``allowed`` (default: the
        decision's worthwhile degrees) by the forks' mean, each departure from the base policy's
        choice lowered by ``significance`` standard errors first (:func:`guarded`); ties go to
        the base policy's choice."""
        base_choice, scores = self.scores(episode, allowed)
        best = max(scores.values())
        if scores.get(base_choice) == best:
            return base_choice
        return max(scores, key=scores.get)


def _job_worth(episode: OnlineEpisode) -> float:
    """A job's worth of worker-time (ms): the mean sequential JCT of the instance's graphs."""
    return float(np.mean([table.seq_jct_ms for table in episode.tables.values()]))


def guarded(per_stream: dict[int, np.ndarray], base: int,
            significance: float) -> dict[int, float]:
    """Each degree's mean of ``per_stream`` (:meth:`Rollout.stream_scores`), every degree but
    ``base`` lowered by ``significance`` standard errors of its gain over ``base`` (the streams
    are shared, so the gains pair up stream by stream): a lower confidence bound, so that a
    departure from the base policy must win by more than its noise (0: the plain means)."""
    scores = {degree: float(accepted.mean()) for degree, accepted in per_stream.items()}
    if significance and base in per_stream:
        for degree, accepted in per_stream.items():
            if degree != base:
                scores[degree] -= significance * _standard_error(accepted - per_stream[base])
    return scores


def _standard_error(values: np.ndarray) -> float:
    """The standard error of the mean of ``values`` (0 for fewer than two)."""
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0


def play_rollout(instance: Instance, rollout: Rollout, *, model: JctModel | None = None,
                 deadline: float | None = None) -> Solution:
    """One episode of ``instance`` decided by ``rollout`` (unvalidated). From ``deadline`` (a
    ``time.perf_counter()`` value) on, the base policy decides the remaining jobs alone, so the
    episode is always complete."""
    rollout.base.reset(0)
    episode = OnlineEpisode(instance, model)
    while not episode.done:
        late = out_of_time(deadline)  # the deadline, or Ctrl-C
        episode.decide(int(rollout.base.choose(episode.decision)) if late
                       else rollout.choose(episode))
    return episode.solution(rollout.name, seed=0)
