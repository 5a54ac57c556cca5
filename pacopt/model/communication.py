"""Communication times on RAMP (``docs/model.md#communication``), in seconds.

The caller converts to the millisecond clock with :attr:`ModelSettings.comm_scale` (the ``ddls``
preset adds seconds to milliseconds unconverted, as the reference does).
"""

from __future__ import annotations

import numpy as np

from pacopt.model.topology import RampCluster

MEMORY_BANDWIDTH = 2e12  # bytes/s: the reduction's memory-bound add (reference MEM_FRQ)


def one_to_one_seconds(nbytes: float, cluster: RampCluster) -> float:
    """A point-to-point transfer between two different servers: latency + 2 x I/O + bytes / B."""
    return float(one_to_one_array(np.float64(nbytes), cluster))


def one_to_one_array(nbytes: np.ndarray, cluster: RampCluster) -> np.ndarray:
    """:func:`one_to_one_seconds` of each of ``nbytes`` (0 where it is not positive)."""
    latency = cluster.propagation_latency + 2 * cluster.worker_io_latency
    return np.where(nbytes > 0, latency + nbytes / cluster.channel_bandwidth, 0.0)


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
    return float(all_reduce_array(np.float64(total_bytes), np.array(span), cluster,
                                  physical))


def all_reduce_array(total_bytes: np.ndarray, spans: np.ndarray, cluster: RampCluster,
                     physical: bool) -> np.ndarray:
    """:func:`spread_all_reduce_seconds` of each ``total_bytes[i]`` over servers of span
    ``spans[i]`` (rows of groups, racks, slots): every collective of a step at once. Each
    operation is the scalar formula's on the same float64 values (after the first stage the
    messages are whole numbers of bytes, far below 2**53, which a float holds exactly)."""
    groups, racks, slots = (spans[..., i] for i in range(3))
    x = cluster.communication_groups
    rate = cluster.channel_bandwidth if physical else cluster.channel_bandwidth / x
    latency = cluster.propagation_latency + 2 * cluster.worker_io_latency
    comm = comp = np.zeros(np.shape(total_bytes))
    message = np.asarray(total_bytes, dtype=float)
    for size in (groups, np.minimum(groups, slots), racks, -(-slots // x)):
        message = np.ceil(message / size)
        transceivers = np.minimum(x, x // np.maximum(size - 1, 1))  # contending racks: 1
        staged = size > 1
        comm = np.where(staged, comm + (latency + message / (transceivers * rate)), comm)
        comp = np.where(staged, comp + message * (size + 1) / MEMORY_BANDWIDTH, comp)
    return 2 * comm + comp
