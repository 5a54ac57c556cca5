"""The warm start's teacher: what labels each state the training episodes visit.

``pacopt train --teacher TEXT`` names it; :meth:`TeacherSpec.parse` reads that text once, with
the settings of its rollouts (:meth:`pacopt.learned.train_config.TrainConfig.teacher_spec`), into
a :class:`TeacherSpec`, and :func:`make_teacher` builds, for one episode, the ``teacher`` that
:func:`pacopt.learned.train.play` calls at each state. A teacher returns logits over the degrees
(``-inf``: never): a heuristic's or an agent's names one degree (:func:`one_hot`); a rollout
teacher's (:class:`RolloutTarget`) is soft, each scored degree's rollout score minus the base
policy's, over the temperature.

Kept free of torch at import (the network is imported when an agent plays), so that
:mod:`pacopt.learned.train_config` checks ``--teacher`` before torch is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from pacopt.infra.errors import InputError
from pacopt.learned.agent import LearnedPolicy, load_checkpoint
from pacopt.learned.env import PartitionEnv, WorkloadFamily
from pacopt.model.placers import DEFAULT_PLACER
from pacopt.online.policies import make_policy, tuned_choice
from pacopt.online.rollout import SAMPLED_FUTURES, SAMPLED_HORIZON, Rollout, guarded

if TYPE_CHECKING:
    from pacopt.learned.gnn import DegreePolicy

#: The improve teacher's rollouts over the student by default (a network call per fork step,
#: against microseconds for a heuristic): fewer and shorter futures than over ``tuned``.
IMPROVE_FUTURES = 4
IMPROVE_HORIZON = 50
#: Arrivals each fork of the hindsight teacher (``lookahead``) plays of the episode's future.
LOOKAHEAD_HORIZON = 40
#: Added to the base policy's entry of a rollout target: ties go to it (scores are multiples of
#: 1 / futures, so this never outweighs a real difference).
TIE_PREFERENCE = 1e-3

#: What a :class:`TeacherSpec` is: a policy's degree, a trained agent's, a rollout teacher
#: (over sampled futures, over the episode's own future, over the student), or one of these per
#: distribution.
TEACHER_KINDS = ("policy", "agent", "rollout", "lookahead", "improve", "by_distribution")


@dataclass(frozen=True)
class TeacherSpec:
    """A teacher (module doc): ``--teacher``'s text parsed (:meth:`parse`), with the settings of
    its rollouts. ``str(spec)`` is the text again."""

    kind: str = "policy"  # one of TEACHER_KINDS
    #: The policy imitated (``policy``) or the rollouts' base (``rollout``, ``lookahead``,
    #: ``improve``'s first round); None: the rule tuned for the episode's distribution,
    #: ``preset`` and ``placer`` (:func:`~pacopt.online.policies.tuned_choice`).
    policy: str | None = None
    #: ``agent``: the checkpoint; ``{dist}`` in it becomes the episode's distribution.
    checkpoint: str | None = None
    #: ``by_distribution``: (distribution, its teacher) pairs.
    by_distribution: tuple[tuple[str, TeacherSpec], ...] = ()
    preset: str = "ddls"
    placer: str = DEFAULT_PLACER  # the episodes' placer, which ``tuned`` is tuned for
    #: Jobs: a rollout score gap of this much makes the target e times likelier.
    temperature: float = 0.25
    #: The improve teacher over the student labels every this many states.
    label_every: int = 1
    #: Job streams sampled per labelled state by the rollout teacher, and the standard errors
    #: of its gain over the base's degree taken off every other degree's score (0: off).
    rollout_streams: int = SAMPLED_FUTURES
    rollout_significance: float = 0.0
    #: Jobs per job's worth of worker-time still held when a fork of the rollout teachers
    #: (``rollout``, ``lookahead``) ends, taken off its score (:class:`Rollout`; 0: off).
    rollout_terminal_weight: float = 0.0
    #: The improve teacher's streams, arrivals per fork, margin (jobs added to the student's
    #: own degree) and significance (as ``rollout_significance``).
    improve_streams: int = IMPROVE_FUTURES
    improve_horizon: int = IMPROVE_HORIZON
    improve_margin: float = 0.0
    improve_significance: float = 0.0

    @classmethod
    def parse(cls, text: str, **settings) -> TeacherSpec:
        """``--teacher``'s ``text`` (``settings``: the other fields): ``tuned`` or any
        heuristic, imitated; ``agent:PATH``, a trained agent (distillation); ``rollout``, the
        rollout teacher over ``tuned`` on sampled futures, ``rollout:POLICY`` over another rule;
        ``lookahead``, the same on the episode's own future (hindsight), ``lookahead:POLICY``
        over another rule (a trace has no distribution to tune for); ``improve``, policy
        iteration: ``rollout`` in the first round, then rollouts over the student;
        ``improve:POLICY``, the same from ``POLICY`` (its first round's rollouts over
        ``POLICY`` with the improve settings); or one of these per distribution,
        ``A=agent:a.zip,B=tuned,C=...``. A text that is none of these is an
        :class:`InputError`; a name that is no policy fails when the teacher is made."""
        if "=" in text:  # one teacher per distribution: "A=agent:a.zip,B=tuned,..."
            pairs = [pair.split("=", 1) for pair in text.split(",")]
            if any(len(pair) != 2 or "=" in pair[1] for pair in pairs):
                raise InputError(f"--teacher '{text}': one teacher per distribution is "
                                 "DIST=TEACHER,DIST=TEACHER,...")
            return cls("by_distribution", by_distribution=tuple(
                (dist, cls.parse(each, **settings)) for dist, each in dict(pairs).items()),
                **settings)
        kind, colon, rest = text.partition(":")
        if colon and kind in ("agent", "rollout", "lookahead", "improve") and not rest:
            raise InputError(f"--teacher '{text}' names nothing after '{kind}:'")
        if kind == "agent" and colon:
            return cls("agent", checkpoint=rest, **settings)
        if kind in ("rollout", "lookahead", "improve") and colon:
            return cls(kind, policy=rest, **settings)
        if text in ("rollout", "lookahead", "improve"):
            return cls(text, **settings)
        return cls("policy", policy=None if text == "tuned" else text, **settings)

    def __str__(self) -> str:
        if self.kind == "by_distribution":
            return ",".join(f"{dist}={each}" for dist, each in self.by_distribution)
        if self.kind == "agent":
            return f"agent:{self.checkpoint}"
        if self.kind == "policy":
            return self.policy or "tuned"
        return self.kind + (f":{self.policy}" if self.policy else "")

    def for_distribution(self, distribution: str) -> TeacherSpec:
        """The teacher of ``distribution``'s episodes: this one, or its own if one is named per
        distribution (an :class:`InputError` if none is)."""
        if self.kind != "by_distribution":
            return self
        choice = dict(self.by_distribution)
        if distribution not in choice:
            raise InputError(f"teacher '{self}' names no teacher for distribution {distribution}")
        return choice[distribution]


def make_teacher(spec: TeacherSpec, distribution: str, family: WorkloadFamily | None = None,
                 seed: int = 0, student: DegreePolicy | None = None):
    """``teacher(env, obs, mask) -> target`` for one episode of ``distribution`` (module doc).

    The rollout teachers sample their futures from ``family``'s training seeds, drawn with
    ``seed`` (:func:`sampled_futures`; ``lookahead`` needs neither). ``improve`` with a
    ``student`` (the network being trained; :class:`~pacopt.learned.agent.LearnedPolicy` forks
    it) is the rollout teacher with the student as its base, on the improve settings, labelling
    every ``label_every``-th state; without a student yet, ``improve`` is ``rollout`` and
    ``improve:POLICY`` the same rollouts over ``POLICY``. ``tuned``, imitated or a rollout's
    base, is the rule tuned for ``distribution``, the preset and the placer."""
    spec = spec.for_distribution(distribution)
    sampled = partial(sampled_futures, family, distribution, seed=seed)  # sampled(count)
    if spec.kind == "improve" and student is not None:
        return RolloutTarget(Rollout(LearnedPolicy(network=student), spec.improve_horizon,
                                     sampled(spec.improve_streams)), spec.temperature,
                             spec.label_every, margin=spec.improve_margin,
                             significance=spec.improve_significance)
    if spec.kind == "improve" and spec.policy is not None:  # its first round, over POLICY
        return RolloutTarget(Rollout(make_policy(spec.policy), spec.improve_horizon,
                                     sampled(spec.improve_streams)), spec.temperature,
                             margin=spec.improve_margin, significance=spec.improve_significance)
    if spec.kind in ("rollout", "lookahead", "improve"):
        futures = None if spec.kind == "lookahead" else sampled(spec.rollout_streams)
        return RolloutTarget(Rollout(make_policy(_policy_name(spec, distribution)),
                                     SAMPLED_HORIZON if futures else LOOKAHEAD_HORIZON, futures,
                                     terminal_weight=spec.rollout_terminal_weight),
                             spec.temperature, significance=spec.rollout_significance)
    if spec.kind == "agent":  # a trained agent per distribution: distillation
        from pacopt.learned.gnn import greedy_degree  # torch: only once an agent plays

        policy = load_checkpoint(spec.checkpoint.format(dist=distribution))
        return lambda env, obs, mask: one_hot(greedy_degree(policy, obs, mask), len(mask))
    policy = make_policy(_policy_name(spec, distribution))
    policy.reset(0)
    return lambda env, obs, mask: one_hot(allowed_degree(policy.choose(env.episode.decision),
                                                         mask), len(mask))


def _policy_name(spec: TeacherSpec, distribution: str) -> str:
    """The policy ``spec`` imitates or rolls out over (``tuned``: the one for ``distribution``;
    looked up only then, as a trace's labels have none)."""
    return spec.policy or tuned_choice(distribution, spec.preset, spec.placer)


def allowed_degree(degree, mask) -> int:
    """A degree outside the mask blocks the job, as reject does: record it as reject."""
    degree = int(degree)
    return degree if mask[degree] else 0


def one_hot(degree: int, size: int) -> np.ndarray:
    """The target of a teacher that names one degree: logits 0 there, ``-inf`` elsewhere."""
    target = np.full(size, -np.inf, dtype=np.float32)
    target[degree] = 0.0
    return target


def greedy_chooser(policy: DegreePolicy):
    """``drive`` for :func:`~pacopt.learned.train.play`: the policy's most likely allowed
    degree."""
    from pacopt.learned.gnn import greedy_degree  # torch: the policy is a network already

    return lambda env, obs, mask: greedy_degree(policy, obs, mask)


def sampled_futures(family: WorkloadFamily | None, distribution: str, count: int,
                    seed: int) -> list:
    """``count`` job streams of ``family``'s ``distribution`` from its training seeds, drawn
    with ``seed``: the futures a rollout over sampled streams plays (what an online policy
    may know: the family, not the episode's own arrivals)."""
    if family is None:
        raise InputError("the rollout teachers need the workload family to sample from")
    seeds = np.random.default_rng(seed).integers(*family.seed_range, count)
    return [family.instance(distribution, int(s)).jobs for s in seeds]


class RolloutTarget:
    """A rollout teacher (``teacher`` for :func:`~pacopt.learned.train.play`): each degree its
    rollout scores, minus the base policy's degree's, over ``temperature``; ``-inf`` for the
    degrees it does not score (see :func:`make_teacher`). ``margin`` (jobs) is added to the
    base's own degree: a departure from it must win by more than that (policy iteration's
    noise guard). ``significance`` (z, 0: off) is the other guard, one that grows with the
    noise: every other degree's gain over the base's is lowered by ``significance`` standard
    errors of its mean (:func:`~pacopt.online.rollout.guarded`, as a :class:`Rollout` played as
    a policy does); only a departure that wins by more than its noise keeps a gain. With
    ``label_every`` k it labels every k-th state only (None for the others)."""

    def __init__(self, rollout: Rollout, temperature: float, label_every: int = 1,
                 margin: float = 0.0, significance: float = 0.0):
        self.rollout, self.temperature, self.label_every = rollout, temperature, label_every
        self.margin, self.significance = margin, significance
        self.calls = 0

    def __call__(self, env: PartitionEnv, obs, mask: np.ndarray) -> np.ndarray | None:
        self.calls += 1
        if (self.calls - 1) % self.label_every:  # not labelled; a base with a memory sees it
            if hasattr(self.rollout.base, "fork"):
                self.rollout.base.choose(env.episode.decision)
            return None
        base, streams = self.rollout.stream_scores(env.episode, mask)
        scores = guarded(streams, base, self.significance)
        target = np.full(len(mask), -np.inf, dtype=np.float32)
        for degree, score in scores.items():
            target[degree] = (score - scores[base]) / self.temperature
        target[base] = (TIE_PREFERENCE + self.margin) / self.temperature
        return target
