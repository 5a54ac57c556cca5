"""Online partitioning policies: at each arrival, pick a degree (0 = reject).

Each policy implements :class:`~pacopt.model.decision.Policy`: ``choose(decision)`` returns a
degree, or a degree and a placement together (:class:`~pacopt.model.decision.Placed`), from
what the :class:`~pacopt.model.decision.Decision` shows. The heuristics (``sequential``,
``para-max``, ``para-min``, ``random``) choose from the reference's action set
(``Decision.reference_degrees``), ``min-feasible`` from the placer's (``Decision.valid_degrees``).

The baselines an agent is judged against (:data:`BASELINES`) use the live table: ``fixed:K``
(K if placeable now and in time, else reject; in time: the JCT meets the deadline and, in an
episode with a horizon, ends by it, :attr:`Decision.limit_ms`, as the offline rules' options do), ``fixed-or-min:K`` (else min-feasible) and
``tuned``, the best of those and of the heuristics per beta distribution on the tuning seeds,
chosen per (preset, placer) (``pacopt/data/tuned.json``, written by
``tools/tune_baselines.py``), played online for the distribution the betas arrived so far
look like (:class:`BetaRecogniser`). ``tuned-given-label`` (:class:`TunedGivenLabel`) is not
online: it reads every job's beta first, and is kept as the oracle ``tuned`` is compared with.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pacopt.infra.errors import InputError
from pacopt.model.decision import Decision, Policy
from pacopt.online.recognise import BetaRecogniser, instance_distribution

if TYPE_CHECKING:
    from pacopt.model.instance import Instance


def min_feasible(decision: Decision) -> int:
    """The smallest degree placeable now whose JCT meets the deadline and ends by the horizon
    (:attr:`Decision.limit_ms`); 0 if none does."""
    # degree by degree: those above the answer are never timed
    return next((d for d in range(1, decision.max_degree + 1) if decision.in_time(d)), 0)


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


class FixedDegree(_Deterministic):
    """Degree K when the placer can place it now and its JCT meets the deadline (and ends by the
    horizon); else reject."""

    def __init__(self, degree: int) -> None:
        self.degree = degree
        self.name = f"fixed:{degree}"

    def choose(self, decision: Decision) -> int:
        return self.degree if decision.in_time(self.degree) else 0


class FixedOrMin(_Deterministic):
    """Degree K when it can be placed now and meets the deadline (and ends by the horizon); else
    the min-feasible degree (else reject)."""

    def __init__(self, degree: int) -> None:
        self.degree = degree
        self.name = f"fixed-or-min:{degree}"

    def choose(self, decision: Decision) -> int:
        return self.degree if decision.in_time(self.degree) else min_feasible(decision)


#: Where ``tuned`` reads its choices (written by ``tools/tune_baselines.py``).
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
                         "regenerate it with tools/tune_baselines.py") from None
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
    ``tuned-given-label`` (:class:`TunedGivenLabel`) is the oracle that reads every job's beta
    at the start."""

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
    paper distribution) and plays that distribution's tuned choice throughout.

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
