"""The heuristic policies' and baselines' rules, on hand-made cluster states; the tuned choice."""

import math

import numpy as np
import pytest

from pacopt.infra.errors import InputError
from pacopt.model.decision import Decision
from pacopt.model.jct import JctModel
from pacopt.model.paper_workload import (
    HELD_OUT_SEEDS,
    PAPER_DISTRIBUTIONS,
    TUNING_SEEDS,
    paper_instance,
)
from pacopt.model.pipedream import read_pipedream
from pacopt.model.settings import ModelSettings
from pacopt.model.simulator import simulate
from pacopt.model.state import ClusterState
from pacopt.model.topology import RampCluster
from pacopt.model.workload import paper as paper_beta
from pacopt.online.policies import load_tuned, make_policy, tuned_choice, tuned_default_choice
from pacopt.online.recognise import nearest_paper_distribution

CLUSTER = RampCluster()


@pytest.fixture(scope="module")
def setup(pipedream_dir):
    model = JctModel(CLUSTER, ModelSettings(), persist=False)
    graph = read_pipedream(pipedream_dir / "alexnet.txt")
    return model, graph, model.table(graph)


def decision(setup, beta, busy=()):
    model, graph, table = setup
    state = ClusterState(CLUSTER)
    for i, server in enumerate(busy):
        state.mount(1000 + i, 1 << server, (server,), 1e9)
    return Decision(job_index=0, job_id="j", graph=graph, max_jct_fraction=beta,
                    deadline_ms=beta * table.seq_jct_ms, table=table, state=state, model=model)


def test_masks_on_an_empty_and_a_busy_cluster(setup):
    empty = decision(setup, 0.5)
    assert empty.reference_degrees == (1, 2, 4, 6, 8, 16)
    assert empty.valid_degrees == (1, 2, 3, 4, 6, 8, 9, 16)
    assert list(empty.action_mask().nonzero()[0]) == [0, 1, 2, 3, 4, 6, 8, 9, 16]
    # one busy server in each (4,4,1) half: 30 free, so 16 is in the reference mask, yet it
    # cannot be placed (fragmentation), which only the live mask knows
    fragmented = decision(setup, 0.5, busy=(0, 1))
    assert 16 in fragmented.reference_degrees and 16 not in fragmented.valid_degrees
    assert fragmented.jct_ms(16) == math.inf


@pytest.mark.parametrize("beta, expected", [(1.0, 1), (0.5, 2), (0.45, 4), (0.26, 4), (0.25, 4),
                                            (0.2, 6), (0.13, 8), (0.12, 16), (0.1, 16)])
def test_para_min_takes_the_smallest_mask_degree_reaching_one_over_beta(setup, beta, expected):
    assert make_policy("para-min").choose(decision(setup, beta)) == expected


@pytest.mark.parametrize("beta, expected", [(1.0, 1), (0.51, 2), (0.5, 3), (0.34, 3), (0.33, 4),
                                            (0.12, 9), (0.1, 16), (0.05, 0)])
def test_min_feasible_takes_the_smallest_degree_that_meets_the_deadline(setup, beta, expected):
    """Communication makes JCT slightly above seq/d, so beta = 0.5 needs degree 3, not 2."""
    assert make_policy("min-feasible").choose(decision(setup, beta)) == expected


def test_para_max_and_sequential(setup):
    assert make_policy("para-max").choose(decision(setup, 0.5)) == 16
    fragmented = decision(setup, 0.5, busy=tuple(range(20)))   # 12 free
    assert make_policy("para-max").choose(fragmented) == 8
    assert make_policy("sequential").choose(fragmented) == 1
    full = decision(setup, 0.5, busy=tuple(range(32)))
    assert all(make_policy(n).choose(full) == 0 for n in ("para-max", "para-min", "random",
                                                         "min-feasible", "sequential"))


def test_random_draws_only_mask_degrees(setup):
    policy = make_policy("random")
    policy.reset(3)
    draws = {policy.choose(decision(setup, 0.5)) for _ in range(200)}
    assert draws == {1, 2, 4, 6, 8, 16}


def test_unknown_policy_is_an_input_error():
    with pytest.raises(InputError, match="known: sequential"):
        make_policy("greedy")


# ----- the baselines: fixed:K, fixed-or-min:K, tuned --------------------------------------------
def test_fixed_takes_k_only_when_placeable_and_in_time(setup):
    fixed = make_policy("fixed:4")
    assert fixed.name == "fixed:4"
    assert fixed.choose(decision(setup, 0.5)) == 4
    assert fixed.choose(decision(setup, 0.2)) == 0          # JCT ~ seq / 4 misses 0.2 x seq
    assert fixed.choose(decision(setup, 1.0, busy=tuple(range(30)))) == 0   # 2 free workers
    assert make_policy("fixed:5").choose(decision(setup, 1.0)) == 0  # no RAMP shape for 5
    assert make_policy("fixed:40").choose(decision(setup, 1.0)) == 0  # beyond the max degree


def test_fixed_or_min_falls_back_to_min_feasible(setup):
    policy, fallback = make_policy("fixed-or-min:4"), make_policy("min-feasible")
    assert policy.choose(decision(setup, 0.5)) == 4
    strict = decision(setup, 0.2)
    assert policy.choose(strict) == fallback.choose(strict) > 4
    crowded = decision(setup, 1.0, busy=tuple(range(30)))
    assert policy.choose(crowded) == 1
    assert policy.choose(decision(setup, 0.05)) == 0          # nothing meets it: reject


