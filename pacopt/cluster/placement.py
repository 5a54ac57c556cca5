"""Placement: the reference first-fit placer with parent reuse, and placement keys.

A placement gives every forward op a :class:`~pacopt.cluster.topology.Block` (its backward op uses
the same servers, sub-op j on ``block.servers[j]``). The job's footprint is the union of its blocks.

First-fit (``ddls-semantics.md`` 5.3): ops are visited in breadth-first topological order. An op
first tries the first parent (in dependency order) split the same number of ways and reuses its
block if those servers have the memory; otherwise it takes the first block, in the cluster's search
order, whose servers hold no other job and have the memory. The job's own servers stay usable by
its later ops. If an op finds no block, the whole job cannot be placed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property

from pacopt.cluster.graph import JobGraph
from pacopt.cluster.topology import Block, RampCluster


@dataclass(frozen=True)
class Placement:
    """One block per forward op, and the derived footprint."""

    blocks: tuple[Block, ...]
    _keys: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    @cached_property
    def mask(self) -> int:
        """Bit i set <=> the job uses server i."""
        mask = 0
        for block in self.blocks:
            mask |= block.mask
        return mask

    @property
    def num_workers(self) -> int:
        return self.mask.bit_count()

    def workers(self) -> tuple[int, ...]:
        """Server indices of the footprint, ascending."""
        mask, out = self.mask, []
        while mask:
            low = mask & -mask
            out.append(low.bit_length() - 1)
            mask ^= low
        return tuple(out)

    def memory_use(self, graph: JobGraph) -> dict[int, float]:
        """Bytes each server holds: every forward op's memory split over its block (the backward
        op shares it, as in the reference placer)."""
        used: dict[int, float] = {}
        for op, block in zip(graph.ops, self.blocks):
            share = op.memory_bytes / len(block.servers)
            for server in block.servers:
                used[server] = used.get(server, 0.0) + share
        return used

    def canonical_key(self, cluster: RampCluster) -> str:
        """A key shared by every placement that a relabelling of communication groups, of racks and
        of server slots maps onto this one (a digest of the block sizes and of the coordinates
        renumbered by first appearance). The JCT model only looks at which coordinates are equal
        (same server, number of distinct groups/racks/slots), so it is invariant under these
        symmetries and one simulation serves the whole class. Memoised: placements are cached
        and re-timed often."""
        if cluster not in self._keys:
            relabel: tuple[dict, dict, dict] = ({}, {}, {})
            key = [len(block.servers) for block in self.blocks]
            for block in self.blocks:
                for server in block.servers:
                    for axis, value in enumerate(cluster.coords[server]):
                        key.append(relabel[axis].setdefault(value, len(relabel[axis])))
            self._keys[cluster] = hashlib.blake2b(repr(key).encode(), digest_size=12).hexdigest()
        return self._keys[cluster]


def first_fit(graph: JobGraph, counts: tuple[int, ...], cluster: RampCluster,
              occupied: int = 0) -> Placement | None:
    """Place a job with per-op ``counts`` on the servers not in the ``occupied`` bitmask.

    Returns ``None`` when some op finds no block (the job is blocked for lack of placement).
    """
    capacity = cluster.worker_memory
    used: dict[int, float] = {}
    blocks: list[Block | None] = [None] * graph.num_ops
    for k in graph.topological_order:
        m = counts[k]
        need = graph.ops[k].memory_bytes
        chosen = None
        parent = next((blocks[p] for p in graph.predecessors[k] if len(blocks[p].servers) == m), None)
        if parent is not None and sum(capacity - used.get(s, 0.0) for s in parent.servers) >= need:
            chosen = parent
        if chosen is None:
            share = need / m
            for block in cluster.blocks(m):
                if block.mask & occupied:
                    continue
                if used and any(capacity - used.get(s, 0.0) < share for s in block.servers):
                    continue
                if not used and capacity < share:
                    break  # no block can ever hold this op
                chosen = block
                break
        if chosen is None:
            return None
        for s in chosen.servers:
            used[s] = used.get(s, 0.0) + need / m
        blocks[k] = chosen
    return Placement(tuple(blocks))
