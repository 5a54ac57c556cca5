"""One training step of a placed job, simulated alone on its own workers and channels.

The rules are the reference's lookahead (``ddls-semantics.md`` 7), computed event by event:
- each worker runs one ready sub-op at a time; static SRPT priorities pick the ready sub-op with
  the smallest compute time (ties: the one allocated later), and the choice is re-made at every
  event, so it is preemptive;
- a dependency between sub-ops on the same server, or of zero bytes, takes no time; it completes
  in a zero-length tick, before time advances;
- all ready flows progress in parallel. A tick ends at the next op completion or at the finish of
  the highest-priority ready flow of some channel (priority: smallest run time first; ties by
  dependency index, where the reference's tie-break depends on the hash seed); every flow that
  finishes within the tick completes at its end (the reference's overshoot);
- a sub-op becomes ready when all its data dependencies have completed; sync (all-reduce)
  dependencies only have to complete before the step ends.

Communication times come from :mod:`pacopt.cluster.communication`: a split op's outgoing forward
sub-edges (and its backward op's incoming gradient sub-edges) form one all-reduce collective when
their source and destination servers are the same multiset, each sync pair is a 2-server
collective, everything else is one-to-one.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from pacopt.cluster.communication import (
    one_to_one_seconds,
    spread,
    spread_all_reduce_seconds,
)
from pacopt.cluster.partition import DATA, PartitionedJob
from pacopt.cluster.placement import Placement
from pacopt.cluster.settings import ModelSettings
from pacopt.cluster.topology import RampCluster


@dataclass(frozen=True)
class StepTiming:
    """Times of one training step, in ms."""

    step_ms: float
    exposed_comm_ms: float  # time in which flows were in flight and no worker was computing


def dependency_times(job: PartitionedJob, servers: list[int], cluster: RampCluster,
                     settings: ModelSettings) -> list[float]:
    """Run time (ms, before same-server zeroing) of every dependency for sub-op ``servers``."""
    physical = settings.preset == "physical"
    scale = settings.comm_scale
    src, dst, size = job.dep_src, job.dep_dst, job.dep_size
    times = [0.0] * job.num_deps
    spans: dict[tuple[int, ...], tuple[int, int, int]] = {}  # the same servers recur
    collectives: dict[tuple, float] = {}  # (bytes, span) -> ms
    for kind, deps in job.groups:
        if kind != "single":
            ends = sorted([servers[src[d]] for d in deps])
            if kind == "pair" or ends == sorted([servers[dst[d]] for d in deps]):
                total = math.fsum([size[d] for d in deps])
                key = tuple(ends)
                span = spans.get(key)
                if span is None:
                    span = spans[key] = spread(set(ends), cluster)
                if ends[0] == ends[-1] or total <= 0:  # one server: no collective
                    t = 0.0
                elif (total, span) in collectives:  # e.g. a split op's sync pairs
                    t = collectives[total, span]
                else:
                    t = collectives[total, span] = scale * spread_all_reduce_seconds(
                        total, span, cluster, physical)
                for d in deps:
                    times[d] = t
                continue
        for d in deps:
            if servers[src[d]] != servers[dst[d]]:
                times[d] = scale * one_to_one_seconds(size[d], cluster)
    return times


def simulate_step(job: PartitionedJob, placement: Placement, cluster: RampCluster,
                  settings: ModelSettings) -> StepTiming:
    """Simulate one training step of ``job`` placed as ``placement``."""
    n = job.graph.num_ops
    blocks = placement.blocks
    servers = [blocks[o % n].servers[j] for o, j in zip(job.sub_op, job.sub_slot)]
    dep_ms = dependency_times(job, servers, cluster, settings)
    src, dst, kind = job.dep_src, job.dep_dst, job.dep_kind
    num_deps, num_subs = job.num_deps, job.num_sub_ops

    # Flows (cross-server, non-zero time) ranked: a higher rank wins its channel.
    sources = [servers[x] for x in src]
    targets = [servers[x] for x in dst]
    is_flow = [a != b and nbytes > 0 and ms > 0
               for a, b, nbytes, ms in zip(sources, targets, job.dep_size, dep_ms)]
    negated = [-ms for ms in dep_ms]  # a stable sort keeps ties in dependency order
    flows = sorted([d for d in range(num_deps) if is_flow[d]], key=negated.__getitem__)
    rank = [0] * num_deps
    for r, d in enumerate(flows):
        rank[d] = r
    width = cluster.num_servers
    channel_of = [a * width + b if flow else -1
                  for a, b, flow in zip(sources, targets, is_flow)]

    # Static op priority on a worker: smaller compute first, then later allocation first.
    bfs_pos = {k: i for i, k in enumerate(job.graph.topological_order)}
    alloc = [2 * bfs_pos[o % n] + (o >= n) for o in job.sub_op]
    compute = job.sub_compute

    out: list[list[int]] = [[] for _ in range(num_subs)]
    pending = [0] * num_subs
    for d in range(num_deps):
        out[src[d]].append(d)
        if kind[d] == DATA:
            pending[dst[d]] += 1

    heappush, heappop = heapq.heappush, heapq.heappop
    rem = list(compute)
    queues: dict[int, list] = {}          # worker -> heap of ready sub-ops
    for s in range(num_subs):
        if pending[s] == 0:
            heappush(queues.setdefault(servers[s], []), (compute[s], -alloc[s], s))

    instant: list[int] = []               # ready dependencies that take no time
    finish = [0.0] * num_deps
    done = [False] * num_deps
    in_flight: list = []                  # heap (finish, dep) of ready flows
    channel_heap: dict[int, list] = {}    # channel -> heap (-rank, dep) of its ready flows
    heads: list = []                      # heap (finish, channel, dep) of channel heads (lazy)
    t = 0.0
    exposed = 0.0
    remaining = num_subs + num_deps

    while remaining:
        running = [(w, q[0][2]) for w, q in queues.items() if q]
        op_min = min((rem[s] for _, s in running), default=math.inf)
        if instant:
            tick = 0.0
        else:
            comm_min = math.inf
            while heads:
                fin, channel, d = heads[0]
                heap = channel_heap[channel]
                if done[d] or heap[0][1] != d:
                    heappop(heads)
                    continue
                comm_min = fin - t
                break
            tick = min(op_min, comm_min)
            if tick == math.inf:
                raise RuntimeError(f"step simulation of '{job.graph.name}' is stuck at t={t}")
            if not running and in_flight:
                exposed += tick
        finished_ops = []
        for w, s in running:
            r = rem[s]
            r -= tick if tick < r else r
            rem[s] = r
            if r == 0.0:
                heappop(queues[w])
                finished_ops.append(s)
        if instant:
            finished_deps, instant = instant, []
        else:
            finished_deps = []
            end = t + tick
            while in_flight and in_flight[0][0] <= end:
                finished_deps.append(heappop(in_flight)[1])
        t += tick
        remaining -= len(finished_ops) + len(finished_deps)
        touched = set()
        for d in finished_deps:
            done[d] = True
            if is_flow[d]:
                touched.add(channel_of[d])
        for channel in touched:  # its head: the first of its flows not done
            heap = channel_heap[channel]
            while heap and done[heap[0][1]]:
                heappop(heap)
            if heap:
                d = heap[0][1]
                heappush(heads, (finish[d], channel, d))
        for s in finished_ops:  # release their dependencies
            for d in out[s]:
                if not is_flow[d]:
                    instant.append(d)
                    continue
                fin = finish[d] = t + dep_ms[d]
                heappush(in_flight, (fin, d))
                channel = channel_of[d]
                heap = channel_heap.get(channel)
                if heap is None:
                    heap = channel_heap[channel] = []
                heappush(heap, (-rank[d], d))
                if heap[0][1] == d:
                    heappush(heads, (fin, channel, d))
        for d in finished_deps:
            if kind[d] == DATA:
                child = dst[d]
                pending[child] -= 1
                if pending[child] == 0:
                    heappush(queues.setdefault(servers[child], []),
                                   (compute[child], -alloc[child], child))
    return StepTiming(step_ms=t, exposed_comm_ms=exposed)
