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
from pacopt.solvers.exact import EXACT_METHODS, run_exact
from pacopt.solvers.validate import ValidationError, validate

#: Methods ``solve`` knows, with a one-line description each.
METHODS = {**{name: "online: " + (cls.__doc__ or "").strip().split("\n")[0]
              for name, cls in HEURISTICS.items()}, **EXACT_METHODS}
DEFAULT_METHOD = "min-feasible"


def solve(instance: Instance | str | Path, method: str = DEFAULT_METHOD, *,
          time_limit: float | None = None, threads: int | None = None, seed: int | None = None,
          progress: bool = False, model: JctModel | None = None) -> Solution:
    """Run ``method`` on ``instance`` (an :class:`Instance` or a path to ``instance.json``).

    The solution is always re-checked by :func:`pacopt.solvers.validate.validate`; a solution that
    fails it comes back with status ``error``, ``validated=False`` and the problems in
    ``metrics["validation_problems"]``. ``time_limit`` (seconds; default 120) and ``threads``
    bound exact methods; online heuristics take one pass and ignore them. ``seed`` seeds
    randomised methods. ``progress`` shows a progress bar (online) or prints incumbent, bound and
    gap as they improve (exact).
    """
    if not isinstance(instance, Instance):
        instance = load_instance(instance)
    if method not in METHODS:
        raise InputError(f"unknown method '{method}'; known: {', '.join(METHODS)}")
    if time_limit is not None and time_limit <= 0:
        raise InputError("--time-limit must be > 0 seconds")
    if threads is not None and threads < 1:
        raise InputError("--threads must be >= 1")
    model = model or JctModel(instance.cluster, instance.model)
    started = time.perf_counter()
    if method in EXACT_METHODS:
        solution = run_exact(instance, method, model, time_limit=time_limit, threads=threads,
                             progress=progress)
    else:
        solution = simulate(instance, make_policy(method), seed=seed, model=model,
                            progress=progress)
    solution.solve_seconds = time.perf_counter() - started
    try:
        validate(instance, solution, JctModel(instance.cluster, instance.model))
    except ValidationError as err:
        solution.status = "error"
        solution.metrics["validation_problems"] = err.problems
    return solution
