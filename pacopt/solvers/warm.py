"""Warm starts for the offline problem's backends, and the check every returned choice passes.

A *choice* maps each accepted job j (index into ``instance.jobs``) to one of its options
``problem.by_job[j]``; it is feasible when no conflict row holds two of its options.

**An online solution as a warm start.** Each job an online policy accepted holds a footprint
that contains one of the job's candidate footprints at the same degree (see
:mod:`pacopt.formulations.offline`), so the job can take that option instead without any worker
gaining a job. In the ``ddls`` preset the option runs over the same interval as the online job,
so the mapped choice keeps every accepted job. In the ``physical`` preset an option's JCT is that
of its compact placement and can differ; options that would then conflict with those already
taken are dropped greedily, in arrival order, so the result is always feasible.

**Every online method as a warm start.** :func:`online_policies` lists every registered online
policy (``tuned``, ``fixed-or-min:K`` and ``fixed:K`` at every legal K, the heuristics), all of
them cheap, the usual winners first. :func:`best_warm_start` plays, within a time budget, the
offline best-fit rules at every legal K and the hindsight rollout over the best of them
(:mod:`pacopt.solvers.best_fit`: offline a job may go on any footprint, not only where
first-fit puts it, and these are the strongest cheap starts), then the online methods, the
hindsight rollout over the best of those, then what callers add (the learned agent, which lives
above this layer and costs more), and keeps the best choice. What each accepts:
``docs/experiments.md`` (Warm starts).
"""

from __future__ import annotations

from collections.abc import Iterable

from pacopt.formulations.offline import OfflineProblem, choice_value, greedy_choice
from pacopt.infra.errors import InputError
from pacopt.infra.interrupt import out_of_time
from pacopt.model.decision import Policy
from pacopt.model.instance import Instance
from pacopt.model.simulator import simulate
from pacopt.model.solution import Solution
from pacopt.online.policies import POLICIES, make_policy
from pacopt.online.rollout import Rollout, play_rollout
from pacopt.solvers.beam import beam_search
from pacopt.solvers.best_fit import BestFit, rollout_best_fit


def warm_start_from(problem: OfflineProblem, solution: Solution) -> dict[int, int]:
    """A feasible choice (job index -> option index) that keeps as many of ``solution``'s
    accepted jobs as it can (all of them in the ``ddls`` preset).

    ``solution`` is any method's solution on ``problem.instance`` (typically an online policy's,
    from :func:`pacopt.model.simulator.simulate`); its jobs are matched by id. Each accepted
    job gets the least worker-time option of its degree whose workers lie inside its footprint.
    """
    instance, options = problem.instance, problem.options
    job_index = {job.id: j for j, job in enumerate(instance.jobs)}
    candidates: dict[int, list[int]] = {}
    for record in solution.jobs:
        if not record.accepted:
            continue
        if record.id not in job_index:
            raise ValueError(f"solution job '{record.id}' is not a job of the instance")
        j = job_index[record.id]
        footprint = 0
        for name in record.workers:
            footprint |= 1 << instance.cluster.server_index(name)
        inside = [k for k in problem.by_job[j]
                  if options[k].degree == record.degree and options[k].mask & ~footprint == 0]
        candidates[j] = sorted(inside, key=lambda k: options[k].worker_ms)
    return greedy_choice(problem, candidates)


#: The order online policies are played in (all are cheap): the families that usually win first,
#: so that a short budget still sees them (``docs/experiments.md``, Warm starts).
ONLINE_ORDER = ("tuned", "fixed-or-min:K", "fixed:K")
#: Arrivals each fork of the warm start's hindsight rollout plays.
ROLLOUT_HORIZON = 100


def legal_degrees(instance: Instance) -> list[int]:
    """The degrees the parametric rules are played at: PAC-ML's action set, 1 and the even ones
    up to the instance's largest degree."""
    top = instance.model.max_partitions_per_op
    return [k for k in range(1, top + 1) if k == 1 or k % 2 == 0]


