"""The learned heterogeneous scheduler: environment, masks, a few seconds of training, the
shipped checkpoint."""

import numpy as np
import pytest

from pacopt.hetero import (
    build_hetero_problem,
    load_types,
    plan_problems,
    types_from_dict,
)
from pacopt.hetero.exact import solve_dp
from pacopt.hetero.rl import (
    CHECKPOINT,
    DEAD_END,
    HeteroEnv,
    fluid_bound,
    load_policy,
    solve_rl,
    train_hetero_policy,
)
from pacopt.hetero.types import EXAMPLE_TYPES
from pacopt.infra.errors import InputError
from tests.test_hetero import HAND_CHAIN, HAND_TYPES, _chain, _types


def _problems():
    types = types_from_dict(_types({"cpu": (1.0, 0.25), "gpu": (3.0, 1.0), "big": (8.0, 3.0)},
                                   bandwidth=2e9, latency=1e-5))
    graphs = [_chain([3, 9, 6, 12, 2, 7], [4e6] * 6, [1e6] * 6, "a"),
              _chain([20, 1, 1, 30, 5], [1e7, 1e6, 1e6, 1e7, 0], [0, 0, 0, 5e7, 0], "b")]
    return [build_hetero_problem(g, types, g.step_ms / load) for g in graphs for load in (1.5, 4.0)]


def test_env_episode_prices_the_plan_exactly():
    problem = build_hetero_problem(HAND_CHAIN, types_from_dict(HAND_TYPES), 50.0)
    env = HeteroEnv(None, 2)
    obs, _ = env.reset(options={"problem": problem})
    assert obs.shape == env.observation_space.shape and np.isfinite(obs).all()
    total = 0.0
    for k in (1, 1, 0):  # the optimum: fast, fast, slow (cost 5 per hour)
        assert env.action_masks()[k]
        obs, reward, done, _, _ = env.step(k)
        total += reward
    assert done
    assert -total * fluid_bound(problem) == pytest.approx(5.0)


def test_env_masks_types_that_cannot_meet_the_budget():
    # 'slow' at half speed cannot run the 40 ms op within 15 ms even with 2 replicas
    types = types_from_dict(_types({"slow": (1.0, 0.5), "fast": (3.0, 1.0)}, max_replicas=2))
    problem = build_hetero_problem(_chain([40]), types, 25.0)
    env = HeteroEnv(None, 2)
    env.reset(options={"problem": problem})
    assert env.action_masks().tolist() == [False, True]
    env.reset(options={"problem": build_hetero_problem(_chain([40]), types, 15.0)})
    assert env.action_masks().tolist() == [True, True]  # a dead end: everything allowed...
    _, reward, done, _, info = env.step(0)
    assert done and reward == -DEAD_END and info["dead_end"]  # ...and penalised


def test_a_few_seconds_of_training_gives_valid_plans():
    problems = _problems()
    types = problems[0].types
    graphs = [p.graph for p in problems[::2]]
    model = train_hetero_policy(graphs, types, timesteps=256, seed=1, imitation_problems=4)
    statuses = []
    for problem in problems:
        plan = solve_rl(problem, model)
        statuses.append(plan.status)
        assert plan.method == "rl" and plan.status in ("heuristic", "infeasible")
        assert plan_problems(problem, plan) == []
        if plan.status == "heuristic":  # an undertrained policy may walk into a dead end
            assert plan.cost_per_hour >= solve_dp(problem).cost_per_hour - 1e-9
    assert "heuristic" in statuses


def test_rl_reports_infeasible_when_nothing_fits():
    problem = build_hetero_problem(HAND_CHAIN, types_from_dict(HAND_TYPES), 1e-3)
    model = train_hetero_policy([HAND_CHAIN], types_from_dict(HAND_TYPES), timesteps=0, imitation_problems=0)
    assert solve_rl(problem, model).status == "infeasible"


def test_checkpoint_for_other_types_is_refused():
    model = train_hetero_policy([HAND_CHAIN], types_from_dict(HAND_TYPES), timesteps=0, imitation_problems=0)
    problem = _problems()[0]  # three types
    with pytest.raises(InputError, match="trained for 2 types"):
        solve_rl(problem, model)
    with pytest.raises(InputError, match="not found"):
        load_policy("/nonexistent/policy.zip")


@pytest.mark.skipif(not CHECKPOINT.is_file(), reason="no shipped RL checkpoint")
def test_shipped_checkpoint_plans_a_measured_graph():
    graph = _chain([3.5, 12.25, 7.0, 0.5, 20.0, 1.25, 9.0, 4.0],
                   activations=[2e7, 1e7, 1e7, 5e6, 5e6, 1e6, 1e6, 0],
                   params=[1e5, 2e6, 0, 0, 4e7, 0, 1.6e7, 4e6])
    problem = build_hetero_problem(graph, load_types(EXAMPLE_TYPES), graph.step_ms / 5)
    plan = solve_rl(problem, load_policy())
    assert plan_problems(problem, plan) == [] and plan.cost_per_hour is not None


def test_bundled_types_match_the_policy_shape():
    assert len(load_types(EXAMPLE_TYPES).names) == 4
