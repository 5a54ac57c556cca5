"""RAMP block shapes and blocks on the PAC-ML 4x4x2 cluster (docs/model.md#blocks-and-shapes)."""

import pytest

from pacopt.infra.errors import InputError
from pacopt.model.topology import DIAGONAL, RampCluster

CLUSTER = RampCluster()

# The shapes first-fit tries, in order, for each group size (diagonals written (m, m, -1)).
SHAPES = {
    1: [(1, 1, 1)],
    2: [(2, 1, 1), (1, 1, 2), (1, 2, 1), (2, 2, DIAGONAL)],
    3: [(3, 1, 1), (3, 3, DIAGONAL)],
    4: [(2, 2, 1), (4, 1, 1), (2, 1, 2), (4, 4, DIAGONAL)],
    6: [(3, 1, 2), (3, 2, 1)],
    8: [(2, 2, 2), (4, 1, 2), (4, 2, 1)],
    9: [(3, 3, 1)],
    16: [(4, 4, 1)],
    32: [(4, 4, 2)],
}


@pytest.mark.parametrize("m", sorted(SHAPES))
def test_block_shapes_in_search_order(m):
    used = []
    for block in CLUSTER.blocks(m):
        if block.shape not in used:
            used.append(block.shape)
        assert len(block.servers) == len(set(block.servers)) == m
    assert used == SHAPES[m]


@pytest.mark.parametrize("m", [5, 7, 10, 11, 12, 13, 14, 15, 33])
def test_sizes_without_a_shape(m):
    assert CLUSTER.blocks(m) == ()


def test_first_blocks_and_orders():
    sixteen = CLUSTER.blocks(16)
    assert [CLUSTER.server_name(s) for s in sixteen[0].servers][:3] == ["0-0-0", "0-1-0", "0-2-0"]
    assert sixteen[1].label == "0-0-1:4x4x1"
    diag = next(b for b in CLUSTER.blocks(4) if b.shape[2] == DIAGONAL)
    assert [CLUSTER.coords[s] for s in diag.servers] == [(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 3, 0)]
    assert CLUSTER.placeable_sizes(16) == (1, 2, 3, 4, 6, 8, 9, 16)


def test_block_labels_round_trip_and_reject_bad_ones():
    for m in (1, 2, 4, 8, 16):
        for block in CLUSTER.blocks(m):
            assert CLUSTER.block_from_label(block.label, m) == block
    with pytest.raises(InputError):
        CLUSTER.block_from_label("0-0-0:4x4x1", 8)      # wrong size for the op
    with pytest.raises(InputError):
        CLUSTER.block_from_label("1-0-0:4x4x1", 16)     # would wrap around
    with pytest.raises(InputError):
        CLUSTER.server_index("4-0-0")


def test_cluster_rejects_bad_configuration():
    with pytest.raises(InputError, match="racks_per_group"):
        RampCluster(communication_groups=2, racks_per_group=4)
    with pytest.raises(InputError, match="servers_per_rack"):
        RampCluster(servers_per_rack=0)
    assert RampCluster().channel_bandwidth == 4e11
