"""Communication times on RAMP (``docs/model.md#communication``), in seconds.

The caller converts to the millisecond clock with :attr:`ModelSettings.comm_scale` (the ``ddls``
preset adds seconds to milliseconds unconverted, as the reference does).
"""

from __future__ import annotations

import math

from pacopt.model.topology import RampCluster

MEMORY_BANDWIDTH = 2e12  # bytes/s: the reduction's memory-bound add (reference MEM_FRQ)


def one_to_one_seconds(nbytes: float, cluster: RampCluster) -> float:
    """A point-to-point transfer between two different servers: latency + 2 x I/O + bytes / B."""
    if nbytes <= 0:
        return 0.0
    return (cluster.propagation_latency + 2 * cluster.worker_io_latency
            + nbytes / cluster.channel_bandwidth)


def all_reduce_seconds(total_bytes: float, servers: set[int], cluster: RampCluster,
                       physical: bool) -> float:
    """RAMP's hierarchical all-reduce of ``total_bytes`` over ``servers``.

    Stages run over the distinct communication groups, server slots and racks the servers span;
    each stage is a reduce-scatter and an all-gather (hence the factor 2) plus a memory-bound add.
    The reference divides the per-transceiver rate by C a second time (``physical=False``);
    ``physical=True`` uses each transceiver's own rate, the channel bandwidth.
    """
    if len(servers) <= 1 or total_bytes <= 0:
        return 0.0
    return spread_all_reduce_seconds(total_bytes, spread(servers, cluster), cluster, physical)


def spread(servers: set[int], cluster: RampCluster) -> tuple[int, int, int]:
    """How many distinct communication groups, racks and server slots ``servers`` span: all
    that :func:`all_reduce_seconds` reads of them."""
    coords = [cluster.coords[s] for s in servers]
    return (len({c for c, _, _ in coords}), len({r for _, r, _ in coords}),
            len({s for _, _, s in coords}))


def spread_all_reduce_seconds(total_bytes: float, span: tuple[int, int, int],
                              cluster: RampCluster, physical: bool) -> float:
    """:func:`all_reduce_seconds` over servers of :func:`spread` ``span`` (two or more)."""
    groups, racks, slots = span
    x = cluster.communication_groups
    rate = cluster.channel_bandwidth if physical else cluster.channel_bandwidth / x
    latency = cluster.propagation_latency + 2 * cluster.worker_io_latency
    comm = comp = 0.0
    message = total_bytes
    for size in (groups, min(groups, slots), racks, math.ceil(slots / x)):
        message = math.ceil(message / size)
        if size > 1:
            transceivers = min(x, x // (size - 1))  # contending racks are always 1 on RAMP
            comm += latency + message / (transceivers * rate)
            comp += message * (size + 1) / MEMORY_BANDWIDTH
    return 2 * comm + comp
