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
from dataclasses import dataclass
from itertools import chain

import numpy as np

from pacopt.model.communication import all_reduce_array, one_to_one_array
from pacopt.model.first_fit import Placement
from pacopt.model.partition import PartitionedJob
from pacopt.model.settings import ModelSettings
from pacopt.model.topology import RampCluster

try:  # the event loop compiled (``step_loop.c``, built with the package); the same bits
    from pacopt.model import step_loop as _compiled
except ImportError:  # pragma: no cover - a checkout whose extension is not built
    _compiled = None


@dataclass(frozen=True)
class StepTiming:
    """Times of one training step, in ms."""

    step_ms: float
    exposed_comm_ms: float  # time in which flows were in flight and no worker was computing


#: The 8 spans of two distinct servers (groups, racks, slots), by which of the three differ.
_PAIR_SPANS = 1 + ((np.arange(8)[:, None] >> np.arange(3)) & 1)


def dependency_times(job: PartitionedJob, used: np.ndarray, x: np.ndarray, y: np.ndarray,
                     cluster: RampCluster, settings: ModelSettings) -> np.ndarray:
    """Run time (ms) of every dependency between different servers, its source and target
    sub-ops being on servers ``used[x[d]]`` and ``used[y[d]]`` (the job's servers numbered
    densely). A dependency within a server takes no time; its entry is immaterial."""
    physical = settings.preset == "physical"
    scale = settings.comm_scale
    group = job.dep_group
    total = job.group_bytes
    group_time = np.zeros(job.num_groups)  # the collectives' times
    collective = np.zeros(job.num_groups, dtype=bool)
    coords = cluster.coords_array

    # Fanouts whose sources and destinations lie on the same servers, as multisets: one
    # collective over those servers.
    fanouts, rows, deps = job.fanout_members
    if len(fanouts):
        width = len(used)
        size = len(fanouts) * width
        sources = np.bincount(rows * width + x[deps], minlength=size).reshape(-1, width)
        targets = np.bincount(rows * width + y[deps], minlength=size).reshape(-1, width)
        same = np.flatnonzero((sources == targets).all(axis=1))
        collective[fanouts[same]] = True
        on = sources[same] > 0  # which of the job's servers each collective spans
        nbytes = total[fanouts[same]]
        live = (on.sum(axis=1) > 1) & (nbytes > 0)
        if live.any():
            # the distinct groups, racks and slots of each: :func:`spread`, all rows at once
            at = coords[used]
            spans = np.column_stack([
                (on[live].astype(np.int64) @ (at[:, a, None] == np.arange(at[:, a].max() + 1))
                 > 0).sum(axis=1) for a in range(3)])
            group_time[fanouts[same[live]]] = scale * all_reduce_array(nbytes[live], spans, cluster,
                                                                      physical)

    # Sync pairs: a collective over their two servers.
    pairs, first = job.pair_groups
    if len(pairs):
        collective[pairs] = True
        a, b = used[x[first]], used[y[first]]
        live = (a != b) & (total[pairs] > 0)
        if live.any():
            # two servers span 1 + (do they differ) groups, racks and slots: one of 8 spans,
            # and a pair's bytes are one of its op's few: the formula once per (bytes, span)
            differ = coords[a[live]] != coords[b[live]]
            span = differ[:, 0] + 2 * differ[:, 1] + 4 * differ[:, 2]
            run_bytes, run = job.pair_bytes
            by_span = all_reduce_array(run_bytes[:, None], _PAIR_SPANS, cluster, physical)
            group_time[pairs[live]] = scale * by_span[run[live], span]

    times = group_time[group]
    # Everything else between two servers: one-to-one transfers.
    single = ~collective[group] & (x != y)
    sizes, index = job.size_table
    one = scale * one_to_one_array(sizes, cluster)
    times[single] = one[index[single]]
    return times


