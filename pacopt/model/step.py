"""One training step of a placed job, simulated alone on its own workers and channels.

The rules are the reference's lookahead (``docs/model.md#jct``), computed event by event:
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

Communication times come from :mod:`pacopt.model.communication`: a split op's outgoing forward
sub-edges (and its backward op's incoming gradient sub-edges) form one all-reduce collective when
their source and destination servers are the same multiset, each sync pair is a 2-server
collective, everything else is one-to-one.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from pacopt.model.communication import one_to_one_seconds, spread, spread_all_reduce_seconds
from pacopt.model.first_fit import Placement
from pacopt.model.partition import DATA, PartitionedJob
from pacopt.model.settings import ModelSettings
from pacopt.model.topology import RampCluster


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
    singles: dict[float, float] = {}  # bytes -> ms of a one-to-one transfer
    for (kind, deps), total, ends in zip(job.groups, job.group_bytes, job.group_ends):
        if kind == "pair":
            a, b = servers[src[deps[0]]], servers[src[deps[1]]]
            key = (a,) if a == b else (a, b) if a < b else (b, a)
        elif kind == "fanout":
            sources = _servers_counted(ends[0], servers)
            if sources != _servers_counted(ends[1], servers):
                key = None  # not the same servers both ways: one-to-one transfers
            else:
                key = tuple(sorted(sources))
        else:
            key = None
        if key is not None:
            span = spans.get(key)
            if span is None:
                span = spans[key] = spread(set(key), cluster)
            if len(key) == 1 or total <= 0:  # one server: no collective
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
                nbytes = size[d]
                t = singles.get(nbytes)
                if t is None:
                    t = singles[nbytes] = scale * one_to_one_seconds(nbytes, cluster)
                times[d] = t
    return times


def _servers_counted(subs: dict[int, int], servers: list[int]) -> dict[int, int]:
    """The servers of sub-ops given with multiplicities, with theirs summed."""
    out: dict[int, int] = {}
    for sub, m in subs.items():
        server = servers[sub]
        out[server] = out.get(server, 0) + m
    return out


def simulate_step(job: PartitionedJob, placement: Placement, cluster: RampCluster,
                  settings: ModelSettings) -> StepTiming:
    """Simulate one training step of ``job`` placed as ``placement``."""
    n = job.graph.num_ops
    blocks = placement.blocks
    servers = [blocks[o % n].servers[j] for o, j in zip(job.sub_op, job.sub_slot)]
    dep_ms = dependency_times(job, servers, cluster, settings)
    dst, kind = job.dep_dst, job.dep_kind
    num_deps, num_subs = job.num_deps, job.num_sub_ops

    # Flows (cross-server, non-zero time) by channel (source * width + target server); -1 for
    # the other dependencies. Found for all the dependencies at once: thousands of them.
    width = cluster.num_servers
    at = np.array(servers, dtype=np.int64)
    sources, targets, sized = job.dep_arrays
    x, y = at[sources], at[targets]
    ms = np.array(dep_ms, dtype=float)
    channel_of = np.where((ms > 0) & sized & (x != y), x * width + y, -1).tolist()

    # Static op priority on a worker: smaller compute first, then later allocation first.
    alloc = job.sub_priority
    compute = job.sub_compute

    out = job.leaving
    pending = list(job.data_in_degree)

    heappush, heappop = heapq.heappush, heapq.heappop
    rem = list(compute)
    queues: dict[int, list] = {}          # worker -> heap of ready sub-ops
    for s in range(num_subs):
        if pending[s] == 0:
            heappush(queues.setdefault(servers[s], []), (compute[s], -alloc[s], s))

    instant: list[int] = []               # ready dependencies that take no time
    done = [False] * num_deps
    in_flight: list = []                  # heap of the finish times of ready flows
    due: dict[float, list[int]] = {}      # finish time -> the flows finishing then
    # channel -> heap of its ready flows by (ms, -dep): the first wins (ties: the later
    # dependency); finished flows leave it lazily, when they reach its top. The pair is packed
    # in one int (``key``), cheaper to compare and to keep than a tuple.
    channel_heap: defaultdict[int, list] = defaultdict(list)
    rank = np.unique(ms, return_inverse=True)[1]  # of each time among the distinct ones
    key = (rank * num_deps - np.arange(num_deps)).tolist()

    def leads(d: int) -> bool:
        """Whether flow ``d`` (ready, not done) is the highest-priority flow of its channel."""
        heap = channel_heap[channel_of[d]]
        while done[-heap[0] % num_deps]:
            heappop(heap)
        return heap[0] == key[d]

    t = 0.0
    exposed = 0.0
    remaining = num_subs + num_deps

    while remaining:
        running = [(w, q[0][2]) for w, q in queues.items() if q]
        op_min = min((rem[s] for _, s in running), default=math.inf)
        if instant:
            tick = 0.0
        else:
            # the first finish of a channel's leading flow: nearly always the first finish of all
            comm_min = math.inf
            if in_flight:
                fin = in_flight[0]
                if not any(map(leads, due[fin])):
                    fin = next(f for f in sorted(in_flight) if any(map(leads, due[f])))
                comm_min = fin - t
            tick = min(op_min, comm_min)
            if tick == math.inf:
                raise RuntimeError(f"step simulation of '{job.graph.name}' is stuck at t={t}")
            if not running and in_flight:
                exposed += tick
        finished_ops = []
        for w, s in running:
            r = rem[s]
            r -= tick if tick < r else r  # noqa: FURB136 (min() costs a call in the hot loop)
            rem[s] = r
            if r == 0.0:
                heappop(queues[w])
                finished_ops.append(s)
        if instant:
            finished_deps, instant = instant, []
        else:
            finished_deps = []
            end = t + tick
            while in_flight and in_flight[0] <= end:  # their order within a tick is immaterial
                finished_deps += due.pop(heappop(in_flight))
        t += tick
        remaining -= len(finished_ops) + len(finished_deps)
        last = None
        for s in finished_ops:  # release their dependencies
            for d in out[s]:
                channel = channel_of[d]
                if channel < 0:
                    instant.append(d)
                    continue
                fin = t + dep_ms[d]
                if fin != last:  # a sub-op's flows mostly take the same time
                    together = due.get(fin)
                    if together is None:
                        together = due[fin] = []
                        heappush(in_flight, fin)
                    last = fin
                together.append(d)
                heappush(channel_heap[channel], key[d])
        for d in finished_deps:
            done[d] = True
            if kind[d] == DATA:
                child = dst[d]
                pending[child] -= 1
                if pending[child] == 0:
                    heappush(queues.setdefault(servers[child], []),
                                   (compute[child], -alloc[child], child))
    return StepTiming(step_ms=t, exposed_comm_ms=exposed)
