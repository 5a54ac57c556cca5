"""Partitioning: a degree becomes per-op split counts, and counts become a partitioned job graph.

The job graph is the forward graph, its mirrored backward graph (forward edge u->v gives backward
edge b(v)->b(u)) and one join edge from the forward sink to its backward op. Op ``i < n`` is forward
op i, op ``n + i`` its backward op. Splitting op x into p sub-ops divides compute and memory by p and
connects sub-ops to the neighbours' sub-ops all-to-all; a split backward op also gets sync
(all-reduce) dependencies between every ordered pair of its sub-ops.

Dependency sizes (a deliberate, documented departure from the reference, whose sizes depend on the
order in which ops are split): a data dependency carries the activation it moves, ``act(u)`` for
forward edge u->v and for the gradient edge b(v)->b(u), spread evenly over its ``p_u * p_v``
sub-edges; a sync dependency carries the sub-op's parameter-gradient shard, ``param(x) / p``.
Zero-byte sync dependencies never cost time or gate anything, so they are left out.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import chain

import numpy as np

from pacopt.model.graph import JobGraph


def op_count(forward_ms: float, degree: int, quantum_ms: float) -> int:
    """PAC-ML's rule: ``min(degree, smallest even number >= ceil(c / quantum))``, 1 when c = 0."""
    if degree <= 0:
        raise ValueError("degree must be >= 1 (0 means reject and has no partitioning)")
    if forward_ms <= 0:
        return 1
    even = 2 * math.ceil(math.ceil(forward_ms / quantum_ms) / 2)
    return max(1, min(even, degree))


def op_counts(graph: JobGraph, degree: int, quantum_ms: float) -> tuple[int, ...]:
    """Split count of every forward op (its backward op gets the same) at a job-level degree."""
    return tuple(op_count(op.forward_ms, degree, quantum_ms) for op in graph.ops)


# Dependency kinds: data deps gate their child; sync deps are all-reduce traffic that only has to
# finish before the step does.
DATA, SYNC = 0, 1


@dataclass(frozen=True)
class PartitionedJob:
    """The partitioned job graph of ``graph`` at per-op ``counts``, independent of placement.

    Sub-ops are numbered op by op (forward ops 0..n-1, then backward ops), ``offsets[o] + j`` being
    sub-op j of op o. Dependencies are listed with their size and the communication group they
    belong to (``groups``): ``("fanout", deps)`` are one split op's outgoing forward sub-edges or its
    backward op's incoming gradient sub-edges, a collective when the placement makes source and
    destination servers the same multiset; ``("pair", deps)`` is one sync pair, always a collective;
    ``("single", deps)`` are one-to-one transfers.
    """

    graph: JobGraph
    counts: tuple[int, ...]
    offsets: tuple[int, ...]          # per job op (2n), first sub-op index
    sub_compute: tuple[float, ...]    # ms, per sub-op
    sub_op: tuple[int, ...]           # job op of each sub-op
    sub_slot: tuple[int, ...]         # slot j of each sub-op (server = block.servers[j])
    dep_src: tuple[int, ...]
    dep_dst: tuple[int, ...]
    dep_kind: tuple[int, ...]
    dep_size: tuple[float, ...]       # bytes
    groups: tuple[tuple[str, tuple[int, ...]], ...]

    @property
    def num_sub_ops(self) -> int:
        return len(self.sub_compute)

    @property
    def num_deps(self) -> int:
        return len(self.dep_src)

    # What the step simulation reads besides the fields. :func:`partition` fills them from the
    # structure it builds; a job made otherwise (``dataclasses.replace``) derives them here.
    @cached_property
    def leaving(self) -> tuple[tuple[int, ...], ...]:
        """The dependencies leaving each sub-op, ascending."""
        out: list[list[int]] = [[] for _ in range(self.num_sub_ops)]
        for d, s in enumerate(self.dep_src):
            out[s].append(d)
        return tuple(map(tuple, out))

    @cached_property
    def data_in_degree(self) -> tuple[int, ...]:
        """How many data dependencies each sub-op waits for."""
        waits = [0] * self.num_sub_ops
        for k, t in zip(self.dep_kind, self.dep_dst):
            if k == DATA:
                waits[t] += 1
        return tuple(waits)

    @cached_property
    def sub_priority(self) -> tuple[int, ...]:
        """Each sub-op's allocation rank: twice its forward op's position in the graph's
        topological order, plus one for a backward op (a worker runs, among ready sub-ops of
        equal compute, the later allocated first)."""
        n = self.graph.num_ops
        position = {k: i for i, k in enumerate(self.graph.topological_order)}
        return tuple(2 * position[o % n] + (o >= n) for o in self.sub_op)

    @cached_property
    def dep_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The dependencies' source and target sub-ops and whether they carry bytes, as arrays:
        the step simulation finds every dependency's channel at once."""
        return (np.array(self.dep_src, dtype=np.int32), np.array(self.dep_dst, dtype=np.int32),
                np.array(self.dep_size, dtype=float) > 0)

    @cached_property
    def group_bytes(self) -> tuple[float, ...]:
        """The bytes each of :attr:`groups` carries in total."""
        return tuple(math.fsum([self.dep_size[d] for d in deps]) for _, deps in self.groups)

    @cached_property
    def group_ends(self) -> tuple[tuple[dict[int, int], dict[int, int]] | None, ...]:
        """Each fanout group's source and destination sub-ops with their multiplicities (None
        for the other groups): its servers, without walking its p_u x p_v sub-edges."""
        return tuple(None if kind != "fanout" else
                     tuple(dict(Counter(ends[d] for d in deps))
                           for ends in (self.dep_src, self.dep_dst))
                     for kind, deps in self.groups)


