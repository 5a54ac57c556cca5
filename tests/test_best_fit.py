"""The offline best-fit rules and their rollout (pacopt.solvers.best_fit): feasible and
validated answers, the rollout's guarantee, where best fit places, any cluster size."""

import time

import pytest
from test_rollout import contended

from pacopt.formulations.offline import build_problem, check_choice, to_solution
from pacopt.model.first_fit import first_fit
from pacopt.model.instance import instance_from_dict
from pacopt.solvers.best_fit import BestFit, rollout_best_fit
from pacopt.solvers.validate import find_problems
from pacopt.solvers.warm import best_warm_start, online_policies

#: Two ops of 1 and 0.5 ms: split d ways at every degree, so a job at degree d is one d-block.
TWO_OPS = {"ops": [{"id": "a", "forward_ms": 1.0, "backward_ms": 2.0, "activation_bytes": 1e6,
                    "parameter_bytes": 1e5},
                   {"id": "b", "forward_ms": 0.5, "backward_ms": 1.0, "activation_bytes": 4e5,
                    "parameter_bytes": 0}],
           "deps": [["a", "b"]]}


def two_op_problem(jobs, cluster=None):
    data = {"graphs": {"g": TWO_OPS},
            "jobs": [{"id": f"j{i}", "graph": "g", "arrival_ms": t, "max_jct_fraction": beta}
                     for i, (t, beta) in enumerate(jobs)]}
    if cluster:
        data["cluster"] = cluster
    return build_problem(instance_from_dict(data))


def validated(problem, chosen):
    check_choice(problem, chosen)
    solution = to_solution(problem, chosen, method="best-fit", status="heuristic",
                           bound_accepted=None, solve_seconds=0.0)
    return find_problems(problem.instance, solution, problem.model)


@pytest.mark.parametrize("preset", ["ddls", "physical"])
@pytest.mark.parametrize("seed", [0, 1])
def test_rules_and_their_rollout_give_validated_choices(seed, preset):
    problem = build_problem(contended(seed, preset=preset))
    for k in (1, 4, 8):
        rule = BestFit(problem, k)
        for chosen in (rule.play(), rollout_best_fit(rule, horizon=10)):
            assert chosen and validated(problem, chosen) == []


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [2, 8])
def test_a_whole_episode_rollout_never_loses_to_its_rule(seed, k):
    """With the rest of the episode as horizon, one step of rollout over a deterministic rule
    is a policy improvement."""
    problem = build_problem(contended(seed))
    rule = BestFit(problem, k)
    assert len(rollout_best_fit(rule, horizon=len(problem.by_job))) >= len(rule.play())


def test_best_fit_keeps_the_large_blocks_that_first_fit_breaks():
    """A job of 8 on an empty 4x4x2 cluster: first-fit takes the first 8-block (2x2x2), which
    cuts into both 4x4x1 halves; best fit takes one inside a half, so a 16-job still fits."""
    problem = two_op_problem([(0.0, 1.0)])
    cluster = problem.instance.cluster
    rule = BestFit(problem, 8)
    chosen = rule.play()
    mask = problem.options[chosen[0]].mask
    halves = [block.mask for block in cluster.blocks(16)]
    assert any(not half & mask for half in halves)
    graph = problem.instance.graphs["g"]
    greedy = first_fit(graph, (8, 8), cluster)
    assert all(half & greedy.mask for half in halves)


def test_the_rule_is_fixed_or_min_over_the_free_footprints():
    # job 1 is strict (beta 0.15: degree 8 or more), so K = 4 has no option: the smallest
    # degree with a free footprint; job 2 arrives when 32 - 4 - 8 = 20 servers are free
    problem = two_op_problem([(0.0, 1.0), (0.1, 0.15), (0.2, 0.5)])
    chosen = BestFit(problem, 4).play()
    assert [problem.options[chosen[j]].degree for j in (0, 1, 2)] == [4, 8, 4]
    masks = [problem.options[chosen[j]].mask for j in (0, 1, 2)]
    assert not masks[0] & masks[1] and not (masks[0] | masks[1]) & masks[2]


def test_clusters_of_more_than_64_servers():
    cluster = {"communication_groups": 8, "racks_per_group": 8, "servers_per_rack": 2}
    problem = two_op_problem([(0.0, 1.0), (0.1, 0.3), (0.2, 0.1), (0.3, 0.5)], cluster)
    for k in (2, 16):
        rule = BestFit(problem, k)
        chosen = rule.play()
        assert len(chosen) == 4 and validated(problem, chosen) == []
        assert any(problem.options[o].mask >> 64 for o in rollout_best_fit(rule).values())


def test_a_rollout_past_its_deadline_plays_the_rule_alone():
    problem = build_problem(contended(4))
    rule = BestFit(problem, 4)
    assert rollout_best_fit(rule, deadline=time.perf_counter()) == rule.play()


def test_the_exact_warm_start_plays_the_best_fit_rules_first():
    problem = build_problem(contended(5))
    policies = online_policies(problem.instance)
    name, start = best_warm_start(problem, policies, best_fit=True)
    _, online_start = best_warm_start(problem, policies)
    check_choice(problem, start)
    assert len(start) >= len(online_start)
    assert len(start) >= max(len(BestFit(problem, k).play()) for k in (1, 2, 4, 8, 16))
    assert name.startswith(("best-fit", "rollout(best-fit")) or len(start) == len(online_start)
