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
from dataclasses import dataclass
from functools import lru_cache

from pacopt.cluster.graph import JobGraph


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
        for j in range(p_of[o]):
            sub_compute.append(cost)
            sub_op.append(o)
            sub_slot.append(j)

    src: list[int] = []
    dst: list[int] = []
    kind: list[int] = []
    size: list[float] = []

    def connect(a: int, b: int, nbytes: float) -> tuple[int, ...]:
        """All-to-all sub-edges between job ops a and b carrying nbytes in total."""
        first = len(src)
        each = nbytes / (p_of[a] * p_of[b])
        for i in range(p_of[a]):
            for j in range(p_of[b]):
                src.append(offsets[a] + i)
                dst.append(offsets[b] + j)
                kind.append(DATA)
                size.append(each)
        return tuple(range(first, len(src)))

    out_edges: list[list[int]] = [[] for _ in range(n)]  # forward sub-edges leaving op k
    grad_in: list[list[int]] = [[] for _ in range(n)]    # gradient sub-edges entering b(k)
    for u, v in graph.deps:
        out_edges[u] += connect(u, v, graph.ops[u].activation_bytes)
    for u, v in graph.deps:
        grad_in[u] += connect(n + v, n + u, graph.ops[u].activation_bytes)
    join = connect(graph.join, n + graph.join, graph.ops[graph.join].activation_bytes)
    out_edges[graph.join] += join
    grad_in[graph.join] += join

    groups: list[tuple[str, tuple[int, ...]]] = []
    for k in range(n):
        for edges in (out_edges[k], grad_in[k]):
            if edges:
                groups.append(("fanout" if counts[k] > 1 else "single", tuple(edges)))
        shard = graph.ops[k].parameter_bytes / counts[k]
        if counts[k] > 1 and shard > 0:
            b0 = offsets[n + k]
            for i in range(counts[k]):
                for j in range(i + 1, counts[k]):
                    first = len(src)
                    src.extend((b0 + i, b0 + j))
                    dst.extend((b0 + j, b0 + i))
                    kind.extend((SYNC, SYNC))
                    size.extend((shard, shard))
                    groups.append(("pair", (first, first + 1)))
    return PartitionedJob(graph=graph, counts=tuple(counts), offsets=tuple(offsets),
                          sub_compute=tuple(sub_compute), sub_op=tuple(sub_op),
                          sub_slot=tuple(sub_slot), dep_src=tuple(src), dep_dst=tuple(dst),
                          dep_kind=tuple(kind), dep_size=tuple(size), groups=tuple(groups))
