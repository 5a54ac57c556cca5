"""A hindsight teacher for the warm start: one step of policy improvement over a base policy.

At each decision the teacher forks the episode once per allowed degree, applies that degree, lets
the base policy (``tuned``) decide the next ``horizon`` arrivals, and picks the degree whose fork
accepts the most jobs (ties go to the base policy's own choice, then to fewer worker-ms). It reads
the episode's actual future arrivals, which no online policy may do; that is why it only ever
labels training episodes. The agent learns from observable features what the teacher does on
average, the classic rollout improvement of a base policy.
"""

from __future__ import annotations

from pacopt.cluster.policies import Policy
from pacopt.cluster.simulator import OnlineEpisode


class LookaheadTeacher:
    """Rollout improvement over ``base`` (see the module doc)."""

    def __init__(self, base: Policy, horizon: int = 40):
        self.base = base
        self.horizon = horizon

    def _score(self, episode: OnlineEpisode, degree: int) -> tuple[int, float]:
        """Accepted jobs among the next ``horizon`` arrivals after ``degree``, and the worker-ms
        the chosen degree holds (less is better)."""
        fork = episode.fork()
        start = fork.decision.job_index
        record = fork.decide(degree)
        held = len(record.workers) * (record.jct_ms or 0.0)
        while not fork.done and fork.decision.job_index < start + self.horizon:
            fork.decide(int(self.base.choose(fork.decision)))
        accepted = sum(r.accepted for r in fork.records[start:start + self.horizon])
        return accepted, -held

    def choose(self, episode: OnlineEpisode, allowed) -> int:
        """The best allowed degree for the episode's waiting job."""
        base_choice = int(self.base.choose(episode.decision))
        if not allowed[base_choice]:
            base_choice = 0
        candidates = [d for d in range(len(allowed)) if allowed[d]]
        if len(candidates) == 1:
            return candidates[0]
        scores = {d: self._score(episode, d) for d in candidates}
        best = max(scores.values())
        if scores[base_choice] == best or scores[base_choice][0] == best[0]:
            return base_choice
        return max(candidates, key=lambda d: scores[d])
