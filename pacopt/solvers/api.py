"""The front door: ``solve()`` runs a method on an instance and returns a validated solution.

Which methods exist, and how each is loaded, is the registry's business
(:mod:`pacopt.solvers.registry`); this module runs one and validates what it returns.
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

from pacopt.cluster.instance import Instance, load_instance
from pacopt.cluster.jct import JctModel
from pacopt.cluster.simulator import simulate
from pacopt.cluster.solution import Solution
from pacopt.infra.errors import InputError
from pacopt.infra.interrupt import stop_requested, stoppable
from pacopt.solvers.registry import (
    DEFAULT_METHOD,
    METHODS,
    is_online,
    method_entry,
    method_family,
)
from pacopt.solvers.validate import ValidationError, validate

__all__ = ["DEFAULT_METHOD", "METHODS", "InputError", "check_options", "check_time_limit",
           "is_online", "method_family", "solve"]

#: Seeds drawn for a randomised run without one fit in 31 bits (any backend takes them).
SEED_RANGE = 2**31


def check_time_limit(time_limit: float | None) -> None:
    """InputError unless ``time_limit`` is None or a finite number of seconds > 0 (nan would
    end a search at once, inf never)."""
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise InputError(f"--time-limit must be a finite number of seconds > 0, not {time_limit}")


def check_options(method: str, time_limit: float | None, threads: int | None,
                  seed: int | None) -> None:
    """InputError naming the option when ``method``, ``time_limit``, ``threads`` or ``seed`` is
    out of range (checked before any work, so a bad flag costs nothing)."""
    method_family(method)
    check_time_limit(time_limit)
    if threads is not None and threads < 1:
        raise InputError(f"--threads must be >= 1, not {threads}")
    if seed is not None and not 0 <= seed < SEED_RANGE:
        raise InputError(f"--seed must be in [0, {SEED_RANGE}), not {seed}")


def solve(instance: Instance | str | Path, method: str = DEFAULT_METHOD, *,
          time_limit: float | None = None, threads: int | None = None, seed: int | None = None,
          progress: bool = False, model: JctModel | None = None,
          checkpoint: str | Path | None = None) -> Solution:
    """Run ``method`` on ``instance`` (an :class:`Instance` or a path to ``instance.json``).

    The solution is always re-checked by :func:`pacopt.solvers.validate.validate`; a solution that
    fails it comes back with status ``error``, ``validated=False`` and the problems in
    ``metrics["validation_problems"]``. ``time_limit`` (seconds; default 120) and ``threads``
    bound exact methods; online heuristics take one pass and ignore them. ``seed`` seeds
    randomised methods; without one a seed is drawn, used and recorded, so every run can be
    repeated. ``progress`` shows a progress bar (online) or a live line with incumbent, bound and
    gap (exact). Ctrl-C stops the method and returns what it has, with ``interrupted`` set.
    ``checkpoint`` names the learned agent's checkpoint (``pac-ml``; default: the shipped one).
    """
    check_options(method, time_limit, threads, seed)
    if not isinstance(instance, Instance):
        instance = load_instance(instance)
    if seed is None:
        seed = random.randrange(SEED_RANGE)
    model = model or JctModel(instance.cluster, instance.model)
    started = time.perf_counter()
    entry = method_entry(method)
    with stoppable():
        if entry.online:
            policy = entry.load()(method, instance, checkpoint=checkpoint)
            solution = simulate(instance, _Stoppable(policy), seed=seed, model=model,
                                progress=progress)
        else:
            if checkpoint is not None:
                raise InputError(f"--checkpoint applies to the learned method only, not "
                                 f"'{method}'")
            solution = entry.load()(instance, method, model, time_limit=time_limit,
                                    threads=threads, seed=seed, progress=progress)
        solution.interrupted = stop_requested()
    solution.solve_seconds = time.perf_counter() - started
    solution.seed = seed
    try:
        validate(instance, solution, JctModel(instance.cluster, instance.model))
    except ValidationError as err:
        solution.status = "error"
        solution.metrics["validation_problems"] = err.problems
    return solution


class _Stoppable:
    """An online policy that, once a stop is requested, rejects every job still to come: the
    jobs decided so far stand, and the episode ends at once with a complete, valid solution."""

    def __init__(self, policy):
        self.policy = policy
        self.name = policy.name

    def reset(self, seed: int | None) -> None:
        self.policy.reset(seed)

    def choose(self, decision) -> int:
        return 0 if stop_requested() else self.policy.choose(decision)

    def __getattr__(self, name):  # anything else a policy offers
        return getattr(self.policy, name)
