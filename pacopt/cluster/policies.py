"""Online partitioning policies: at each arrival, pick a degree (0 = reject).

A policy implements :class:`Policy`: ``choose(decision) -> int``. The :class:`Decision` shows the
job, its per-degree table (empty cluster), the live cluster state, and the live per-degree table
:meth:`Decision.options` (first-fit against the live state: placeable, footprint, JCT, one
vectorised call, cached), with the placement itself for any degree on demand. The learned agent
plugs in the same way.

Two action sets are on offer. ``valid_degrees``: the degrees first-fit can place now (pacopt's
own, used by ``min-feasible``). ``reference_degrees``: the reference's action mask, 1 and the even
degrees that do not exceed the free workers and have a RAMP shape, without checking that the job
fits the fragmented cluster (one fix: a degree whose per-op counts can never be placed, even on an
empty cluster, is left out; the reference offers it and always blocks, which never happens on the
paper's five graphs); the paper's baselines (``sequential``, ``para-max``, ``para-min``,
``random``) choose from it, as the reference's agents do, so a choice can still be blocked with
``no_placement``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from pacopt.cluster.errors import InputError
from pacopt.cluster.graph import JobGraph
from pacopt.cluster.jct import JctModel, JobTable, LiveOptions
from pacopt.cluster.placement import Placement
from pacopt.cluster.state import ClusterState


@dataclass
class Decision:
    """Everything an online policy may look at for one arriving job."""

    job_index: int
    job_id: str
    graph: JobGraph
    max_jct_fraction: float
    deadline_ms: float
    table: JobTable
    state: ClusterState
    model: JctModel
    _options: LiveOptions | None = field(default=None, repr=False)

    @property
    def max_degree(self) -> int:
        return self.table.max_degree

    def options(self) -> LiveOptions:
        """The live per-degree table (placeable, workers, JCT as placed now), indexed by degree
        0..max; computed once per decision. Every other live query here reads it."""
        if self._options is None:
            self._options = self.model.live_options(self.table, self.state.occupied)
        return self._options

    def placement(self, degree: int) -> Placement | None:
        """First-fit placement at ``degree`` on the servers free now (None: cannot be placed)."""
        if not self.placeable(degree):
            return None
        return self.model.place(self.graph, self.table.counts[degree], self.state.occupied)

    def placeable(self, degree: int) -> bool:
        return bool(self.options().placeable[degree])

    def jct_ms(self, degree: int) -> float:
        """JCT at ``degree`` as it would be placed now; ``inf`` if it cannot be placed."""
        return float(self.options().jct_ms[degree])

    @property
    def valid_degrees(self) -> tuple[int, ...]:
        """Degrees >= 1 that can be placed now, ascending."""
        return tuple(int(d) for d in np.flatnonzero(self.options().placeable))

    @property
    def reference_degrees(self) -> tuple[int, ...]:
        """The reference's action mask (degrees >= 1, ascending), at most the free workers; the
        live fragmentation is ignored (see :func:`reference_degrees`)."""
        return reference_degrees(self.table, self.state.num_free)

    def action_mask(self) -> np.ndarray:
        """Boolean mask over 0..max degree (0, reject, is always allowed)."""
        mask = self.options().placeable.copy()
        mask[0] = True
        return mask


def reference_degrees(table: JobTable, limit: int | None = None) -> tuple[int, ...]:
    """The reference's legal degrees, ascending: 1 or even, placeable on an empty cluster, and at
    most ``limit`` (default: the table's largest degree)."""
    top = table.max_degree if limit is None else min(table.max_degree, limit)
    return tuple(d for d in range(1, top + 1) if (d == 1 or d % 2 == 0) and table.placed[d])


def single_degree(table: JobTable, *, budget: int | None = None,
                  deadline_ms: float | None = None) -> int | None:
    """PAC-ML's single-degree rule for one job on an empty cluster: with ``budget``, the largest
    legal degree whose footprint has at most that many workers; with ``deadline_ms``, the
    smallest legal degree whose JCT meets it. None if no legal degree does."""
    if (budget is None) == (deadline_ms is None):
        raise ValueError("give exactly one of budget and deadline_ms")
    if budget is not None:
        return max((d for d in reference_degrees(table) if table.workers[d] <= budget),
                   default=None)
    return next((d for d in reference_degrees(table) if table.jct_ms[d] <= deadline_ms), None)


def min_feasible(decision: Decision) -> int:
    """The smallest degree placeable now whose JCT meets the deadline; 0 if none does."""
    # jct_ms is inf where not placeable, so one comparison covers both conditions
    ok = np.flatnonzero(decision.options().jct_ms <= decision.deadline_ms)
    return int(ok[0]) if len(ok) else 0


class Policy(Protocol):
    """An online policy. ``reset`` is called once per episode with the episode's seed."""

    name: str

    def reset(self, seed: int | None) -> None: ...

    def choose(self, decision: Decision) -> int: ...


class _Deterministic:
    name = ""

    def reset(self, seed: int | None) -> None:
        """Deterministic policies keep no state."""


class Sequential(_Deterministic):
    """No partitioning: degree 1 whenever a worker is free (the reference's NoParallelism)."""

    name = "sequential"

    def choose(self, decision: Decision) -> int:
        return 1 if decision.reference_degrees else 0


class ParaMax(_Deterministic):
    """The canonical maximum parallelism: the largest degree of the reference's mask (Para_max)."""

    name = "para-max"

    def choose(self, decision: Decision) -> int:
        return max(decision.reference_degrees, default=0)


class ParaMin(_Deterministic):
    """The paper's Para_min: the smallest degree of the reference's mask >= ceil(1 / beta),
    ignoring communication; the largest one if none reaches it."""

    name = "para-min"

    def choose(self, decision: Decision) -> int:
        valid = decision.reference_degrees
        target = math.ceil(1.0 / decision.max_jct_fraction)
        return next((d for d in valid if d >= target), valid[-1] if valid else 0)


class MinFeasible(_Deterministic):
    """The smallest degree whose computed JCT, placed now, meets the deadline; else reject."""

    name = "min-feasible"

    def choose(self, decision: Decision) -> int:
        return min_feasible(decision)


class RandomDegree:
    """Uniform over the reference's mask without 0 (the paper's Random)."""

    name = "random"

    def __init__(self) -> None:
        self.rng = np.random.default_rng()

    def reset(self, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)

    def choose(self, decision: Decision) -> int:
        valid = decision.reference_degrees
        return int(self.rng.choice(valid)) if valid else 0


HEURISTICS = {cls.name: cls for cls in (Sequential, ParaMax, ParaMin, RandomDegree, MinFeasible)}


def make_policy(name: str) -> Policy:
    """A fresh heuristic policy by name (see :data:`HEURISTICS`)."""
    try:
        return HEURISTICS[name]()
    except KeyError:
        raise InputError(f"unknown policy '{name}'; known: {', '.join(HEURISTICS)}") from None
