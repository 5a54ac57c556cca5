"""The heuristic policies' rules, on hand-made cluster states."""

import math

import pytest

from pacopt.cluster.errors import InputError
from pacopt.cluster.jct import JctModel
from pacopt.cluster.pipedream import read_pipedream
from pacopt.cluster.policies import Decision, make_policy
from pacopt.cluster.settings import ModelSettings
from pacopt.cluster.state import ClusterState
from pacopt.cluster.topology import RampCluster

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