def online_policies(instance: Instance) -> list[Policy]:
    """A fresh instance of every registered online policy (:data:`POLICIES`), the parametric
    ones at each of :func:`legal_degrees`: ``tuned`` first (skipped when its data is missing),
    then ``fixed-or-min:K``, ``fixed:K`` and the heuristics (:data:`ONLINE_ORDER`)."""
    out: list[Policy] = []
    rank = {name: i for i, name in enumerate(ONLINE_ORDER)}
    for name in sorted(POLICIES, key=lambda name: rank.get(name, len(rank))):
        family, parametric, _ = name.partition(":")
        names = [f"{family}:{k}" for k in legal_degrees(instance)] if parametric else [name]
        for each in names:
            try:
                out.append(make_policy(each, instance))
            except InputError:  # tuned without its data: one warm start fewer
                continue
    return out


def best_warm_start(problem: OfflineProblem, policies: Iterable[Policy], *,
                    deadline: float | None = None, best_fit: bool = False, rollout: bool = False,
                    extra: Iterable[Policy] = (),
                    beam_until: float | None = None, played: dict[str, Solution] | None = None
                    ) -> tuple[str | None, dict[int, int]]:
    """The best warm start found until ``deadline`` (a ``time.perf_counter()`` value): its
    method's name and its choice (most accepted jobs, then least worker-time; ``(None, {})``
    when nothing was played). In this order:

    - with ``best_fit``, the offline best-fit rules at each of :func:`legal_degrees`; with
      ``beam_until`` too (a ``time.perf_counter()`` value, before ``deadline``), the beam search
      over them (:mod:`pacopt.solvers.beam`), widening until then (its first beam always
      runs); then the hindsight rollout over the best rule (:mod:`pacopt.solvers.best_fit`);
    - the episodes of ``policies`` (online methods, seed 0, mapped onto options; those in
      ``played``, by policy name, are not played again);
    - with ``rollout``, the hindsight rollout over the best of those
      (:mod:`pacopt.online.rollout`, :data:`ROLLOUT_HORIZON` arrivals);
    - ``extra`` policies, never a rollout's base (the learned agent: a rollout over it would
      cost far more than the others).

    What each of them accepts on the paper workload: ``docs/experiments.md`` (Warm starts).
    """
    best: tuple[str | None, dict[int, int]] = (None, {})
    best_value = (-1, 0.0)

    def offer(name: str, choice: dict[int, int]) -> tuple[int, float]:
        """Keep ``choice`` if it is the best so far; returns its value."""
        nonlocal best, best_value
        scored = choice_value(problem, choice)
        if scored > best_value:
            best, best_value = (name, choice), scored
        return scored

    def late() -> bool:
        return out_of_time(deadline)  # the deadline, or Ctrl-C

    if best_fit:
        rules, shared = [], {}
        for k in legal_degrees(problem.instance):
            if late():
                break
            rule = BestFit(problem, k, shared=shared)
            rules.append((offer(rule.name, rule.play()), rule))
        if rules and beam_until is not None:
            offer("beam search", beam_search(rules[0][1], deadline=beam_until))
        if rules and not late():
            rule = max(rules, key=lambda pair: pair[0])[1]
            offer(f"rollout({rule.name})", rollout_best_fit(rule, deadline=deadline))
    base, base_value = None, (-1, 0.0)
    for policy in policies:
        if late():
            break
        solution = (played or {}).get(policy.name) or simulate(problem.instance, policy, seed=0,
                                                                model=problem.model)
        scored = offer(policy.name, warm_start_from(problem, solution))
        if scored > base_value:
            base, base_value = policy, scored
    if rollout and base is not None and not late():
        improved = Rollout(base, ROLLOUT_HORIZON)
        offer(improved.name, warm_start_from(problem, play_rollout(
            problem.instance, improved, model=problem.model, deadline=deadline)))
    extra = iter(extra)  # a generator may import heavy modules: pulled only when in time
    while not late() and (policy := next(extra, None)) is not None:
        solution = simulate(problem.instance, policy, seed=0, model=problem.model)
        offer(policy.name, warm_start_from(problem, solution))
    return best
