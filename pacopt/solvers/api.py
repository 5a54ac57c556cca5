"""The front door: ``solve()`` runs a method on an instance and returns a validated solution."""

from __future__ import annotations

import time
from pathlib import Path

from pacopt.cluster.errors import InputError
from pacopt.cluster.instance import Instance, load_instance
from pacopt.cluster.jct import JctModel
from pacopt.cluster.policies import HEURISTICS, make_policy
from pacopt.cluster.simulator import simulate
from pacopt.cluster.solution import Solution
from pacopt.solvers.validate import ValidationError, validate

#: Methods ``solve`` knows, with a one-line description each.
METHODS = {name: "online: " + (cls.__doc__ or "").strip().split("\n")[0]
           for name, cls in HEURISTICS.items()}
DEFAULT_METHOD = "min-feasible"


def solve(instance: Instance | str | Path, method: str = DEFAULT_METHOD, *,
          time_limit: float | None = None, seed: int | None = None, progress: bool = False,
          model: JctModel | None = None) -> Solution:
    """Run ``method`` on ``instance`` (an :class:`Instance` or a path to ``instance.json``).

    The solution is always re-checked by :func:`pacopt.solvers.validate.validate`; a solution that
    fails it comes back with status ``error``, ``validated=False`` and the problems in
    ``metrics["validation_problems"]``. ``time_limit`` (seconds) bounds exact methods; online
    heuristics take one pass and ignore it. ``seed`` seeds randomised methods.
    """
    if not isinstance(instance, Instance):
        instance = load_instance(instance)
    if method not in METHODS:
        raise InputError(f"unknown method '{method}'; known: {', '.join(METHODS)}")
    if time_limit is not None and time_limit <= 0:
        raise InputError("--time-limit must be > 0 seconds")
    model = model or JctModel(instance.cluster, instance.model)
    started = time.perf_counter()
    solution = simulate(instance, make_policy(method), seed=seed, model=model, progress=progress)
    solution.solve_seconds = time.perf_counter() - started
    try:
        validate(instance, solution, JctModel(instance.cluster, instance.model))
    except ValidationError as err:
        solution.status = "error"
        solution.metrics["validation_problems"] = err.problems
    return solution
