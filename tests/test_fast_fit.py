"""The fast first-fit (integer-mask scan, cached by occupancy) and the live per-degree table equal
the plain reference first-fit on random cluster states, memory-bound cases included."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pacopt.model.decision import Decision
from pacopt.model.first_fit import FitPlan, first_fit, first_fit_reference
from pacopt.model.graph_sources import EXAMPLES_DIR, read_graph_file
from pacopt.model.jct import JctModel
from pacopt.model.partition import op_counts
from pacopt.model.pipedream import read_pipedream
from pacopt.model.settings import ModelSettings
from pacopt.model.state import ClusterState
from pacopt.model.topology import RampCluster

#: (C, R, S, worker memory): the paper's cluster, smaller and odd ones, and memories small enough
#: that an op's share can exceed a worker (the exact memory path).
CLUSTERS = [(4, 4, 2, 8e10), (2, 2, 2, 8e10), (3, 2, 1, 8e10), (4, 3, 3, 8e10),
            (4, 4, 2, 2.5e8), (4, 4, 2, 6e8), (2, 2, 2, 1e9), (4, 4, 1, 3e8)]
GRAPHS = ["alexnet", "gnmt", "resnet18", "cnn", "transformer"]

_graphs: dict = {}


def graph(pipedream_dir, name):
    if name not in _graphs:
        path = pipedream_dir / f"{name}.txt"
        _graphs[name] = (read_pipedream(path) if path.exists()
                         else read_graph_file(EXAMPLES_DIR / f"{name}.json"))
    return _graphs[name]


def cluster_of(spec):
    c, r, s, memory = spec
    return RampCluster(communication_groups=c, racks_per_group=r, servers_per_rack=s,
                       worker_memory=memory)


occupancies = st.tuples(st.integers(0, 2 ** 36 - 1), st.integers(0, 2 ** 36 - 1),
                        st.booleans())


def occupancy(cluster, draw):
    """A random busy set, denser or sparser: the AND/OR of two random masks."""
    a, b, dense = draw
    return (a | b if dense else a & b) & cluster.full_mask


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.sampled_from(CLUSTERS), name=st.sampled_from(GRAPHS), degree=st.integers(1, 16),
       draw=occupancies)
def test_fast_first_fit_equals_the_reference(pipedream_dir, spec, name, degree, draw):
    cluster, g = cluster_of(spec), graph(pipedream_dir, name)
    counts = op_counts(g, degree, 0.01)
    occupied = occupancy(cluster, draw)
    fast = first_fit(g, counts, cluster, occupied)
    slow = first_fit_reference(g, counts, cluster, occupied)
    assert (fast is None) == (slow is None)
    if slow is not None:
        assert fast.blocks == slow.blocks


def test_memory_bound_plans_take_the_exact_path(pipedream_dir):
    """The tests above must cover both paths: memory-free plans and plans where memory binds
    (and where it changes the placement against the first free block)."""
    alexnet = graph(pipedream_dir, "alexnet")
    counts = op_counts(alexnet, 2, 0.01)
    assert FitPlan.build(alexnet, counts, cluster_of(CLUSTERS[0])).memory_free
    small = cluster_of((4, 4, 2, 6e8))
    assert not FitPlan.build(alexnet, counts, small).memory_free
    one = op_counts(alexnet, 1, 0.01)
    spilled = first_fit_reference(alexnet, one, small)
    assert spilled.num_workers > 1  # memory pushed ops off the first free server
    assert first_fit(alexnet, one, small).blocks == spilled.blocks


@pytest.mark.parametrize("preset", ["ddls", "physical"])
@pytest.mark.parametrize("spec", [CLUSTERS[0], CLUSTERS[5]])
def test_live_options_match_the_reference_first_fit(pipedream_dir, preset, spec):
    cluster = cluster_of(spec)
    model = JctModel(cluster, ModelSettings(preset=preset), persist=False)
    rng = np.random.default_rng(3)
    for name in ("alexnet", "gnmt"):
        g = graph(pipedream_dir, name)
        table = model.table(g)
        for _ in range(25):
            busy = rng.random(cluster.num_servers) < rng.uniform(0.0, 0.8)
            state = ClusterState(cluster)
            for server in np.flatnonzero(busy):
                state.mount(int(server), 1 << int(server), (int(server),), 1e9)
            decision = Decision(job_index=0, job_id="j", graph=g, max_jct_fraction=0.5,
                                deadline_ms=0.5 * table.seq_jct_ms, table=table, state=state,
                                model=model)
            options = decision.options()
            assert decision.options() is options and not options.placeable[0]
            for d in range(table.max_degree + 1):
                slow = (first_fit_reference(g, table.counts[d], cluster, state.occupied)
                        if d and table.placed[d] else None)
                assert options.placeable[d] == (slow is not None)
                assert decision.placeable(d) == (slow is not None)
                if slow is None:
                    assert options.workers[d] == 0 and math.isinf(options.jct_ms[d])
                    assert decision.placement(d) is None
                    continue
                assert options.workers[d] == slow.num_workers
                assert decision.placement(d).blocks == slow.blocks
                expected = model.timing(g, table.counts[d], slow).jct_ms
                assert options.jct_ms[d] == expected == decision.jct_ms(d)
            assert decision.valid_degrees == tuple(np.flatnonzero(options.placeable))
            mask = decision.action_mask()
            assert mask[0] and list(mask[1:]) == list(options.placeable[1:])


def test_symmetry_key_of_a_choice_is_the_placements_canonical_key(pipedream_dir):
    """The physical JCT cache keys placements by their few chosen blocks: the classes must be
    exactly those of the per-op canonical key (equal keys <=> equal canonical keys)."""
    cluster = cluster_of(CLUSTERS[0])
    rng = np.random.default_rng(5)
    for name in ("alexnet", "gnmt"):
        g = graph(pipedream_dir, name)
        for degree in (2, 4, 8):
            plan = FitPlan.build(g, op_counts(g, degree, 0.01), cluster)
            pairs = {}
            for _ in range(150):
                occupied = int(sum(1 << int(s) for s in
                                   np.flatnonzero(rng.random(32) < rng.uniform(0, 0.7))))
                choice = plan.fit(occupied)
                if choice is not None:
                    pairs[plan.symmetry_key(choice)] = plan.placement(choice).canonical_key(cluster)
            assert len(pairs) >= 3  # several classes compared
            assert len(set(pairs.values())) == len(pairs)  # distinct keys, distinct classes
            for _ in range(150):  # and equal keys give equal canonical keys
                occupied = int(rng.integers(0, 2 ** 32))
                choice = plan.fit(occupied)
                if choice is not None and plan.symmetry_key(choice) in pairs:
                    assert (pairs[plan.symmetry_key(choice)]
                            == plan.placement(choice).canonical_key(cluster))
