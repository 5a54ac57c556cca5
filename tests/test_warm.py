"""Warm starts from online solutions, and the choice check."""

import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from pacopt.formulations.offline import build_problem, check_choice, greedy_choice
from pacopt.infra.errors import PacoptWarning
from pacopt.model.instance import instance_from_dict
from pacopt.model.simulator import simulate
from pacopt.online.policies import make_policy
from pacopt.solvers.warm import warm_start_from
from tests.conftest import table_checkpoint

GRAPHS = Path(__file__).resolve().parents[1] / "examples" / "graphs"


def workload(preset, num_jobs=40, interarrival_ms=300.0, names=("cnn", "resnet", "transformer")):
    return build_problem(instance_from_dict({
        "model": {"preset": preset},
        "graphs": {g: {"file": str(GRAPHS / f"{g}.json")} for g in names},
        "workload": {"graphs": list(names), "num_jobs": num_jobs, "interarrival_ms": interarrival_ms,
                     "max_jct_fraction": {"paper": "A"}, "seed": 1}}))


@pytest.fixture(scope="module")
def ddls():
    return workload("ddls")


@pytest.mark.parametrize("policy", ["para-max", "para-min", "min-feasible"])
def test_ddls_warm_start_keeps_every_accepted_job(ddls, policy):
    online = simulate(ddls.instance, make_policy(policy))
    start = warm_start_from(ddls, online)
    check_choice(ddls, start)
    accepted = {j for j, record in enumerate(online.jobs) if record.accepted}
    assert set(start) == accepted and accepted
    for j, k in start.items():
        option, record = ddls.options[k], online.jobs[j]
        assert option.degree == record.degree
        footprint = {ddls.instance.cluster.server_index(name) for name in record.workers}
        assert set(option.placement.workers()) <= footprint


def test_physical_warm_start_is_feasible():
    problem = workload("physical", num_jobs=25, names=("cnn",))  # physical timings are slow
    online = simulate(problem.instance, make_policy("para-max"))
    start = warm_start_from(problem, online)
    check_choice(problem, start)
    assert 0 < len(start) <= online.accepted


def test_solution_of_another_instance_is_refused(ddls):
    online = simulate(ddls.instance, make_policy("para-max"))
    next(r for r in online.jobs if r.accepted).id = "stranger"
    with pytest.raises(ValueError, match="stranger"):
        warm_start_from(ddls, online)


def test_check_choice_catches_conflicts_and_foreign_options(ddls):
    k, m = next((a, b) for row in ddls.rows for a in row for b in row
                if ddls.options[a].job != ddls.options[b].job)
    with pytest.raises(AssertionError, match="conflict row"):
        check_choice(ddls, {ddls.options[k].job: k, ddls.options[m].job: m})
    with pytest.raises(AssertionError, match="not one of its options"):
        check_choice(ddls, {ddls.options[k].job + 1: k})
    check_choice(ddls, {ddls.options[k].job: k})


def test_greedy_choice_takes_the_first_compatible_candidate(ddls):
    k, m = next((a, b) for row in ddls.rows for a in row for b in row
                if ddls.options[a].job < ddls.options[b].job)
    first, second = ddls.options[k].job, ddls.options[m].job
    free = next(c for c in ddls.by_job[second]
                if all(not (c in row and k in row) for row in ddls.rows))
    # the earlier job wins the conflict; the later one falls back to its next candidate
    assert greedy_choice(ddls, {second: [m, free], first: [k]}) == {first: k, second: free}
    assert greedy_choice(ddls, {second: [m], first: [k]}) == {first: k}


