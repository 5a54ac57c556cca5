"""What the online simulator offers a policy at each arrival, and the :class:`Policy` protocol.

A policy implements :class:`Policy`: ``choose(decision) -> int``. The :class:`Decision` shows the
job, its per-degree table (empty cluster), the live cluster state, and the live per-degree table
:meth:`Decision.options` (the episode's placer against the live state: placeable, footprint, JCT,
one vectorised call, cached), with the placement itself for any degree on demand and what each
degree would cost (:meth:`Decision.offers`: workers, JCT, free blocks left), so that a policy can
compare degrees under the placer in use. A policy may also place the job itself: ``choose`` then
returns :class:`Placed` (a degree and a placement), which the simulator checks is valid and free
(:func:`~pacopt.model.placers.check_explicit`). Every online method (the rules of
:mod:`pacopt.online`, the learned agent) plugs in the same way.

Two action sets are on offer. ``valid_degrees``: the degrees the placer can place now (pacopt's
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

from pacopt.model.first_fit import Placement
from pacopt.model.graph import JobGraph
from pacopt.model.jct import JctModel, JobTable, LiveOptions
from pacopt.model.placers import free_block_score
from pacopt.model.state import EPS_MS, ClusterState


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
    horizon_ms: float | None = None  # the episode's end, if it has one
    placer: str = "first-fit"  # the episode's placer (pacopt.model.placers)
    requested_degree: int | None = None  # the degree the job's user asked for (trace jobs)
    _options: LiveOptions | None = field(default=None, repr=False)

    @property
    def max_degree(self) -> int:
        return self.table.max_degree

    def options(self) -> LiveOptions:
        """The live per-degree table (placeable, workers, JCT as the placer would place the job
        now), indexed by degree 0..max; computed once per decision. Every other live query here
        reads it."""
        if self._options is None:
            self._options = self.model.live_options(self.table, self.state.occupied, self.placer,
                                                    self.deadline_ms)
        return self._options

    def placement(self, degree: int) -> Placement | None:
        """The placer's placement at ``degree`` on the servers free now (None: cannot be
        placed)."""
        if self.placer == "first-fit":  # its own look-up, the options' too: none is timed
            if not self.table.placed[degree]:
                return None
            return self.model.place(self.graph, self.table.counts[degree], self.state.occupied)
        return self._degree(degree)[2]

    def _degree(self, degree: int) -> tuple[bool, float, Placement | None]:
        """Under best fit or compact, ``degree``'s entries of the live options (placeable,
        JCT, placement): from the whole table once it is read, else found for that degree
        alone (:meth:`~pacopt.model.jct.JctModel.menu_degree`: only its footprints timed)."""
        if self._options is not None:
            options = self._options
            placeable = bool(options.placeable[degree])
            return (placeable, float(options.jct_ms[degree]),
                    options.placements[degree] if placeable else None)
        return self.model.menu_degree(self.table, self.state.occupied, self.placer,
                                      self.deadline_ms, degree)  # cached there

    def free_blocks(self) -> np.ndarray:
        """Per degree, the weighted free blocks left once the placer's footprint is placed
        (:class:`~pacopt.model.placers.FreeBlockScore`, the quantity best fit maximises); NaN
        where not placeable. How much a degree costs the jobs still to come."""
        options = self.options()
        if options.free_blocks is not None:
            return options.free_blocks
        out = np.full(len(options.placeable), np.nan)
        degrees = np.flatnonzero(options.placeable)
        if len(degrees):
            out[degrees] = free_block_score(self.model.cluster).left(
                [options.masks[d] for d in degrees], self.state.occupied)
        return out

    def offers(self) -> list[Offer]:
        """What each degree placeable now would be, under the placer in use: its placement,
        workers, JCT and the free blocks it leaves (ascending degree)."""
        options, left = self.options(), self.free_blocks()
        return [Offer(int(d), self.placement(int(d)), int(options.workers[d]),
                      float(options.jct_ms[d]), float(left[d]))
                for d in np.flatnonzero(options.placeable)]

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

    @property
    def remaining_ms(self) -> float:
        """Time left until the episode's horizon (inf without one)."""
        if self.horizon_ms is None:
            return math.inf
        return max(self.horizon_ms - self.state.now_ms, 0.0)

    @property
    def limit_ms(self) -> float:
        """The longest JCT that gets the job accepted: its deadline, or the time left until the
        horizon if that is shorter (a job still running there is blocked, ``horizon``)."""
        return min(self.deadline_ms, self.remaining_ms + EPS_MS)

    def in_time(self, degree: int) -> bool:
        """Whether ``degree`` (1..max) can be placed now and its JCT meets :attr:`limit_ms`.
        Until the live options are read, found for that degree alone (under first fit
        :meth:`~pacopt.model.jct.JctModel.first_fit_jct`): the same answer, with only the
        degrees asked about timed."""
        if not 1 <= degree <= self.max_degree:
            return False
        if self._options is not None:
            return bool(self._options.jct_ms[degree] <= self.limit_ms)
        if self.placer == "first-fit":
            return self.model.first_fit_jct(self.table, degree, self.state.occupied) \
                <= self.limit_ms
        return self._degree(degree)[1] <= self.limit_ms

    def worthwhile_mask(self) -> np.ndarray:
        """Degrees worth choosing: reject, and every degree the placer can place now whose JCT
        meets the deadline and ends by the horizon (:attr:`limit_ms`; any other degree blocks
        the job as reject does, or worse: a job cut by the horizon holds its workers until
        then)."""
        options = self.options()
        mask = options.placeable & (options.jct_ms <= self.limit_ms)
        mask[0] = True
        return mask


@dataclass(frozen=True)
class Offer:
    """One degree as the placer would run it now (:meth:`Decision.offers`)."""

    degree: int
    placement: Placement
    workers: int
    jct_ms: float
    free_blocks: float  # weighted free blocks left once placed (FreeBlockScore)


@dataclass(frozen=True)
class Placed:
    """A policy's choice of degree *and* placement together: ``placement`` gives every forward
    op a RAMP block of its split count at ``degree`` (e.g. an :class:`Offer`'s, or one built from
    :meth:`~pacopt.model.topology.RampCluster.blocks`). The simulator checks that it is valid
    and free now and raises :class:`~pacopt.model.placers.InvalidPlacement` if not; it never
    falls back to the placer."""

    degree: int
    placement: Placement


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


class Policy(Protocol):
    """An online policy. ``reset`` is called once per episode with the episode's seed;
    ``choose`` returns a degree (0 = reject; the placer places it) or a :class:`Placed`."""

    name: str

    def reset(self, seed: int | None) -> None: ...

    def choose(self, decision: Decision) -> int | Placed: ...
