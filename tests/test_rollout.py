"""Rollout improvement (pacopt.online.rollout): its guarantee, its sampled-future splice, and its
use as the exact methods' warm start."""

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pacopt.formulations.offline import build_problem, check_choice
from pacopt.model.instance import instance_from_dict
from pacopt.model.jct import JctModel
from pacopt.model.simulator import OnlineEpisode, simulate
from pacopt.online.policies import make_policy
from pacopt.online.rollout import Rollout, play_rollout
from pacopt.solvers.validate import find_problems
from pacopt.solvers.warm import best_warm_start

GRAPHS = Path(__file__).resolve().parents[1] / "examples" / "graphs"


def contended(seed, num_jobs=40, preset="ddls", interarrival_ms=200.0):
    names = ("cnn", "resnet", "transformer")
    return instance_from_dict({
        "model": {"preset": preset},
        "graphs": {g: {"file": str(GRAPHS / f"{g}.json")} for g in names},
        "workload": {"graphs": list(names), "num_jobs": num_jobs,
                     "interarrival_ms": interarrival_ms, "max_jct_fraction": {"paper": "B"},
                     "seed": seed}})


def accepted(solution):
    return sum(job.accepted for job in solution.jobs)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("base", ["para-max", "fixed-or-min:4", "min-feasible"])
def test_a_whole_episode_hindsight_rollout_never_loses_to_its_base(seed, base):
    """With the whole remaining episode as horizon and a deterministic base, one step of rollout
    is a policy improvement: it accepts at least as many jobs, and the validator accepts it."""
    instance = contended(seed)
    model = JctModel(instance.cluster, instance.model)
    solution = play_rollout(instance, Rollout(make_policy(base, instance), len(instance.jobs)),
                            model=model)
    assert find_problems(instance, solution, model) == []
    assert accepted(solution) >= accepted(simulate(instance, make_policy(base, instance),
                                                   seed=0, model=model))


def test_rollout_picks_only_worthwhile_degrees():
    instance = contended(3)
    rollout = Rollout(make_policy("para-max", instance), horizon=10)
    episode = OnlineEpisode(instance)
    while not episode.done:
        mask = episode.decision.worthwhile_mask()
        degree = rollout.choose(episode)
        assert mask[degree]
        episode.decide(degree)


def test_a_sampled_future_equal_to_the_real_one_decides_as_hindsight():
    """The splice is exact: the real stream given as a 'sampled' future (also shifted in time,
    which the splice undoes) reproduces the hindsight rollout's decisions."""
    instance = contended(4)
    shifted = [replace(job, arrival_ms=job.arrival_ms + 5_000.0) for job in instance.jobs]
    runs = []
    for futures in (None, [instance.jobs], [shifted]):
        rollout = Rollout(make_policy("para-max", instance), horizon=15, futures=futures)
        runs.append([job.degree for job in play_rollout(instance, rollout).jobs])
    assert runs[0] == runs[1] == runs[2]


def test_a_guarded_rollout_departs_only_by_more_than_its_noise():
    """Played as a policy with ``significance`` z, a rollout keeps the base policy's degree
    unless another degree's paired gain clears z standard errors (as the training teacher's
    guard, :func:`pacopt.online.rollout.guarded`); without the guard the best mean wins."""
    per_stream = {2: np.array([5.0, 5, 5, 5]),   # the base's degree
                  4: np.array([9.0, 2, 9, 2]),   # gains 4, -3, 4, -3: mean 0.5, error 2.02
                  8: np.array([6.0, 6, 7, 6])}   # gains 1, 1, 2, 1: mean 1.25, error 0.25

    class Fixed(Rollout):
        def stream_scores(self, episode, allowed=None):
            return 2, dict(per_stream)

    base = make_policy("para-max")
    assert Fixed(base, significance=2.0).choose(None) == 8  # 1.25 - 0.5 > 0.5 - 4.04
    assert Fixed(base, significance=6.0).choose(None) == 2  # 1.25 - 1.5 < 0
    del per_stream[8]
    assert Fixed(base).choose(None) == 4
    assert Fixed(base, significance=2.0).choose(None) == 2


def test_a_rollout_past_its_deadline_plays_the_base_alone():
    instance = contended(5)
    base = make_policy("fixed-or-min:4", instance)
    late = play_rollout(instance, Rollout(base, 10), deadline=time.perf_counter())
    assert [job.degree for job in late.jobs] == [
        job.degree for job in simulate(instance, make_policy("fixed-or-min:4", instance)).jobs]


def test_the_exact_warm_start_includes_the_rollout_over_the_best_policy():
    problem = build_problem(contended(6, num_jobs=30))
    policies = [make_policy(name, problem.instance) for name in ("para-max", "fixed-or-min:4")]
    name, plain = best_warm_start(problem, policies)
    rolled_name, rolled = best_warm_start(problem, policies, rollout=True)
    check_choice(problem, rolled)
    assert len(rolled) > len(plain)  # 23 against 21 here
    assert rolled_name == f"rollout({name})"


def test_a_terminal_weight_prices_the_worker_time_a_fork_leaves_held():
    """With a ``terminal_weight`` each fork's score is its accepted jobs less the weight times the
    worker-time its jobs still hold when it ends, in jobs' worth (the mean sequential JCT of the
    graphs): recomputed here from the fork's records, not from the cluster state the rollout
    reads."""
    instance = contended(5)
    base = make_policy("para-max", instance)
    episode = OnlineEpisode(instance)
    while episode.decision.job_index < 8 or episode.decision.worthwhile_mask().sum() < 2:
        episode.decide(int(base.choose(episode.decision)))
    plain = Rollout(base, horizon=6)
    priced = Rollout(base, horizon=6, terminal_weight=0.3)
    worth = np.mean([table.seq_jct_ms for table in episode.tables.values()])
    _, plain_scores = plain.stream_scores(episode)
    _, priced_scores = priced.stream_scores(episode)
    assert len(plain_scores) >= 2
    differed = False
    for degree, score in plain_scores.items():
        fork = episode.fork()
        start = fork.decision.job_index
        fork.decide(degree)
        while not fork.done and fork.decision.job_index <= start + 6:
            fork.decide(int(base.choose(fork.decision)))
        now = fork.state.now_ms
        held = sum(len(r.workers) * max(0.0, r.end_ms - now) for r in fork.records if r.accepted)
        assert priced_scores[degree][0] == pytest.approx(score[0] - 0.3 * held / worth)
        differed |= held > 0
    assert differed