def test_every_registered_online_method_is_a_warm_start(ddls):
    """Every policy family of the registry is played (parametric ones at every legal degree),
    the usual winners first, and the best start is at least as good as each one's episode."""
    from pacopt.online.policies import POLICIES
    from pacopt.solvers.warm import ONLINE_ORDER, best_warm_start, online_policies

    policies = online_policies(ddls.instance)
    names = [policy.name for policy in policies]
    families = {name.split("(")[0].split(":")[0] for name in names}
    assert families >= {name.split(":")[0] for name in POLICIES} - {"tuned"}
    assert {f"fixed:{k}" for k in (1, 2, 4, 8, 16)} <= set(names)
    first = [name.split("(")[0].split(":")[0] for name in names]
    order = [family.split(":")[0] for family in ONLINE_ORDER]
    ranks = [order.index(f) if f in order else len(order) for f in first]
    assert ranks == sorted(ranks)
    name, start = best_warm_start(ddls, policies)
    check_choice(ddls, start)
    for policy in online_policies(ddls.instance):
        assert len(start) >= len(warm_start_from(ddls, simulate(ddls.instance, policy, seed=0)))
    assert name in names
    assert best_warm_start(ddls, policies, deadline=0.0) == (None, {})  # no time: none played


def test_exact_methods_add_the_shipped_agent_last(ddls, monkeypatch, tmp_path):
    """The exact methods' warm starts include the learned agent where a shipped checkpoint
    plays the preset and placer (ddls; physical under first fit, compact, and best fit by its
    stand-in), and skip it where none does (no checkpoints) or where the checkpoint cannot play
    the instance (a table of degrees, as the shipped agents had before 2026-11-28, on a cluster
    allowing others) instead of failing; the shipped agents, with degree features, play such a
    cluster."""
    from pacopt.solvers.exact_runner import learned_policies
    from pacopt.solvers.warm import best_warm_start

    agents = list(learned_policies(ddls.instance))
    assert [agent.name.split("(")[0] for agent in agents] == ["pac-ml"]
    name, start = best_warm_start(ddls, agents)
    check_choice(ddls, start)
    assert name == agents[0].name and start
    physical = workload("physical", num_jobs=5).instance

    def played(instance) -> list[str]:
        return [a.checkpoint.split("/")[-1] for a in learned_policies(instance)]

    assert played(physical) == ["general-physical.zip"]
    best_fit = replace(physical, model=replace(physical.model, placement="best-fit"))
    assert played(best_fit) == ["general-physical-compact.zip"]  # its stand-in
    compact = replace(physical, model=replace(physical.model, placement="compact"))
    assert played(compact) == ["general-physical-compact.zip"]
    other_degrees = replace(ddls.instance, model=replace(ddls.instance.model,
                                                         max_partitions_per_op=8))
    with warnings.catch_warnings():  # a warm start does not show the C fine-tune's note
        warnings.simplefilter("error", PacoptWarning)
        agents = list(learned_policies(other_degrees))  # the general agent has degree features
    assert [a.checkpoint.split("/")[-1] for a in agents] == ["general-ddls.zip"]
    compact_other = replace(compact, model=replace(compact.model, max_partitions_per_op=8))
    assert played(compact_other) == ["general-physical-compact.zip"]
    assert played(replace(physical, model=replace(physical.model, max_partitions_per_op=8))) \
        == ["general-physical.zip"]
    from pacopt.learned import agent

    monkeypatch.setattr(agent, "CHECKPOINT_DIR", tmp_path)  # nothing shipped: nothing played
    assert played(physical) == []
    table_checkpoint(tmp_path / "general-physical-compact.zip", {
        "model": {"preset": "physical", "placement": "compact"},
        "graphs": {g: {"file": str(GRAPHS / f"{g}.json")} for g in ("cnn", "resnet")},
        "workload": {"graphs": ["cnn", "resnet"], "num_jobs": 5, "interarrival_ms": 300.0,
                     "max_jct_fraction": {"paper": "A"}, "seed": 1}})
    assert played(compact) == ["general-physical-compact.zip"]  # a table plays its 17 degrees
    assert list(learned_policies(compact_other)) == []  # and not 9: skipped, no failure
