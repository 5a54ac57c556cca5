"""Episodes for tests that look at every decision."""

from __future__ import annotations

from pacopt.model.simulator import OnlineEpisode
from pacopt.online.policies import make_policy


def random_decisions(instance, seed: int):
    """Every decision of an episode of ``instance`` played by ``random`` (seeded ``seed``),
    each yielded before it is decided."""
    episode = OnlineEpisode(instance)
    policy = make_policy("random")
    policy.reset(seed)
    while not episode.done:
        decision = episode.decision
        yield decision
        episode.decide(policy.choose(decision))
