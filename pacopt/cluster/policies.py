"""Online partitioning policies: at each arrival, pick a degree (0 = reject).

A policy implements :class:`Policy`: ``choose(decision) -> int``. The :class:`Decision` shows the
job, its per-degree table (empty cluster), the live cluster state, and the live per-degree table
:meth:`Decision.options` (the episode's placer against the live state: placeable, footprint, JCT,
one vectorised call, cached), with the placement itself for any degree on demand and what each
degree would cost (:meth:`Decision.offers`: workers, JCT, free blocks left), so that a policy can
compare degrees under the placer in use. A policy may also place the job itself: ``choose`` then
returns :class:`Placed` (a degree and a placement), which the simulator checks is valid and free
(:func:`~pacopt.cluster.placers.check_explicit`). The learned agent plugs in the same way.

Two action sets are on offer. ``valid_degrees``: the degrees the placer can place now (pacopt's
own, used by ``min-feasible``). ``reference_degrees``: the reference's action mask, 1 and the even
degrees that do not exceed the free workers and have a RAMP shape, without checking that the job
fits the fragmented cluster (one fix: a degree whose per-op counts can never be placed, even on an
empty cluster, is left out; the reference offers it and always blocks, which never happens on the
paper's five graphs); the paper's baselines (``sequential``, ``para-max``, ``para-min``,
``random``) choose from it, as the reference's agents do, so a choice can still be blocked with
``no_placement``.

The baselines an agent is judged against (:data:`BASELINES`) use the live table: ``fixed:K``
(K if placeable now and in time, else reject; in time: the JCT meets the deadline and, in an
episode with a horizon, ends by it, :attr:`Decision.limit_ms`, as the offline rules' options do), ``fixed-or-min:K`` (else min-feasible) and
``tuned``, the best of those and of the heuristics per beta distribution on the tuning seeds,
chosen per (preset, placer) (``pacopt/data/tuned.json``, written by
``benchmarks/tune_baselines.py``), played online for the distribution the betas arrived so far
look like (:class:`BetaRecogniser`). ``tuned-given-label`` (:class:`TunedGivenLabel`) is not
online: it reads every job's beta first, and is kept as the oracle ``tuned`` is compared with.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from pacopt.cluster.graph import JobGraph
from pacopt.cluster.jct import JctModel, JobTable, LiveOptions
from pacopt.cluster.placement import Placement
from pacopt.cluster.placers import free_block_score
from pacopt.cluster.recognise import BetaRecogniser, instance_distribution
from pacopt.cluster.state import EPS_MS, ClusterState
from pacopt.infra.errors import InputError

if TYPE_CHECKING:
    from pacopt.cluster.instance import Instance


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
    placer: str = "first-fit"  # the episode's placer (pacopt.cluster.placers)
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
        if not self.placeable(degree):
            return None
        options = self.options()
        if options.placements is not None:
            return options.placements[degree]
        return self.model.place(self.graph, self.table.counts[degree], self.state.occupied)

    def free_blocks(self) -> np.ndarray:
        """Per degree, the weighted free blocks left once the placer's footprint is placed
        (:class:`~pacopt.cluster.placers.FreeBlockScore`, the quantity best fit maximises); NaN
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
    :meth:`~pacopt.cluster.topology.RampCluster.blocks`). The simulator checks that it is valid
    and free now and raises :class:`~pacopt.cluster.placers.InvalidPlacement` if not; it never
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


def min_feasible(decision: Decision) -> int:
    """The smallest degree placeable now whose JCT meets the deadline and ends by the horizon
    (:attr:`Decision.limit_ms`); 0 if none does."""
    # jct_ms is inf where not placeable, so one comparison covers both conditions
    ok = np.flatnonzero(decision.options().jct_ms <= decision.limit_ms)
    return int(ok[0]) if len(ok) else 0


class Policy(Protocol):
    """An online policy. ``reset`` is called once per episode with the episode's seed;
    ``choose`` returns a degree (0 = reject; the placer places it) or a :class:`Placed`."""

    name: str

    def reset(self, seed: int | None) -> None: ...

    def choose(self, decision: Decision) -> int | Placed: ...


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
    """The smallest degree whose computed JCT, placed now, meets the deadline (and ends by the
    horizon); else reject."""

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


def _in_time(decision: Decision, degree: int) -> bool:
    """``degree`` can be placed now and its JCT meets the deadline and ends by the horizon."""
    return degree <= decision.max_degree and decision.options().jct_ms[degree] <= decision.limit_ms


