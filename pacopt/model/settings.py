"""The JCT model's settings (the instance's ``model`` section) and its two presets."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from pacopt.infra.errors import InputError
from pacopt.model.placers import check_placer

PRESETS = ("ddls", "physical")


@dataclass(frozen=True)
class ModelSettings:
    """How jobs are partitioned and timed.

    ``preset``: ``ddls`` reproduces the reference simulator (communication seconds added to a
    millisecond clock, all-reduce bandwidth divided by C twice, one JCT per (graph, degree));
    ``physical`` converts units and uses each transceiver's own rate, and times the actual placement.
    ``quantum_ms``: the minimum op run time; an op of forward time c is split at most into the
    smallest even number >= ceil(c / quantum) pieces.
    ``placement``: the online simulator's placer (:mod:`pacopt.model.placers`): ``first-fit``
    (the reference's), ``best-fit`` or ``compact`` (``physical`` only). Offline methods choose
    every footprint themselves and ignore it.
    """

    preset: str = "ddls"
    max_partitions_per_op: int = 16
    quantum_ms: float = 0.01
    training_steps: int = 50
    placement: str = "first-fit"

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise InputError(f"model.preset must be one of {', '.join(PRESETS)}, got {self.preset!r}")
        for name in ("max_partitions_per_op", "training_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"model.{name} must be an integer >= 1, got {value!r}")
        if not (isinstance(self.quantum_ms, (int, float)) and math.isfinite(self.quantum_ms)
                and self.quantum_ms > 0):
            raise InputError(f"model.quantum_ms must be a number > 0, got {self.quantum_ms!r}")
        check_placer(self.placement, self.preset)

    @property
    def comm_scale(self) -> float:
        """Milliseconds per second of communication: 1 in ``ddls`` (the reference's unit mix)."""
        return 1.0 if self.preset == "ddls" else 1000.0

    def to_dict(self) -> dict:
        return asdict(self)
