"""What the agent sees of one decision, as fixed-size arrays (a gymnasium ``Dict`` observation).

PAC-ML's observation (arXiv 2301.13799, its state) is the unpartitioned job graph
(node and edge features for the GNN), a job vector and two cluster numbers. pacopt keeps the graph
and adds what the paper lacked, because the choice hinges on it:
- per degree, what first-fit would do on the live cluster *now*: can it be placed, does its JCT
  meet the deadline (and the horizon), how many workers it takes, its worker-time, and how much
  of the cluster stays free and unfragmented (free blocks of 16, 8 and 4) once it is placed;
- the cluster's fragmentation: the share of free blocks of every RAMP size, and when the next
  running jobs finish and how many workers they return;
- the workload: a histogram and the mean of the betas of the last HISTORY arrivals, from which the
  agent can tell how strict deadlines are these days (the beta distribution), as ``tuned`` is
  told. The observer keeps this history per episode: call :meth:`Observer.reset` when one starts.

Keys of an observation:
- ``node_x`` (MAX_NODES x NODE_DIM), ``edge_index`` (2 x MAX_EDGES, -1 = padding), ``edge_x``
  (MAX_EDGES x EDGE_DIM), ``graph_sig`` (4): the forward graph, padded; graphs with more ops than
  MAX_NODES are coarsened into MAX_NODES contiguous segments of their topological order, so any
  graph can be observed; ``graph_sig`` identifies the graph so the encoder embeds each distinct
  graph once per batch;
- ``globals`` (GLOBAL_DIM): job, graph and cluster features;
- ``actions`` ((max degree + 1) x ACTION_DIM): one row per degree, 0 = reject.

All features are normalised to about [0, 1]; times relative to the job's own deadline or on a
log scale, so that graphs and clusters never seen in training give familiar numbers.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections import deque
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from pacopt.infra.bounded_cache import BoundedCache
from pacopt.model.decision import Decision
from pacopt.model.graph import JobGraph
from pacopt.model.settings import ModelSettings
from pacopt.model.topology import RampCluster, servers_of

MAX_NODES = 256
MAX_EDGES = 512
NODE_DIM = 7
EDGE_DIM = 2
#: RAMP group sizes whose free-block shares describe fragmentation (those of a 4x4x2 cluster).
BLOCK_SIZES = (1, 2, 3, 4, 6, 8, 9, 16)
#: Sizes whose free blocks are counted again after each candidate placement.
AFTER_SIZES = (16, 8, 4)
NEXT_COMPLETIONS = 4
#: Recent arrivals whose betas describe the workload (the agent infers the beta distribution).
HISTORY = 100
#: Footprints whose touched blocks a wide cluster's counter keeps (a few hundred bytes each).
_TOUCHED_CACHE_LIMIT = 20_000
BETA_BINS = (0.0, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0)
_BETA_EDGES = np.array(BETA_BINS)
GLOBAL_DIM = 10 + len(BLOCK_SIZES) + 2 * NEXT_COMPLETIONS + 1 + len(BETA_BINS) + 1
ACTION_DIM = 12 + len(AFTER_SIZES)
#: The degree column's scale: degree / DEGREE_SCALE, the same number for a degree whatever the
#: cluster's largest (16, the paper's, gives the 0..1 the first checkpoints were trained on).
DEGREE_SCALE = 16


def _log(x: float, decades: float) -> float:
    """log10(1 + x) / decades: a positive quantity spanning ``decades`` orders on about [0, 1]."""
    return math.log10(1.0 + max(x, 0.0)) / decades


@dataclass(frozen=True)
class GraphArrays:
    """A job graph as padded arrays (see the module doc)."""

    node_x: np.ndarray
    edge_index: np.ndarray
    edge_x: np.ndarray
    sig: np.ndarray
    features: tuple[float, ...]  # graph-level: log #ops, log #deps, log total memory


def _segments(graph: JobGraph) -> np.ndarray:
    """Segment index per op: ops themselves, or MAX_NODES contiguous runs of the topological
    order for larger graphs."""
    n = graph.num_ops
    segment = np.arange(n)
    if n > MAX_NODES:
        order = np.asarray(graph.topological_order)
        segment[order] = np.arange(n) * MAX_NODES // n
    return segment


def encode_graph(graph: JobGraph) -> GraphArrays:
    """The padded node/edge arrays of ``graph`` (PAC-ML's features plus absolute scales)."""
    seg = _segments(graph)
    k = int(seg.max()) + 1
    fwd = np.zeros(k)
    bwd = np.zeros(k)
    act = np.zeros(k)
    mem = np.zeros(k)
    for i, op in enumerate(graph.ops):
        fwd[seg[i]] += op.forward_ms
        bwd[seg[i]] += op.backward_ms
        act[seg[i]] = max(act[seg[i]], op.activation_bytes)
        mem[seg[i]] += op.memory_bytes
    depth = np.zeros(graph.num_ops)
    for v in graph.topological_order:
        for u in graph.predecessors[v]:
            depth[v] = max(depth[v], depth[u] + 1)
    seg_depth = np.zeros(k)
    np.maximum.at(seg_depth, seg, depth)
    edges: dict[tuple[int, int], float] = {}
    for u, v in graph.deps:
        a, b = int(seg[u]), int(seg[v])
        if a != b:
            edges[(a, b)] = edges.get((a, b), 0.0) + graph.ops[u].activation_bytes
    if len(edges) > MAX_EDGES:  # keep the heaviest dependencies of a coarsened graph
        edges = dict(sorted(edges.items(), key=lambda e: -e[1])[:MAX_EDGES])

    def rel(x: np.ndarray) -> np.ndarray:
        top = x.max()
        return x / top if top > 0 else np.zeros_like(x)

    node_x = np.zeros((MAX_NODES, NODE_DIM), dtype=np.float32)
    node_x[:k] = np.stack([rel(fwd), rel(bwd), rel(mem), rel(act), rel(seg_depth),
                           np.log10(1 + fwd) / 3, np.log10(1 + mem) / 12], axis=1)
    edge_index = np.full((2, MAX_EDGES), -1, dtype=np.float32)
    edge_x = np.zeros((MAX_EDGES, EDGE_DIM), dtype=np.float32)
    if edges:
        pairs = np.array(list(edges), dtype=np.float32).T
        sizes = np.array(list(edges.values()))
        edge_index[:, :len(edges)] = pairs
        edge_x[:len(edges)] = np.stack([rel(sizes), np.log10(1 + sizes) / 12], axis=1)
    digest = hashlib.blake2b(graph.fingerprint.encode(), digest_size=6).digest()
    sig = np.array([int.from_bytes(digest[:3], "big"), int.from_bytes(digest[3:], "big"), k,
                    len(edges)], dtype=np.float32)  # 24-bit halves are exact in float32
    total_memory = sum(op.memory_bytes for op in graph.ops)
    features = (_log(graph.num_ops, 4), _log(len(graph.deps), 4), _log(total_memory, 12))
    return GraphArrays(node_x, edge_index, edge_x, sig, features)


class _BlockCounter:
    """Counts free blocks per RAMP size on an occupancy bitmask: numpy over the block masks when
    the cluster fits in 64 bits; on wider clusters through the index first fit keeps of every
    block's busy servers (:meth:`~pacopt.model.topology.RampCluster.block_index`, one for all
    the sizes, which the decision's first-fit look-ups have already brought up to date), a
    candidate placement's count taken from the occupancy it adds to (the free blocks now, less
    those its new servers touch), not counted again. Wide counts are made for every size at
    once and kept for the next size asked about the same occupancies."""

    def __init__(self, cluster: RampCluster, sizes: tuple[int, ...],
                 after: tuple[int, ...] | None = None):
        """``after``: the sizes counted after each candidate as well (default: all); on wide
        clusters the others are counted under the first occupancy only."""
        self.wide = cluster.num_servers > 64
        self.masks = {}
        for m in sizes:
            blocks = cluster.blocks(m) if m <= cluster.num_servers else ()
            self.masks[m] = np.array([b.mask for b in blocks], dtype=object if self.wide
                                     else np.uint64)
        self._column = {m: k for k, m in enumerate(sizes)}
        if self.wide:
            found = {m: cluster.block_index(m) for m in sizes if len(self.masks[m])}
            indexes = {id(index) for index, _ in found.values()}
            if len(indexes) != 1 or any(span is None for _, span in found.values()):
                raise ValueError("the free-block features need one shared index of the sizes")
            self._index = next(iter(found.values()))[0]
            # each block's feature column; -1: a size the features do not count
            self._size_of = np.full(len(self._index.blocks), -1)
            for m, (_, span) in found.items():
                self._size_of[span] = self._column[m]
            self._counted = self._size_of >= 0
            after_columns = [self._column[m] for m in (sizes if after is None else after)]
            after_blocks = np.isin(self._size_of, after_columns)
            # per server, the blocks of the ``after`` sizes holding it
            self._after_holding = [held[after_blocks[held]] for held in self._index.holding]
            self._last: tuple[tuple[int, ...], np.ndarray] | None = None
            self._touched_by = BoundedCache(_TOUCHED_CACHE_LIMIT)  # footprint -> its blocks

    def free_share(self, m: int, occupied: list[int]) -> float:
        """Share of the size-``m`` blocks that are wholly free under ``occupied[0]``; on wide
        clusters read from the count over all of ``occupied`` (:meth:`free_shares`), which
        the next feature group asks for."""
        if self.wide:
            return float(self.free_shares(m, occupied)[0])
        return float(self.free_shares(m, occupied[:1])[0])

    def free_shares(self, m: int, occupied: list[int]) -> np.ndarray:
        """:meth:`free_share` for several occupancies at once (on wide clusters fastest when
        the first is contained in the others: a state, then the state after each candidate)."""
        masks = self.masks[m]
        if len(masks) == 0:
            return np.zeros(len(occupied))
        if self.wide:
            key, last = tuple(occupied), self._last
            if last is None or last[0] != key:
                last = self._last = (key, self._wide_counts(occupied))
            return last[1][:, self._column[m]] / len(masks)
        occ = np.array(occupied, dtype=np.uint64)[:, None]
        return np.count_nonzero((masks[None, :] & occ) == 0, axis=1) / len(masks)

    def _wide_counts(self, occupied: list[int]) -> np.ndarray:
        """Free blocks per (occupancy, size); after the first occupancy, of the ``after``
        sizes only (the others' columns keep the first's count where they are additions)."""
        index, base, sizes = self._index, occupied[0], len(self._column)
        free = index.free(base) & self._counted
        counts = np.tile(np.bincount(self._size_of[free], minlength=sizes).astype(float),
                         (len(occupied), 1))
        added = [i for i, occ in enumerate(occupied) if occ & base == base]
        afresh = [i for i, occ in enumerate(occupied) if occ & base != base]  # counted anew
        parts = [self._touched(occupied[i] & ~base) for i in added]
        touched = np.concatenate(parts)
        rows = np.repeat(np.asarray(added, dtype=np.int64), [len(part) for part in parts])
        hit = free[touched]  # each free block an addition touches, once per addition
        counts -= np.bincount(rows[hit] * sizes + self._size_of[touched[hit]],
                              minlength=len(occupied) * sizes).reshape(len(occupied), sizes)
        for i in afresh:
            counted = index.free(occupied[i]) & self._counted
            counts[i] = np.bincount(self._size_of[counted], minlength=sizes)
        return counts

    def _touched(self, mask: int) -> np.ndarray:
        """The distinct blocks of the ``after`` sizes holding a server of ``mask`` (cached: the
        candidates' footprints come back decision after decision)."""
        found = self._touched_by.get(mask)
        if found is None:
            held = [self._after_holding[server] for server in servers_of(mask)]
            hit = np.zeros(len(self._size_of), dtype=bool)  # marks, not np.unique: no sort
            if held:
                hit[np.concatenate(held)] = True
            found = self._touched_by.put(mask, np.flatnonzero(hit))
        return found


class Observer:
    """Builds observations and masks for decisions on one cluster under one model setting."""

    def __init__(self, cluster: RampCluster, settings: ModelSettings):
        self.cluster = cluster
        self.settings = settings
        self.num_actions = settings.max_partitions_per_op + 1
        self._blocks = _BlockCounter(cluster, tuple(sorted(set(BLOCK_SIZES + AFTER_SIZES))),
                                     AFTER_SIZES)
        self._graphs: dict[str, GraphArrays] = {}
        self.reset()

    def reset(self) -> None:
        """Forget the arrivals seen: a new episode starts."""
        self._betas: deque[float] = deque(maxlen=HISTORY)
        self._last_job = -1

    def fork(self) -> Observer:
        """An observer that goes on from this one's history without changing it (its graph
        encodings are shared)."""
        other = copy.copy(self)
        other._betas = self._betas.copy()
        return other

    def note(self, decision: Decision) -> None:
        """Record the arriving job's beta in the history (once per job)."""
        if decision.job_index != self._last_job:
            self._last_job = decision.job_index
            self._betas.append(decision.max_jct_fraction)

    def observation_space(self) -> spaces.Dict:
        """The ``Dict`` space of :meth:`observe`."""
        inf = np.float32(np.inf)
        box = lambda shape, low=-inf, high=inf: spaces.Box(low, high, shape, np.float32)  # noqa: E731
        return spaces.Dict({
            "node_x": box((MAX_NODES, NODE_DIM)),
            "edge_index": box((2, MAX_EDGES), -1.0, float(MAX_NODES)),
            "edge_x": box((MAX_EDGES, EDGE_DIM)),
            "graph_sig": box((4,), 0.0, float(2 ** 24)),
            "globals": box((GLOBAL_DIM,)),
            "actions": box((self.num_actions, ACTION_DIM)),
        })

    def graph(self, graph: JobGraph) -> GraphArrays:
        if graph.fingerprint not in self._graphs:
            self._graphs[graph.fingerprint] = encode_graph(graph)
        return self._graphs[graph.fingerprint]

    def observe(self, decision: Decision) -> dict[str, np.ndarray]:
        """The observation of ``decision`` (fresh arrays, owned by the caller)."""
        self.note(decision)
        g = self.graph(decision.graph)
        state, options = decision.state, decision.options()
        placed = np.flatnonzero(options.placeable)
        # the state, then the state with each placeable degree's footprint (the options'
        # masks: first fit's placements need not be built): the free-block counts of both
        # feature groups come from one count over these
        occupied = [state.occupied] + [state.occupied | options.masks[d] for d in placed]
        return {"node_x": g.node_x.copy(), "edge_index": g.edge_index.copy(),
                "edge_x": g.edge_x.copy(), "graph_sig": g.sig.copy(),
                "globals": self._globals(decision, g, occupied),
                "actions": self._actions(decision, placed, occupied)}

    # ----- the parts ---------------------------------------------------------------------------
    def _globals(self, decision: Decision, g: GraphArrays, occupied: list[int]) -> np.ndarray:
        state, n = decision.state, self.cluster.num_servers
        now, deadline = state.now_ms, decision.deadline_ms
        seq = decision.table.seq_jct_ms
        remaining = decision.remaining_ms
        job = [decision.max_jct_fraction, _log(seq, 6), _log(deadline, 6),
               1.0 if math.isinf(remaining) else remaining / decision.horizon_ms,
               min(deadline / remaining, 2.0) / 2 if remaining > 0 else 1.0]
        cluster = [state.num_free / n, state.num_running / n]
        blocks = [self._blocks.free_share(m, occupied) if m in self._blocks.masks else 0.0
                  for m in BLOCK_SIZES]
        ends = sorted(state.running.values())  # the mean's summation order, as ever
        # the next completions, (end, job) ascending: those ending by the NEXT_COMPLETIONS-th
        # end, sorted (a filter in C, where a heap would compare every running job's tuple)
        last = ends[NEXT_COMPLETIONS - 1] if len(ends) >= NEXT_COMPLETIONS else math.inf
        first = sorted([(end, j) for j, end in state.running.items()
                        if end <= last])[:NEXT_COMPLETIONS]
        nxt = []
        for end, job_index in first:
            held = state.held[job_index].bit_count()  # the servers it holds
            nxt += [min((end - now) / deadline, 4.0) / 4, held / n]
        nxt += [1.0, 0.0] * (NEXT_COMPLETIONS - len(first))
        mean_left = (np.mean(np.array(ends) - now) / deadline) if ends else 0.0
        betas = np.asarray(self._betas)
        counts = _histogram(betas, _BETA_EDGES) / len(betas)
        history = list(counts) + [betas.mean(), min(len(betas) / HISTORY, 1.0)]
        out = (job + list(g.features) + cluster + blocks + nxt + [min(mean_left, 4.0) / 4]
               + history)
        return np.asarray(out, dtype=np.float32)

    def _actions(self, decision: Decision, placed: np.ndarray, occupied: list[int]) -> np.ndarray:
        state, n = decision.state, self.cluster.num_servers
        options, table = decision.options(), decision.table
        deadline = decision.deadline_ms
        out = np.zeros((self.num_actions, ACTION_DIM), dtype=np.float32)
        degrees = np.arange(self.num_actions)
        out[:, 0] = decision.worthwhile_mask()
        out[0, 1] = 1.0
        out[:, 2] = degrees / DEGREE_SCALE
        out[1:, 3] = np.where(table.placed[1:], table.workers[1:], 0) / n
        # defaults: what the cluster looks like if the job is not placed
        out[:, 7] = out[:, 8] = 1.0
        out[:, 10] = state.num_free / n
        for k, m in enumerate(AFTER_SIZES):
            shares = self._blocks.free_shares(m, occupied)
            out[:, 12 + k] = shares[0]
            out[placed, 12 + k] = shares[1:]
        if len(placed):
            jct = options.jct_ms[placed]
            workers = options.workers[placed]
            out[placed, 4] = 1.0
            out[placed, 5] = jct <= deadline
            out[placed, 6] = workers / n
            out[placed, 7] = np.minimum(jct / deadline, 4.0) / 4
            out[placed, 8] = jct / table.seq_jct_ms
            out[placed, 9] = np.minimum(workers * jct / (n * deadline), 4.0) / 4
            out[placed, 10] = (state.num_free - workers) / n
            out[placed, 11] = jct > decision.remaining_ms
        return out


def _histogram(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``np.histogram(values, bins=edges)[0]``, computed as it does for uneven edges (the
    counts below each edge of the sorted values, the last edge inclusive) without the checks
    that cost more than the count on a short history."""
    ordered = np.sort(values)
    below = np.concatenate((ordered.searchsorted(edges[:-1], "left"),
                            ordered.searchsorted(edges[-1:], "right")))
    return np.diff(below)
