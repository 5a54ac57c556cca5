"""Placement: the reference first-fit placer with parent reuse, and placement keys.

A placement gives every forward op a :class:`~pacopt.model.topology.Block` (its backward op uses
the same servers, sub-op j on ``block.servers[j]``). The job's footprint is the union of its blocks.

First-fit (``docs/model.md#first-fit``): ops are visited in breadth-first topological order. An op
first tries the first parent (in dependency order) split the same number of ways and reuses its
block if those servers have the memory; otherwise it takes the first block, in the cluster's search
order, whose servers hold no other job and have the memory. The job's own servers stay usable by
its later ops. If an op finds no block, the whole job cannot be placed.

The fast form (:class:`FitPlan`, behind :func:`first_fit`) rests on one observation: when memory
cannot bind (every op's share fits on a server even if all of the job's shares landed on it),
every op split ``m`` ways gets the first free block of size ``m`` (a reused parent block of size
``m`` is that block too), so the placement is one first-free-block look-up per distinct count, a
scan of integer masks cached by occupancy (:meth:`RampCluster.free_block`). Otherwise the plan
runs the exact op-by-op scan. :func:`first_fit_reference` keeps the plain algorithm as the oracle.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property

from pacopt.infra.bounded_cache import BoundedCache
from pacopt.model.graph import JobGraph
from pacopt.model.topology import Block, RampCluster, servers_of


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

    @classmethod
    def of(cls, blocks: tuple[Block, ...], distinct) -> Placement:
        """The placement of ``blocks`` (one per op), its mask taken from ``distinct``, the few
        different blocks among them, instead of from every op's."""
        placement = cls(blocks)
        mask = 0
        for block in distinct:
            mask |= block.mask
        placement.__dict__["mask"] = mask  # the cached property's value
        return placement

    @property
    def num_workers(self) -> int:
        return self.mask.bit_count()

    def workers(self) -> tuple[int, ...]:
        """Server indices of the footprint, ascending (memoised: conflict rows ask often)."""
        return self._workers

    @cached_property
    def _workers(self) -> tuple[int, ...]:
        return servers_of(self.mask)

    def memory_use(self, graph: JobGraph) -> dict[int, float]:
        """Bytes each server holds: every forward op's memory split over its block (the backward
        op shares it, as in the reference placer)."""
        used: dict[int, float] = {}
        for op, block in zip(graph.ops, self.blocks):
            share = op.memory_bytes / len(block.servers)
            for server in block.servers:
                used[server] = used.get(server, 0.0) + share
        return used

    def fits_memory(self, graph: JobGraph, capacity: float) -> bool:
        """Whether no server holds more than ``capacity`` bytes (:meth:`memory_use`); sure at
        once when the whole graph fits one server, as the paper's graphs do (with a margin for
        the rounding of the per-server sums)."""
        return graph.memory_bytes * (1 + 1e-9) <= capacity or all(
            used <= capacity for used in self.memory_use(graph).values())

    def canonical_key(self, cluster: RampCluster) -> str:
        """A key shared by every placement that times as this one: a digest of
        :func:`relabelled`'s blocks, servers and coordinates. The step simulation reads only
        which sub-ops share a server and how many groups, racks and slots a collective's
        servers span, and every collective's servers lie in one op's block, so one simulation
        serves the whole class. Memoised: placements are cached and re-timed often."""
        if cluster not in self._keys:
            servers = tuple(block.servers for block in self.blocks)  # all the key depends on
            key = _CANONICAL.get((cluster, servers))
            if key is None:
                key = _CANONICAL.put((cluster, servers), hashlib.blake2b(
                    repr(relabelled(self.blocks, cluster)).encode(), digest_size=12).hexdigest())
            self._keys[cluster] = key
        return self._keys[cluster]


#: Canonical keys by (cluster, the blocks' servers): placements are rebuilt for every decision,
#: their footprints recur (a pure function of the geometry, so the validator may share it).
_CANONICAL = BoundedCache(100_000)


def relabelled(blocks, cluster: RampCluster) -> list[int]:
    """Each block's place among the distinct blocks (by first appearance), then per distinct
    block its size, its servers numbered by first appearance over all the blocks, and its
    servers' coordinates, each axis numbered by first appearance within the block. Two block
    sequences with equal lists share servers alike and span alike inside every block, so they
    time alike (:meth:`Placement.canonical_key`); where the blocks lie relative to each other,
    in the same rack or not, is left out, because no collective spans two blocks: a split op's
    sync pairs are in its block, and its fan-out is a collective only when its destinations
    are its sources' servers. A block repeated (every op of one split count shares one) is
    described once."""
    ids: dict[int, int] = {}
    coords = cluster.coords
    place: dict[tuple[int, ...], int] = {}
    parts: list[int] = []
    out = []
    for block in blocks:
        at = place.get(block.servers)
        if at is None:
            at = place[block.servers] = len(place)
            relabel: tuple[dict, dict, dict] = ({}, {}, {})
            parts.append(len(block.servers))
            parts += [ids.setdefault(server, len(ids)) for server in block.servers]
            parts += [relabel[axis].setdefault(value, len(relabel[axis]))
                      for server in block.servers for axis, value in enumerate(coords[server])]
        out.append(at)
    return out + parts