@lru_cache(maxsize=256)
def partition(graph: JobGraph, counts: tuple[int, ...]) -> PartitionedJob:
    """Build the partitioned job graph (cached: the structure is reused across placements)."""
    n = graph.num_ops
    if len(counts) != n or any(p < 1 for p in counts):
        raise ValueError(f"need one count >= 1 per op of '{graph.name}' ({n} ops)")
    p_of = [counts[o % n] for o in range(2 * n)]
    offsets, sub_compute, sub_op, sub_slot = [], [], [], []
    for o in range(2 * n):
        op = graph.ops[o % n]
        cost = (op.forward_ms if o < n else op.backward_ms) / p_of[o]
        offsets.append(len(sub_compute))
        sub_compute += [cost] * p_of[o]
        sub_op += [o] * p_of[o]
        sub_slot += range(p_of[o])

    src: list[int] = []
    dst: list[int] = []
    kind: list[int] = []
    size: list[float] = []
    leaving: list[list[int]] = [[] for _ in sub_compute]
    waits = [0] * len(sub_compute)

    def connect(a: int, b: int, nbytes: float) -> tuple[range, dict, dict]:
        """All-to-all sub-edges between job ops a and b carrying nbytes in total: the new
        dependencies, and their source and destination sub-ops with multiplicities."""
        first, pa, pb = len(src), p_of[a], p_of[b]
        targets = list(range(offsets[b], offsets[b] + pb))
        for i in range(pa):
            src.extend([offsets[a] + i] * pb)
            dst.extend(targets)
            leaving[offsets[a] + i].extend(range(first + i * pb, first + (i + 1) * pb))
        for j in targets:
            waits[j] += pa
        kind.extend([DATA] * (pa * pb))
        size.extend([nbytes / (pa * pb)] * (pa * pb))
        return (range(first, len(src)), {offsets[a] + i: pb for i in range(pa)},
                dict.fromkeys(targets, pa))

    out_edges: list[list] = [[] for _ in range(n)]  # forward sub-edges leaving op k
    grad_in: list[list] = [[] for _ in range(n)]    # gradient sub-edges entering b(k)
    for u, v in graph.deps:
        out_edges[u].append(connect(u, v, graph.ops[u].activation_bytes))
    for u, v in graph.deps:
        grad_in[u].append(connect(n + v, n + u, graph.ops[u].activation_bytes))
    join = connect(graph.join, n + graph.join, graph.ops[graph.join].activation_bytes)
    out_edges[graph.join].append(join)
    grad_in[graph.join].append(join)

    groups: list[tuple[str, tuple[int, ...]]] = []
    ends: list = []
    totals: list[float] = []
    for k in range(n):
        for links in (out_edges[k], grad_in[k]):
            if links:
                groups.append(("fanout" if counts[k] > 1 else "single",
                               tuple(chain.from_iterable(deps for deps, _, _ in links))))
                ends.append(None if counts[k] == 1 else
                            tuple(_merged([link[side] for link in links]) for side in (1, 2)))
                totals.append(math.fsum(chain.from_iterable(
                    size[deps.start:deps.stop] for deps, _, _ in links)))
        shard = graph.ops[k].parameter_bytes / counts[k]
        if counts[k] > 1 and shard > 0:
            b0, first = offsets[n + k], len(src)
            pairs = [(b0 + i, b0 + j) for i in range(counts[k]) for j in range(i + 1, counts[k])]
            src.extend([x for pair in pairs for x in pair])
            dst.extend([x for a, b in pairs for x in (b, a)])
            kind.extend([SYNC] * (2 * len(pairs)))
            size.extend([shard] * (2 * len(pairs)))
            for q, (a, b) in enumerate(pairs):
                leaving[a].append(first + 2 * q)
                leaving[b].append(first + 2 * q + 1)
            groups += [("pair", (d, d + 1)) for d in range(first, len(src), 2)]
            ends += [None] * len(pairs)
            totals += [2 * shard] * len(pairs)  # the fsum of two equal sizes
    job = PartitionedJob(graph=graph, counts=tuple(counts), offsets=tuple(offsets),
                         sub_compute=tuple(sub_compute), sub_op=tuple(sub_op),
                         sub_slot=tuple(sub_slot), dep_src=tuple(src), dep_dst=tuple(dst),
                         dep_kind=tuple(kind), dep_size=tuple(size), groups=tuple(groups))
    job.__dict__.update(  # the cached properties, known here without walking every dependency
        leaving=tuple(map(tuple, leaving)), data_in_degree=tuple(waits), group_ends=tuple(ends),
        group_bytes=tuple(totals))
    return job


def _merged(counts: list[dict[int, int]]) -> dict[int, int]:
    """Multiplicities summed over ``counts`` (the one itself when alone: read only)."""
    if len(counts) == 1:
        return counts[0]
    out: dict[int, int] = {}
    for count in counts:
        for key, m in count.items():
            out[key] = out.get(key, 0) + m
    return out
