"""lp-online: a valid online policy, reproducible from its seed, that never reads ahead."""

import pytest
from offline_cases import CNN, SMALL_CLUSTER, TINY, random_jobs

from pacopt.infra.errors import InputError
from pacopt.model.instance import instance_from_dict
from pacopt.model.simulator import simulate
from pacopt.online.lp_online import LpOnline
from pacopt.solvers.api import solve
from pacopt.solvers.validate import find_problems


def instance(jobs, horizon_ms=None):
    data = {"cluster": SMALL_CLUSTER, "model": {"preset": "ddls"},
            "graphs": {"cnn": {"file": CNN}, "tiny": TINY},
            "jobs": [{"id": f"j{i}", "graph": g, "arrival_ms": a, "max_jct_fraction": b}
                     for i, (g, a, b) in enumerate(jobs)]}
    if horizon_ms is not None:
        data["horizon_ms"] = horizon_ms
    return instance_from_dict(data)


JOBS = random_jobs(11, 30)


def decisions(solution):
    return [(r.id, r.accepted, r.degree, tuple(r.workers or ())) for r in solution.jobs]


@pytest.mark.parametrize("horizon_ms", [None, 2500.0])
def test_valid_and_reproducible(horizon_ms):
    inst = instance(JOBS, horizon_ms)
    first = solve(inst, "lp-online", seed=3)
    assert first.validated and first.status == "heuristic"
    assert first.accepted > 0
    again = solve(inst, "lp-online", seed=3)
    assert decisions(first) == decisions(again)


def test_never_reads_ahead():
    """Its decisions on the first jobs do not depend on the jobs that come later."""
    full, head = instance(JOBS), instance(JOBS[:15])
    long = simulate(full, LpOnline(full), seed=7)
    short = simulate(head, LpOnline(head), seed=7)
    assert decisions(long)[:15] == decisions(short)


def test_samples_only_from_jobs_already_arrived():
    inst = instance(JOBS)
    policy = LpOnline(inst)
    choose = policy.choose

    def checked(decision):
        degree = choose(decision)
        arrived = inst.jobs[:decision.job_index + 1]
        assert policy.seen == [(job.graph, job.max_jct_fraction) for job in arrived]
        return degree

    policy.choose = checked
    simulate(inst, policy, seed=0)


def test_look_ahead_and_samples_change_the_lp():
    inst = instance(JOBS)
    seen = set()
    for k, s in [(0, 1), (4, 2), (8, 1)]:
        solution = simulate(inst, LpOnline(inst, lookahead=k, samples=s), seed=1)
        assert find_problems(inst, solution) == []
        seen.add(tuple(decisions(solution)))
    assert len(seen) > 1  # the look-ahead is not ignored


def test_rejects_a_checkpoint_and_bad_settings():
    inst = instance(JOBS[:3])
    with pytest.raises(InputError, match="--checkpoint"):
        solve(inst, "lp-online", checkpoint="x.zip")
    with pytest.raises(ValueError):
        LpOnline(inst, samples=0)


def test_an_arrival_decided_without_the_lp_is_decided_as_the_lp_decides(monkeypatch):
    """Where no future column meets the arriving job's clearly best one, or no conflict row
    holds any of its columns, the LP is not solved; the episode is the one in which it is
    solved at every arrival."""
    from pacopt.online import lp_online

    inst = instance(random_jobs(6, 40))  # a seed where each way is taken
    used = []

    def counted(name, shortcut):
        def call(*args):
            found = shortcut(*args)
            used.append(name if found is not None else "lp" if name == "split" else None)
            return found
        return call

    monkeypatch.setattr(lp_online, "_clearly_best", counted("clear", lp_online._clearly_best))
    monkeypatch.setattr(lp_online, "_split_off", counted("split", lp_online._split_off))
    fast = simulate(inst, LpOnline(inst), seed=2)
    assert {"clear", "split", "lp"} <= set(used)  # every way was taken
    monkeypatch.setattr(lp_online, "_clearly_best", lambda *args: None)
    monkeypatch.setattr(lp_online, "_split_off", lambda *args: None)
    assert decisions(simulate(inst, LpOnline(inst), seed=2)) == decisions(fast)