class FixedDegree(_Deterministic):
    """Degree K when the placer can place it now and its JCT meets the deadline (and ends by the
    horizon); else reject."""

    def __init__(self, degree: int) -> None:
        self.degree = degree
        self.name = f"fixed:{degree}"

    def choose(self, decision: Decision) -> int:
        return self.degree if _in_time(decision, self.degree) else 0


class FixedOrMin(_Deterministic):
    """Degree K when it can be placed now and meets the deadline (and ends by the horizon); else
    the min-feasible degree (else reject)."""

    def __init__(self, degree: int) -> None:
        self.degree = degree
        self.name = f"fixed-or-min:{degree}"

    def choose(self, decision: Decision) -> int:
        return self.degree if _in_time(decision, self.degree) else min_feasible(decision)


#: Where ``tuned`` reads its choices (written by ``benchmarks/tune_baselines.py``).
TUNED_PATH = Path(__file__).resolve().parents[1] / "data" / "tuned.json"


@lru_cache(maxsize=None)
def load_tuned(path: Path = TUNED_PATH) -> dict:
    """The tuned choices: ``{"presets": {preset: {dist: {"choice": name, "blocking": {...}}}},
    "placers": {placer: {preset: {dist: ...}}}}``; ``presets`` holds first-fit's, ``placers``
    every other placer's (tuned under that placer)."""
    try:
        data = json.loads(Path(path).read_text())
        data["presets"]["ddls"]["A"]["choice"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InputError(f"tuned baseline data {path} is missing or corrupt ({err}); "
                         "regenerate it with benchmarks/tune_baselines.py") from None
    return data


def tuned_tables(placer: str = "first-fit") -> dict:
    """The tuned choices under ``placer``, per preset (``{}`` where it was not tuned)."""
    data = load_tuned()
    if placer == "first-fit":
        return data["presets"]
    return data.get("placers", {}).get(placer, {})


def tuned_basis(preset: str, placer: str = "first-fit") -> tuple[str, str]:
    """The (preset, placer) whose tuning ``tuned`` uses for ``(preset, placer)``: itself when
    tuned, else first-fit's under the same preset, else ``ddls`` first-fit's."""
    if preset in tuned_tables(placer):
        return preset, placer
    return (preset if preset in tuned_tables() else "ddls"), "first-fit"


def tuned_choice(distribution: str, preset: str = "ddls", placer: str = "first-fit") -> str:
    """The policy ``tuned`` plays for one of the paper's beta distributions (A-D) under
    ``preset`` and ``placer`` (see :func:`tuned_basis` where that pair was not tuned)."""
    preset, placer = tuned_basis(preset, placer)
    table = tuned_tables(placer)[preset]
    if distribution not in table:
        raise InputError(f"tuned: no choice for beta distribution '{distribution}'; "
                         f"known: {', '.join(table)}")
    return table[distribution]["choice"]


def tuned_default_choice(preset: str = "ddls", placer: str = "first-fit") -> str:
    """What ``tuned`` plays before it recognises the distribution: the policy with the lowest
    blocking rate on average over A-D on the tuning seeds (``pacopt/data/tuned.json``), under
    ``preset`` and ``placer`` (see :func:`tuned_basis`)."""
    preset, placer = tuned_basis(preset, placer)
    table = tuned_tables(placer)[preset]
    common = set.intersection(*(set(entry["blocking"]) for entry in table.values()))
    # ties (rules that act alike) go to the first listed
    order = [name for name in table[next(iter(table))]["blocking"] if name in common]
    return min(order, key=lambda name: sum(entry["blocking"][name] for entry in table.values()))


def _basis_note(tuned_preset: str, tuned_placer: str, preset: str, placer: str) -> str:
    basis = "" if tuned_preset == preset else f", {tuned_preset} tuning"
    if tuned_placer != placer:
        basis += f", {tuned_placer} tuning"
    return basis


class Tuned:
    """The best fixed:K, fixed-or-min:K or heuristic for the beta distribution the jobs arrived
    so far look like, chosen on the tuning seeds only, per preset and placer
    (pacopt/data/tuned.json); it reads no job before its arrival.

    At each arrival it asks a :class:`BetaRecogniser` fed the betas so far (by default it
    guesses from the first arrival on); without a guess it plays the policy best on average over
    A-D on the tuning seeds (:func:`tuned_default_choice`). One inner policy per choice, kept
    for the episode. Its name records the last choice and distribution,
    ``tuned(online: fixed-or-min:6, A)``; :attr:`played` counts the decisions of each choice.
    ``tuned-given-label`` (:class:`TunedGivenLabel`) is the former rule, which reads every
    job's beta at the start."""

    def __init__(self, instance: Instance | None = None) -> None:
        preset = instance.model.preset if instance is not None else "ddls"
        placer = instance.model.placement if instance is not None else "first-fit"
        self.tuned_preset, self.tuned_placer = tuned_basis(preset, placer)
        self._basis = _basis_note(self.tuned_preset, self.tuned_placer, preset, placer)
        self.default = tuned_default_choice(self.tuned_preset, self.tuned_placer)
        self.choices = {dist: tuned_choice(dist, self.tuned_preset, self.tuned_placer)
                        for dist in tuned_tables(self.tuned_placer)[self.tuned_preset]}
        self.inner = {name: make_policy(name, instance)
                      for name in dict.fromkeys([self.default, *self.choices.values()])}
        self.recogniser = BetaRecogniser()
        self.reset(None)

    def reset(self, seed: int | None) -> None:
        for policy in self.inner.values():
            policy.reset(seed)
        self.recogniser.reset()
        self.distribution: str | None = None  # the last guess (None: the default played)
        self.choice: str | None = None  # the last choice played
        self.played: dict[str, int] = {}
        self.name = "tuned(online)"

    def choose(self, decision: Decision) -> int:
        self.recogniser.note(decision.job_index, decision.max_jct_fraction)
        self.distribution = self.recogniser.guess
        self.choice = self.default if self.distribution is None else self.choices[self.distribution]
        self.played[self.choice] = self.played.get(self.choice, 0) + 1
        self.name = f"tuned(online: {self.choice}, {self.distribution or 'default'}{self._basis})"
        return self.inner[self.choice].choose(decision)


class TunedGivenLabel:
    """tuned given the instance's beta distribution label: an oracle that reads every job's
    beta, future jobs included, before the first arrival (their Kolmogorov-Smirnov-nearest
    paper distribution) and plays that distribution's tuned choice throughout (tuned's former
    rule).

    Not an online policy; kept to show what knowing the label is worth."""

    reads_future = True  # the registry lists it as an oracle

    def __init__(self, instance: Instance | None = None) -> None:
        preset = instance.model.preset if instance is not None else "ddls"
        placer = instance.model.placement if instance is not None else "first-fit"
        # a paper workload's own distribution; otherwise the closest; without jobs, A
        self.distribution = instance_distribution(instance) or "A"
        self.tuned_preset, self.tuned_placer = tuned_basis(preset, placer)
        self.choice = tuned_choice(self.distribution, self.tuned_preset, self.tuned_placer)
        self.inner = make_policy(self.choice, instance)
        basis = _basis_note(self.tuned_preset, self.tuned_placer, preset, placer)
        self.name = f"tuned-given-label({self.choice}, {self.distribution}{basis})"

    def reset(self, seed: int | None) -> None:
        self.inner.reset(seed)

    def choose(self, decision: Decision) -> int:
        return self.inner.choose(decision)


#: The baselines an agent is judged against; a name ending in ``:K`` takes a degree K >= 1.
BASELINES = {"fixed:K": FixedDegree, "fixed-or-min:K": FixedOrMin, "tuned": Tuned,
             "tuned-given-label": TunedGivenLabel}
#: Every online policy by name (the learned agent registers itself with the solvers).
POLICIES = {**HEURISTICS, **BASELINES}


def make_policy(name: str, instance: Instance | None = None, checkpoint=None) -> Policy:
    """A fresh policy by name (see :data:`POLICIES`): ``fixed:4``, ``fixed-or-min:8``, ``tuned``,
    ``tuned-given-label`` or a heuristic. ``instance`` gives ``tuned`` its preset and placer
    (and ``tuned-given-label`` every job's beta) and bounds K by the instance's largest
    degree. Unknown names, bad K and a ``checkpoint`` (these
    policies learn nothing) raise :class:`InputError`."""
    if checkpoint is not None:
        raise InputError(f"--checkpoint applies to the learned method only, not '{name}'")
    if name in HEURISTICS:
        return HEURISTICS[name]()
    if name == "tuned":
        return Tuned(instance)
    if name == "tuned-given-label":
        return TunedGivenLabel(instance)
    family, _, arg = name.partition(":")
    cls = BASELINES.get(f"{family}:K")
    if cls is None or not _:
        raise InputError(f"unknown policy '{name}'; known: {', '.join(POLICIES)}")
    if not arg.isdigit() or int(arg) < 1:
        raise InputError(f"policy '{name}': K must be an integer >= 1, got '{arg}'")
    top = instance.model.max_partitions_per_op if instance is not None else None
    if top is not None and int(arg) > top:
        raise InputError(f"policy '{name}': K must be at most the instance's "
                         f"max_partitions_per_op ({top})")
    return cls(int(arg))
