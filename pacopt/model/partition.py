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
import threading
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache

import numpy as np

from pacopt.infra.arrays import concatenated_ranges
from pacopt.infra.bounded_cache import BoundedCache
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
# Communication group kinds (:class:`PartitionedJob`).
SINGLE, FANOUT, PAIR = 0, 1, 2


@dataclass(frozen=True, eq=False)
class PartitionedJob:
    """The partitioned job graph of ``graph`` at per-op ``counts``, independent of placement, as
    arrays (a job split 64 ways has hundreds of thousands of dependencies).

    Sub-ops are numbered op by op (forward ops 0..n-1, then backward ops), ``offsets[o] + j`` being
    sub-op j of op o. Dependencies are listed with their size; communication groups by kind
    (``group_kind``) and members (``member_group``, ``member_dep``: one row per membership,
    groups ascending): a ``FANOUT`` group is one split op's outgoing forward sub-edges or its
    backward op's incoming gradient sub-edges, a collective when the placement makes source and
    destination servers the same multiset; a ``PAIR`` is one sync pair, always a collective;
    a ``SINGLE`` group holds one-to-one transfers. The join edge's sub-edges are in two groups
    (the join op's outgoing and its backward op's incoming): they are timed by the later one.
    """

    graph: JobGraph
    counts: tuple[int, ...]
    offsets: np.ndarray       # int64, per job op (2n): its first sub-op
    sub_compute: np.ndarray   # float64, ms per sub-op
    sub_op: np.ndarray        # int32, job op of each sub-op
    sub_slot: np.ndarray      # int32, slot j of each sub-op (server = block.servers[j])
    dep_src: np.ndarray       # int32
    dep_dst: np.ndarray       # int32
    dep_kind: np.ndarray      # int8, DATA or SYNC
    dep_size: np.ndarray      # float64, bytes
    group_kind: np.ndarray    # int8, per group
    member_group: np.ndarray  # int32, ascending
    member_dep: np.ndarray    # int32

    @property
    def num_sub_ops(self) -> int:
        return len(self.sub_compute)

    @property
    def num_deps(self) -> int:
        return len(self.dep_src)

    @property
    def num_groups(self) -> int:
        return len(self.group_kind)

    @property
    def nbytes(self) -> int:
        """Memory held by the arrays (what the partition cache bounds)."""
        return sum(value.nbytes for value in vars(self).values() if isinstance(value, np.ndarray))

    # What the step simulation reads besides the fields, derived once.
    @cached_property
    def leaving(self) -> tuple[np.ndarray, np.ndarray]:
        """The dependencies leaving each sub-op, ascending, as ``(start, deps)``: those of
        sub-op s are ``deps[start[s]:start[s + 1]]``."""
        deps = np.argsort(self.dep_src, kind="stable").astype(np.int32)
        start = np.zeros(self.num_sub_ops + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.dep_src, minlength=self.num_sub_ops), out=start[1:])
        return start, deps

    @cached_property
    def data_in_degree(self) -> np.ndarray:
        """How many data dependencies each sub-op waits for (int32)."""
        return np.bincount(self.dep_dst[self.dep_kind == DATA],
                           minlength=self.num_sub_ops).astype(np.int32)

    @cached_property
    def sub_priority(self) -> np.ndarray:
        """Each sub-op's allocation rank: twice its forward op's position in the graph's
        topological order, plus one for a backward op (a worker runs, among ready sub-ops of
        equal compute, the later allocated first)."""
        n = self.graph.num_ops
        position = np.empty(n, dtype=np.int64)
        position[list(self.graph.topological_order)] = np.arange(n)
        return 2 * position[self.sub_op % n] + (self.sub_op >= n)

    @cached_property
    def dep_group(self) -> np.ndarray:
        """The group that times each dependency: its last (int32)."""
        last = np.full(self.num_deps, -1, dtype=np.int32)
        np.maximum.at(last, self.member_dep, self.member_group)
        return last

    @cached_property
    def fanout_members(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ``FANOUT`` groups, and their memberships as (row among them, dependency)."""
        fanouts = np.flatnonzero(self.group_kind == FANOUT)
        local = np.full(self.num_groups, -1, dtype=np.int64)
        local[fanouts] = np.arange(len(fanouts))
        rows = local[self.member_group]
        member = rows >= 0
        return fanouts, rows[member], self.member_dep[member]

    @cached_property
    def pair_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """The ``PAIR`` groups and the first dependency of each (the other is its mirror)."""
        pairs = np.flatnonzero(self.group_kind == PAIR)
        starts = np.searchsorted(self.member_group, pairs)
        return pairs, self.member_dep[starts]

    @cached_property
    def pair_bytes(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct bytes of the ``PAIR`` groups, as runs (an op's pairs all carry two of
        its shards, and lie together): each run's bytes, and each pair group's run (int32)."""
        total = self.group_bytes[self.pair_groups[0]]
        new = np.ones(len(total), dtype=bool)  # where a run begins
        new[1:] = total[1:] != total[:-1]
        return total[new], (np.cumsum(new) - 1).astype(np.int32)

    @cached_property
    def size_table(self) -> tuple[np.ndarray, np.ndarray]:
        """A table of the dependency sizes (a few hundred, each link's and each split op's
        shard), and each dependency's index into it (int32)."""
        values, index = np.unique(self.dep_size, return_inverse=True)
        return values, index.astype(np.int32)

    @cached_property
    def sized(self) -> np.ndarray:
        """Whether each dependency carries bytes."""
        return self.dep_size > 0

    @cached_property
    def is_data(self) -> np.ndarray:
        """Whether each dependency is a data dependency (int8: what the loop reads)."""
        return (self.dep_kind == DATA).view(np.int8)

    @cached_property
    def group_bytes(self) -> np.ndarray:
        """The bytes each group carries in total (float64, each exactly ``math.fsum`` of its
        members' sizes: the exact sum, rounded once)."""
        sizes = self.dep_size[self.member_dep]
        members = np.bincount(self.member_group, minlength=self.num_groups)
        start = np.zeros(self.num_groups + 1, dtype=np.int64)
        np.cumsum(members, out=start[1:])
        total = np.zeros(self.num_groups)
        one, two = members == 1, members == 2
        total[one] = sizes[start[:-1][one]]
        first = start[:-1][two]
        total[two] = sizes[first] + sizes[first + 1]  # a sum of two is rounded once, as fsum's
        for g in np.flatnonzero(members > 2).tolist():
            total[g] = math.fsum(sizes[start[g]:start[g + 1]].tolist())
        return total


_PARTITION_CACHE_BYTES = 96 << 20  # at most about twice that with the derived arrays
_partitions = BoundedCache(_PARTITION_CACHE_BYTES, PartitionedJob.nbytes.fget)
_partitions_lock = threading.Lock()


def partition(graph: JobGraph, counts: tuple[int, ...]) -> PartitionedJob:
    """The partitioned job graph (cached, bounded by memory: the structure is reused across
    placements)."""
    key = (graph, tuple(counts))
    with _partitions_lock:
        job = _partitions.get(key)
    if job is None:
        job = _build(*key)
        with _partitions_lock:
            _partitions.put(key, job)
    return job


def _build(graph: JobGraph, counts: tuple[int, ...]) -> PartitionedJob:
    n = graph.num_ops
    if len(counts) != n or any(p < 1 for p in counts):
        raise ValueError(f"need one count >= 1 per op of '{graph.name}' ({n} ops)")
    p_of = np.array(counts * 2, dtype=np.int64)
    offsets = np.zeros(2 * n, dtype=np.int64)
    np.cumsum(p_of[:-1], out=offsets[1:])
    costs = [op.forward_ms / p for op, p in zip(graph.ops, counts)]
    costs += [op.backward_ms / p for op, p in zip(graph.ops, counts)]
    num_subs = int(p_of.sum())
    sub_compute = np.repeat(np.array(costs, dtype=float), p_of)
    sub_op = np.repeat(np.arange(2 * n, dtype=np.int32), p_of)
    sub_slot = (np.arange(num_subs) - np.repeat(offsets, p_of)).astype(np.int32)

    # The links (all-to-all sub-edges between two job ops), in dependency order: forward edges,
    # gradient edges, the join edge; each sub-edge carries an even share of the link's bytes.
    act = [op.activation_bytes for op in graph.ops]
    links = [(u, v, act[u]) for u, v in graph.deps]
    links += [(n + v, n + u, act[u]) for u, v in graph.deps]
    links.append((graph.join, n + graph.join, act[graph.join]))
    a = np.array([x for x, _, _ in links], dtype=np.int64)
    b = np.array([y for _, y, _ in links], dtype=np.int64)
    pa, pb = p_of[a], p_of[b]
    per_link = pa * pb
    sizes = per_link.tolist()
    link_first = np.zeros(len(links), dtype=np.int64)
    np.cumsum(per_link[:-1], out=link_first[1:])
    firsts = link_first.tolist()
    num_data = int(per_link.sum())
    link_of = np.repeat(np.arange(len(links)), per_link)
    within = np.arange(num_data) - link_first[link_of]
    data_src = offsets[a][link_of] + within // pb[link_of]
    data_dst = offsets[b][link_of] + within % pb[link_of]
    share = [nbytes / m for (_, _, nbytes), m in zip(links, sizes)]

    # Groups, op by op: its outgoing links, its backward op's incoming links, its sync pairs,
    # whose dependencies follow every data dependency, (i -> j, j -> i) for i < j.
    m = len(graph.deps)
    outgoing: list[list[int]] = [[] for _ in range(n)]
    incoming: list[list[int]] = [[] for _ in range(n)]
    for i, (u, _) in enumerate(graph.deps):
        outgoing[u].append(i)
        incoming[u].append(m + i)
    outgoing[graph.join].append(2 * m)
    incoming[graph.join].append(2 * m)
    kinds: list[int] = []          # per run of groups: kind, how many
    kind_runs: list[int] = []
    totals: list[float] = []       # per group: its bytes, exactly math.fsum of its members'
    runs: list[tuple[int, int, int, int]] = []  # memberships: (first dep, deps, group, pairs?)
    table = list(share)            # the sizes, each link's then each shard's, and how many
    table_runs = list(sizes)       # dependencies carry each
    sync_src: list[np.ndarray] = []
    sync_dst: list[np.ndarray] = []
    first = num_data
    for k in range(n):
        for side in (outgoing[k], incoming[k]):
            if side:
                group = len(totals)
                runs += [(firsts[i], sizes[i], group, 0) for i in side]
                kinds.append(FANOUT if counts[k] > 1 else SINGLE)
                kind_runs.append(1)
                # the exact sum rounded once: one rounded product for a single link
                totals.append(share[side[0]] * sizes[side[0]] if len(side) == 1 else
                              float(sum(Fraction(share[i]) * sizes[i] for i in side)))
        p = counts[k]
        shard = graph.ops[k].parameter_bytes / p
        if p > 1 and shard > 0:
            src, dst = _pair_ends(p)
            b0 = int(offsets[n + k])
            sync_src.append(b0 + src)
            sync_dst.append(b0 + dst)
            runs.append((first, len(src), len(totals), 1))
            pairs = len(src) // 2
            kinds.append(PAIR)
            kind_runs.append(pairs)
            totals += [2 * shard] * pairs  # math.fsum of two equal sizes
            table.append(shard)
            table_runs.append(len(src))
            first += len(src)
    num_sync = first - num_data
    run_first, run_deps, run_group, run_pairs = (np.array(x, dtype=np.int64)
                                                 for x in zip(*runs))
    member_dep = concatenated_ranges(run_first, run_deps)
    in_run = np.arange(len(member_dep)) - np.repeat(np.cumsum(run_deps) - run_deps, run_deps)
    member_group = np.repeat(run_group, run_deps) + np.repeat(run_pairs, run_deps) * (in_run // 2)

    dep_size = np.repeat(np.array(table, dtype=float), table_runs)
    job = PartitionedJob(graph=graph, counts=counts, offsets=offsets, sub_compute=sub_compute,
                         sub_op=sub_op, sub_slot=sub_slot,
                         dep_src=np.concatenate([data_src, *sync_src]).astype(np.int32),
                         dep_dst=np.concatenate([data_dst, *sync_dst]).astype(np.int32),
                         dep_kind=np.concatenate([np.full(num_data, DATA, np.int8),
                                                  np.full(num_sync, SYNC, np.int8)]),
                         dep_size=dep_size,
                         group_kind=np.repeat(np.array(kinds, dtype=np.int8), kind_runs),
                         member_group=member_group.astype(np.int32),
                         member_dep=member_dep.astype(np.int32))
    # What the derived properties would find, known here from the structure.
    job.__dict__.update(
        group_bytes=np.array(totals, dtype=float),
        size_table=(np.array(table, dtype=float),
                    np.repeat(np.arange(len(table), dtype=np.int32), table_runs)))
    for value in vars(job).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return job


@lru_cache(maxsize=128)
def _pair_ends(p: int) -> tuple[np.ndarray, np.ndarray]:
    """The sync dependencies of an op split ``p`` ways, as sub-op indices from its first:
    sources and targets, ``(i, j), (j, i)`` for each ``i < j`` in row order."""
    i, j = np.triu_indices(p, 1)
    src, dst = np.empty(2 * len(i), dtype=np.int64), np.empty(2 * len(i), dtype=np.int64)
    src[0::2], src[1::2] = i, j
    dst[0::2], dst[1::2] = j, i
    src.flags.writeable = dst.flags.writeable = False
    return src, dst
