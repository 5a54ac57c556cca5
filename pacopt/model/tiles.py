"""Tiles: a large RAMP cluster seen as aligned copies of one small one.

Footprint work grows far faster than the cluster: the candidate footprints of a degree are the
inclusion-minimal unions of one block per distinct split count *anywhere on the cluster*
(:func:`~pacopt.model.placers.footprints`), and best fit scores each of them against every
RAMP block it could break (:class:`~pacopt.model.placers.FreeBlockScore`). On 4x4x2 that is a
few hundred footprints; on 8x4x4 GNMT alone has tens of thousands, and 16x16x4 is out of reach.

RAMP's blocks nest like a buddy allocator's, and the JCT model is invariant under relabelling
groups and racks (:meth:`~pacopt.model.first_fit.Placement.canonical_key`). So a cluster of
C x R x S is cut into aligned **tiles** of ``c x r x S``, ``c`` the largest divisor of C up to 4
and ``r`` of R up to ``c`` (the paper's 4x4 groups and racks where 4 divides; with 2 servers per
rack such a tile *is* the paper's cluster; 6x6x4 gives 3x3x4 tiles), and the
footprints considered are those that lie inside one tile. Every tile is a translate of the
first, so the footprints, their memory check, their timings and the blocks each one breaks are
computed once, on the tile, and a tile's scores are cached by the tile's own occupancy (a
decision changes one or two tiles). :func:`tiling` is None when the cluster is a single tile
(there nothing changes) or when its tiles would hold fewer than 16 servers (a prime number of
groups, say): such a cluster's footprints are enumerated in full.

What the rule gives up, stated: a footprint that straddles two tiles, and blocks that exist only
across tiles (a (5,1,1) block needs 5 groups), are not candidates; a degree with no candidate
free in any tile is placed by first-fit instead (:mod:`pacopt.model.jct`), so that every
degree first-fit can place stays placeable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from pacopt.model.first_fit import Placement
from pacopt.model.topology import Block, RampCluster

#: A tile's communication groups and racks per group at most (fewer where they do not divide
#: the cluster's: the largest divisor below).
TILE_GROUPS = 4
TILE_RACKS = 4
#: Smaller tiles would leave a 16-way job no footprint inside one: such clusters are not tiled.
MIN_TILE_SERVERS = 16


@lru_cache(maxsize=32)
def tiling(cluster: RampCluster) -> Tiling | None:
    """The tiling of ``cluster`` (module doc), or None when the cluster is one tile or a tile
    would hold fewer than :data:`MIN_TILE_SERVERS` servers."""
    C, R, S = cluster.dims
    tc = _side(C, TILE_GROUPS)
    tr = _side(R, min(TILE_RACKS, tc))  # a RAMP cluster has no more racks than groups
    if (C // tc) * (R // tr) == 1 or tc * tr * S < MIN_TILE_SERVERS:
        return None
    tile = RampCluster(tc, tr, S, cluster.channels, cluster.total_node_bandwidth,
                       cluster.propagation_latency, cluster.worker_io_latency,
                       cluster.worker_memory)
    origins = tuple((c0, r0) for c0 in range(0, C, tc) for r0 in range(0, R, tr))
    return Tiling(cluster, tile, origins)


def _side(count: int, cap: int) -> int:
    """The largest divisor of ``count`` that is at most ``cap``: tiles cover the cluster."""
    return max(d for d in range(1, min(count, cap) + 1) if count % d == 0)


@dataclass(frozen=True)
class Tiling:
    """``cluster`` as the translates of ``tile`` at ``origins`` ((group, rack) of each tile's
    first server, in server order)."""

    cluster: RampCluster
    tile: RampCluster
    origins: tuple[tuple[int, int], ...]
    _blocks: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def num_tiles(self) -> int:
        return len(self.origins)

    @cached_property
    def _runs(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """Per tile, (first cluster server, first tile server) of each run of its servers that
        is contiguous in both numberings: one per group (its racks' servers are consecutive)."""
        cluster, tile = self.cluster, self.tile
        return tuple(tuple((cluster.index(c0 + c, r0, 0), tile.index(c, 0, 0))
                           for c in range(tile.communication_groups))
                     for c0, r0 in self.origins)

    @cached_property
    def _run_bits(self) -> int:
        return (1 << (self.tile.racks_per_group * self.tile.servers_per_rack)) - 1

    def local_masks(self, mask: int) -> list[int]:
        """``mask`` (cluster servers) cut into one tile-local mask per tile."""
        bits, out = self._run_bits, []
        for runs in self._runs:
            local = 0
            for start, at in runs:
                local |= ((mask >> start) & bits) << at
            out.append(local)
        return out

    def cluster_mask(self, local: int, t: int) -> int:
        """Tile ``t``'s servers of the tile-local mask ``local``, as a cluster mask (the inverse
        of :meth:`local_masks` for one tile)."""
        bits, mask = self._run_bits, 0
        for start, at in self._runs[t]:
            mask |= ((local >> at) & bits) << start
        return mask

    def block(self, block: Block, t: int) -> Block:
        """The cluster's block that is tile ``t``'s copy of the tile block ``block``."""
        key = (block.servers, block.shape, t)
        found = self._blocks.get(key)
        if found is None:
            c0, r0 = self.origins[t]
            cluster, coords = self.cluster, self.tile.coords
            servers = tuple(cluster.index(coords[s][0] + c0, coords[s][1] + r0, coords[s][2])
                            for s in block.servers)
            mask = 0
            for s in servers:
                mask |= 1 << s
            c, r, s = block.origin
            found = self._blocks[key] = Block(block.shape, (c + c0, r + r0, s), servers, mask)
        return found

    def placement(self, placement: Placement, t: int) -> Placement:
        """Tile ``t``'s copy of a placement on the tile, in cluster servers."""
        # ops share a few blocks: translate each distinct one once, then look them up by identity
        distinct = {id(block): block for block in placement.blocks}
        copies = {key: self.block(block, t) for key, block in distinct.items()}
        return Placement.of(tuple([copies[id(block)] for block in placement.blocks]),
                            copies.values())