def first_fit_reference(graph: JobGraph, counts: tuple[int, ...], cluster: RampCluster,
                        occupied: int = 0) -> Placement | None:
    """The plain reference first-fit, op by op (the test oracle of :func:`first_fit`)."""
    blocks = _scan(graph, counts, cluster, occupied)
    return None if blocks is None else Placement(blocks)


def _scan(graph: JobGraph, counts: tuple[int, ...], cluster: RampCluster,
          occupied: int) -> tuple[Block, ...] | None:
    """One block per op by the reference's rules, memory checked exactly; None if some op finds
    no block."""
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
    return tuple(blocks)


#: Relative slack kept below worker memory before memory is declared unable to bind, so that the
#: float sums of the exact scan can never decide differently from the fast path.
_MEMORY_SLACK = 1e-9


@dataclass(frozen=True)
class FitPlan:
    """First-fit of one graph at fixed per-op ``counts``, prepared once per cluster.

    :meth:`fit` returns a *choice*: with ``memory_free``, the first free block of each size in
    ``sizes`` (in that order); otherwise the exact per-op blocks. A choice fixes the placement, and
    :meth:`symmetry_key` keys what depends on it only up to the topology's symmetries (its JCT).
    """

    graph: JobGraph
    counts: tuple[int, ...]
    cluster: RampCluster
    sizes: tuple[int, ...]
    memory_free: bool

    @classmethod
    def build(cls, graph: JobGraph, counts: tuple[int, ...], cluster: RampCluster) -> FitPlan:
        """Prepare the plan: the distinct counts and whether memory can ever bind."""
        if len(counts) != graph.num_ops:
            raise ValueError(f"{len(counts)} counts for {graph.num_ops} ops of '{graph.name}'")
        # all of the job's shares on one server still fit => no memory check can fail
        worst = sum(op.memory_bytes / m for op, m in zip(graph.ops, counts))
        memory_free = worst <= cluster.worker_memory * (1 - _MEMORY_SLACK)
        return cls(graph, counts, cluster, tuple(dict.fromkeys(counts)), memory_free)

    def fit(self, occupied: int) -> tuple[Block, ...] | None:
        """The choice of blocks avoiding ``occupied`` (see the class doc); None: no room."""
        if not self.memory_free:
            return _scan(self.graph, self.counts, self.cluster, occupied)
        free_block = self.cluster.free_block
        if free_block(max(self.sizes), occupied) is None:  # the likeliest to fail, asked first
            return None
        choice = []
        for m in self.sizes:
            block = free_block(m, occupied)
            if block is None:
                return None
            choice.append(block)
        return tuple(choice)

    def footprint(self, choice: tuple[Block, ...]) -> int:
        """The workers (bitmask) a choice occupies."""
        mask = 0
        for block in choice:
            mask |= block.mask
        return mask

    def symmetry_key(self, choice: tuple[Block, ...]) -> tuple[int, ...]:
        """A key shared by the choices whose placements have the same
        :meth:`Placement.canonical_key`, computed from the few chosen blocks, not from every op:
        the per-op blocks repeat the choice's blocks in first-appearance order (``sizes`` are
        in op order), so the renumbering, and with it the canonical key, follows from it."""
        return tuple(relabelled(choice, self.cluster))

    def placement(self, choice: tuple[Block, ...]) -> Placement:
        """The full placement (one block per op) a choice stands for."""
        if not self.memory_free:
            return Placement(choice)
        by_size = dict(zip(self.sizes, choice))
        return Placement(tuple(by_size[m] for m in self.counts))


def first_fit(graph: JobGraph, counts: tuple[int, ...], cluster: RampCluster,
              occupied: int = 0) -> Placement | None:
    """Place a job with per-op ``counts`` on the servers not in the ``occupied`` bitmask.

    Returns ``None`` when some op finds no block (the job is blocked for lack of placement).
    Equal to :func:`first_fit_reference`; hot paths keep the :class:`FitPlan` (``JctModel`` does).
    """
    plan = FitPlan.build(graph, counts, cluster)
    choice = plan.fit(occupied)
    return None if choice is None else plan.placement(choice)
