"""First-fit placement against the live cluster state, footprints and placement symmetry."""

import random

import pytest

from pacopt.model.first_fit import Placement, first_fit
from pacopt.model.jct import JctModel
from pacopt.model.partition import op_counts, partition
from pacopt.model.pipedream import read_pipedream
from pacopt.model.settings import ModelSettings
from pacopt.model.step import simulate_step
from pacopt.model.topology import RampCluster

CLUSTER = RampCluster()


def mask_of(*names):
    mask = 0
    for name in names:
        mask |= 1 << CLUSTER.server_index(name)
    return mask


@pytest.fixture(scope="module")
def alexnet(pipedream_dir):
    return read_pipedream(pipedream_dir / "alexnet.txt")


@pytest.fixture(scope="module")
def gnmt(pipedream_dir):
    return read_pipedream(pipedream_dir / "gnmt.txt")


def test_uniform_degree_reuses_one_block(alexnet):
    placement = first_fit(alexnet, op_counts(alexnet, 4, 0.01), CLUSTER)
    split = {b for b in placement.blocks if len(b.servers) == 4}
    assert len(split) == 1 and next(iter(split)).label == "0-0-0:2x2x1"
    assert placement.num_workers == 4


def test_footprint_depends_on_free_servers(gnmt):
    """docs/model.md: GNMT at 16 spreads over 21 workers on an empty cluster, but packs into a free
    (4,4,1) half when that is all there is."""
    counts = op_counts(gnmt, 16, 0.01)
    assert first_fit(gnmt, counts, CLUSTER).num_workers == 21
    first_half = CLUSTER.blocks(16)[0]
    packed = first_fit(gnmt, counts, CLUSTER, occupied=first_half.mask)
    assert packed.num_workers == 16
    assert packed.mask == CLUSTER.full_mask ^ first_half.mask


def test_unsplit_child_of_split_ops_can_land_outside_the_block(alexnet):
    """On a fragmented cluster AlexNet at degree 4 occupies 5 workers (the reference's episodes
    show this too): its ops take the first free 2x2x1 block, but the unsplit Size op goes to the
    first free server, which lies outside that block."""
    placement = first_fit(alexnet, op_counts(alexnet, 4, 0.01), CLUSTER, occupied=mask_of("0-1-0"))
    names = {CLUSTER.server_name(s) for s in placement.workers()}
    assert placement.num_workers == 5
    assert names == {"0-0-0", "0-0-1", "0-1-1", "1-0-1", "1-1-1"}


def test_busy_servers_are_never_used_and_no_room_means_none(alexnet):
    counts = op_counts(alexnet, 8, 0.01)
    busy = mask_of("0-0-0", "2-3-1")
    placement = first_fit(alexnet, counts, CLUSTER, occupied=busy)
    assert placement is not None and placement.mask & busy == 0
    all_but_three = CLUSTER.full_mask ^ mask_of("0-0-0", "1-0-0", "2-0-0")
    assert first_fit(alexnet, op_counts(alexnet, 4, 0.01), CLUSTER, occupied=all_but_three) is None
    assert first_fit(alexnet, op_counts(alexnet, 1, 0.01), CLUSTER, occupied=all_but_three) is not None


def test_memory_limits_placement(alexnet):
    """Ops that no longer fit on a worker's memory go to the next block (the forward ops of
    AlexNet need 1.5 GB); an op larger than any worker cannot be placed at all."""
    small = RampCluster(worker_memory=1e9)
    spilled = first_fit(alexnet, op_counts(alexnet, 1, 0.01), small)
    assert spilled.num_workers == 2
    tiny = RampCluster(worker_memory=1.5e8)  # Conv2d node2 holds 198 MB
    assert first_fit(alexnet, op_counts(alexnet, 1, 0.01), tiny) is None
    assert first_fit(alexnet, op_counts(alexnet, 2, 0.01), tiny) is not None


def test_symmetric_placements_share_one_timing(alexnet):
    """Relabelling groups, racks or slots leaves the JCT unchanged, so the model simulates a
    symmetry class once (physical preset: the JCT depends on the actual placement)."""
    model = JctModel(CLUSTER, ModelSettings(preset="physical"), persist=False)
    counts = op_counts(alexnet, 16, 0.01)
    a = first_fit(alexnet, counts, CLUSTER)
    b = first_fit(alexnet, counts, CLUSTER, occupied=a.mask)
    assert a.mask != b.mask and a.canonical_key(CLUSTER) == b.canonical_key(CLUSTER)
    assert model.timing(alexnet, counts, a) == model.timing(alexnet, counts, b)
    assert len(model._store(alexnet)) == 1


def test_placements_with_one_key_time_alike_wherever_their_blocks_lie(alexnet, gnmt):
    """The key leaves out where a job's blocks lie relative to each other (no collective spans
    two blocks), and nothing else: random placements that share a key share their step
    timing, and a one-server block in the split block's rack or in another group keeps it."""
    settings = ModelSettings(preset="physical")
    rng = random.Random(3)
    wide = RampCluster(communication_groups=8, racks_per_group=4, servers_per_rack=4)
    for cluster, graph, degree in ((CLUSTER, alexnet, 4), (CLUSTER, alexnet, 16),
                                   (CLUSTER, gnmt, 8), (CLUSTER, gnmt, 16), (wide, gnmt, 16)):
        counts = op_counts(graph, degree, 0.01)
        job = partition(graph, counts)
        timings, placements = {}, {}
        for _ in range(80):
            by_size = {m: rng.choice(cluster.blocks(m)) for m in set(counts)}
            placement = Placement(tuple(by_size[c] for c in counts))
            key = placement.canonical_key(cluster)
            step = simulate_step(job, placement, cluster, settings)
            assert timings.setdefault(key, step) == step, (graph.name, degree)
            placements.setdefault(key, set()).add(placement.blocks)
        assert any(len(same) > 1 for same in placements.values())  # classes were compared
    counts = op_counts(alexnet, 4, 0.01)
    split = first_fit(alexnet, counts, CLUSTER).blocks[counts.index(4)]
    near = next(b for b in CLUSTER.blocks(1) if b.servers[0] not in split.servers
                and CLUSTER.coords[b.servers[0]][:2] == CLUSTER.coords[split.servers[0]][:2])
    far = next(b for b in CLUSTER.blocks(1) if all(
        CLUSTER.coords[b.servers[0]][0] != CLUSTER.coords[s][0] for s in split.servers))
    a, b = (Placement(tuple(split if c == 4 else one for c in counts)) for one in (near, far))
    assert a.canonical_key(CLUSTER) == b.canonical_key(CLUSTER)
    job = partition(alexnet, counts)
    assert simulate_step(job, a, CLUSTER, settings) == simulate_step(job, b, CLUSTER, settings)


def test_physical_jct_depends_on_placement(alexnet):
    """Two-way ops on one rack's two servers versus across two groups: different collectives."""
    model = JctModel(CLUSTER, ModelSettings(preset="physical"), persist=False)
    counts = op_counts(alexnet, 2, 0.01)
    across = first_fit(alexnet, counts, CLUSTER)                       # (2,1,1): two groups
    two_slots = next(b for b in CLUSTER.blocks(2) if b.shape == (1, 1, 2))
    one_rack = Placement(tuple(two_slots if len(b.servers) == 2 else CLUSTER.blocks(1)[0]
                               for b in across.blocks))
    assert across.canonical_key(CLUSTER) != one_rack.canonical_key(CLUSTER)
    t1 = model.timing(alexnet, counts, across).jct_ms
    t2 = model.timing(alexnet, counts, one_rack).jct_ms
    assert t1 != t2
