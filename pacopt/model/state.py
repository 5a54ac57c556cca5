"""The live cluster state seen by online policies: who holds which worker, what is running."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pacopt.model.topology import RampCluster

#: Event tolerance (ms): a job ending within it of an arrival has freed its workers (reference).
EPS_MS = 1e-7


@dataclass
class ClusterState:
    """Occupancy of the cluster at ``now_ms``.

    ``owner[i]`` is the index (in the instance's job list) of the job holding server i, or -1;
    ``occupied`` is the same as a bitmask (bit i set <=> server i busy), the placer's input.
    """

    cluster: RampCluster
    now_ms: float = 0.0
    occupied: int = 0
    owner: np.ndarray = field(default=None)  # type: ignore[assignment]
    running: dict[int, float] = field(default_factory=dict)  # job index -> end time (ms)
    held: dict[int, int] = field(default_factory=dict)  # job index -> its servers' bitmask

    def __post_init__(self) -> None:
        if self.owner is None:
            self.owner = np.full(self.cluster.num_servers, -1, dtype=np.int64)

    @property
    def num_free(self) -> int:
        return self.cluster.num_servers - self.occupied.bit_count()

    @property
    def num_running(self) -> int:
        return len(self.running)

    def copy(self) -> ClusterState:
        """An independent copy (what-if simulations fork the live state)."""
        return ClusterState(self.cluster, self.now_ms, self.occupied, self.owner.copy(),
                            dict(self.running), dict(self.held))

    def free_mask(self) -> np.ndarray:
        """Boolean array: server i is free."""
        return self.owner < 0

    def mount(self, job: int, mask: int, servers: tuple[int, ...], end_ms: float) -> None:
        """Give ``servers`` (bitmask ``mask``) to ``job`` until ``end_ms``."""
        if self.occupied & mask:
            raise RuntimeError("placement overlaps a busy worker")  # a placer bug, never input
        self.occupied |= mask
        self.owner[list(servers)] = job
        self.running[job] = end_ms
        self.held[job] = mask

    def worker_ms_held(self) -> float:
        """Worker-time (server-ms) the running jobs still hold after ``now_ms``."""
        return sum(self.held[job].bit_count() * max(0.0, end - self.now_ms)
                   for job, end in self.running.items())

    def release(self, job: int) -> None:
        """Free every server ``job`` holds."""
        self.occupied &= ~self.held.pop(job)
        self.owner[self.owner == job] = -1
        del self.running[job]