def simulate_step(job: PartitionedJob, placement: Placement, cluster: RampCluster,
                  settings: ModelSettings) -> StepTiming:
    """Simulate one training step of ``job`` placed as ``placement``."""
    n = job.graph.num_ops
    blocks = placement.blocks
    servers = np.fromiter(chain.from_iterable(
        blocks[o % n].servers[:p] for o, p in enumerate(job.counts * 2)),
        dtype=np.int64, count=job.num_sub_ops)
    used, worker = np.unique(servers, return_inverse=True)  # the job's servers, numbered densely
    worker = worker.astype(np.int32)
    x, y = worker[job.dep_src], worker[job.dep_dst]
    dep_ms = dependency_times(job, used, x, y, cluster, settings)
    # Flows (cross-server, non-zero time) by channel (source and target server, numbered
    # densely); -1 for the other dependencies.
    flows = (dep_ms > 0) & job.sized & (x != y)
    codes = x[flows].astype(np.int64) * len(used) + y[flows]
    present = np.zeros(len(used) ** 2, dtype=bool)
    present[codes] = True
    dense = np.cumsum(present, dtype=np.int64) - 1
    channel = np.full(job.num_deps, -1, dtype=np.int32)
    channel[flows] = dense[codes]
    start, leave = job.leaving
    args = (job.num_sub_ops, job.num_deps, len(used), int(present.sum()), worker,
            job.sub_compute, job.sub_priority, job.data_in_degree, start, leave, dep_ms, channel,
            job.dep_dst, job.is_data)
    try:
        step_ms, exposed = (_compiled.simulate if _compiled is not None else _loop_python)(*args)
    except RuntimeError:
        raise RuntimeError(f"step simulation of '{job.graph.name}' is stuck") from None
    return StepTiming(step_ms=step_ms, exposed_comm_ms=exposed)


def _loop_python(num_subs: int, num_deps: int, num_workers: int, num_channels: int,
                 worker, compute, alloc, in_degree, leave_start, leave, dep_ms, channel, dst,
                 is_data) -> tuple[float, float]:
    """The event loop (module doc): the specification of the compiled one
    (``step_loop.c``), which gives the same bits; used where it is not built."""
    # A channel's flows by (ms, -dep), packed in one int: cheaper to compare and keep than a tuple.
    rank = np.unique(dep_ms, return_inverse=True)[1].astype(np.int64)
    key = (rank * num_deps - np.arange(num_deps)).tolist()
    worker, compute, dep_ms, channel = (a.tolist() for a in (worker, compute, dep_ms, channel))
    alloc, dst, is_data, start, leave = (a.tolist() for a in (alloc, dst, is_data, leave_start,
                                                              leave))
    pending = in_degree.tolist()
    heappush, heappop = heapq.heappush, heapq.heappop
    rem = list(compute)
    queues: dict[int, list] = {}          # worker -> heap of ready sub-ops
    for s in range(num_subs):
        if pending[s] == 0:
            heappush(queues.setdefault(worker[s], []), (compute[s], -alloc[s], s))
    instant: list[int] = []               # ready dependencies that take no time
    done = [False] * num_deps
    in_flight: list = []                  # heap of the finish times of ready flows
    due: dict[float, list[int]] = {}      # finish time -> the flows finishing then
    # channel -> heap of its ready flows' keys: the first leads; finished flows leave it
    # lazily, when they reach its top
    channel_heap: list[list] = [[] for _ in range(num_channels)]

    def leads(d: int) -> bool:
        """Whether flow ``d`` (ready, not done) is the first of its channel."""
        heap = channel_heap[channel[d]]
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
                raise RuntimeError("stuck")
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
            for d in leave[start[s]:start[s + 1]]:
                c = channel[d]
                if c < 0:
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
                heappush(channel_heap[c], key[d])
        for d in finished_deps:
            done[d] = True
            if is_data[d]:
                child = dst[d]
                pending[child] -= 1
                if pending[child] == 0:
                    heappush(queues.setdefault(worker[child], []),
                             (compute[child], -alloc[child], child))
    return t, exposed