@pytest.mark.parametrize("name, message", [
    ("fixed:0", "K must be an integer >= 1"), ("fixed:x", "K must be an integer >= 1"),
    ("fixed-or-min:", "K must be an integer >= 1"), ("fixed:-2", "K must be an integer >= 1"),
    ("fixedd:3", "unknown policy"), ("tuned:3", "unknown policy")])
def test_bad_parametric_names_are_one_line_input_errors(name, message):
    with pytest.raises(InputError, match=message) as err:
        make_policy(name)
    assert "\n" not in str(err.value)


def test_k_above_the_instance_max_degree_is_an_input_error(pipedream_env):
    instance = paper_instance("A", 0, num_jobs=5)
    with pytest.raises(InputError, match="at most the instance's max_partitions_per_op"):
        make_policy("fixed:17", instance)
    assert make_policy("fixed-or-min:16", instance).name == "fixed-or-min:16"


@pytest.mark.parametrize("dist", PAPER_DISTRIBUTIONS)
def test_a_paper_sample_is_recognised(dist):
    betas = paper_beta(dist).sample(np.random.default_rng(11), 300)
    assert nearest_paper_distribution(betas)[0] == dist


def test_the_tuned_file_lists_each_choice_and_it_is_the_best_candidate():
    data = load_tuned()
    assert data["tuning_seeds"] == list(TUNING_SEEDS)
    for preset, table in data["presets"].items():
        assert set(table) == set(PAPER_DISTRIBUTIONS)
        for entry in table.values():
            blocking = entry["blocking"]
            assert {"fixed:4", "fixed-or-min:16", "min-feasible", "para-max"} <= set(blocking)
            assert blocking[entry["choice"]] == min(blocking.values())
            make_policy(entry["choice"])  # a valid name


@pytest.mark.parametrize("dist", ["B", "D"])
def test_tuned_plays_the_choice_for_the_distribution_recognised_so_far(pipedream_env, dist):
    instance = paper_instance(dist, HELD_OUT_SEEDS[0], num_jobs=200)
    policy = make_policy("tuned", instance)
    solution = simulate(instance, policy, seed=0)
    assert policy.distribution == dist and policy.choice == tuned_choice(dist)
    assert solution.method == policy.name == f"tuned(online: {tuned_choice(dist)}, {dist})"
    # every decision counted; the recognised distribution's choice plays nearly all of them
    assert sum(policy.played.values()) == 200 and policy.played[tuned_choice(dist)] >= 180
    # the oracle variant plays the instance's own choice from the first job
    oracle = make_policy("tuned-given-label", instance)
    assert oracle.distribution == dist and oracle.choice == tuned_choice(dist)
    assert oracle.name == f"tuned-given-label({tuned_choice(dist)}, {dist})"
    reference = simulate(instance, make_policy(oracle.choice, instance), seed=0)
    assert [j.degree for j in simulate(instance, oracle, seed=0).jobs] == \
        [j.degree for j in reference.jobs]


def test_tuned_default_is_the_best_choice_on_average():
    table = load_tuned()["presets"]["ddls"]
    mean = {name: np.mean([table[d]["blocking"][name] for d in PAPER_DISTRIBUTIONS])
            for name in table["A"]["blocking"]}
    assert tuned_default_choice() == min(mean, key=mean.get)
    assert make_policy("tuned").default == tuned_default_choice()


def test_tuned_without_an_instance_uses_a(tmp_path):
    assert make_policy("tuned-given-label").choice == tuned_choice("A")
    bad = tmp_path / "tuned.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="missing or corrupt"):
        load_tuned(bad)


@pytest.mark.parametrize("placer, cluster", [("first-fit", CLUSTER), ("best-fit", CLUSTER),
                                             ("compact", CLUSTER),
                                             ("compact", RampCluster(8, 4, 4))])  # tiled
@pytest.mark.parametrize("preset", ["ddls", "physical"])
@pytest.mark.parametrize("beta, busy", [(0.5, ()), (0.2, (0, 1)), (0.13, (0, 5, 9)), (0.01, ())])
def test_min_feasible_times_only_the_degrees_it_reads(pipedream_dir, placer, cluster, preset,
                                                      beta, busy):
    """``min-feasible`` reads degree after degree (``Decision.in_time``) and stops at the first
    in time: the same answer and placement as the live options of every degree, with the other
    degrees never timed (the table's under ``ddls``, the footprints' under best fit and
    compact)."""
    graph = read_pipedream(pipedream_dir / "resnet18.txt")
    answers = []
    for lazy in (True, False):
        model = JctModel(cluster, ModelSettings(preset=preset), persist=False)
        table = model.table(graph)
        state = ClusterState(cluster)
        for i, server in enumerate(busy):
            state.mount(1000 + i, 1 << server, (server,), 1e9)
        d = Decision(job_index=0, job_id="j", graph=graph, max_jct_fraction=beta,
                     deadline_ms=beta * table.seq_jct_ms, table=table, state=state, model=model,
                     placer=placer)
        if not lazy:
            d.options()  # the live options first: the answer read from them
        degree = make_policy("min-feasible").choose(d)
        placement = d.placement(degree) if degree else None
        answers.append((degree, placement and placement.mask))
        highest = degree or table.max_degree
        if lazy and preset == "ddls":
            assert "_times" not in table.__dict__  # the whole table never read
            timed = set(table._degree_jcts)
            assert timed and max(timed) <= highest
        if lazy and preset == "physical" and placer != "first-fit":
            assert d._options is None
            timed = model.menu(table).timed
            assert timed and max(timed) <= highest
            assert len(timed) < table.max_degree or highest == table.max_degree
    assert answers[0] == answers[1]
