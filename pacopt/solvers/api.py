"""The front door: ``solve()`` runs a method on an instance and returns a validated solution.

**Registering a method** is one line in :data:`METHODS` (name -> one-line description, shown by
``solve --help``). A name ending in ``:K`` is a family taking a parameter (``fixed:K`` accepts
``fixed:4``). Methods listed in :data:`RUNNERS` run through their function (imported on
demand); every other method is an online policy, built by
:func:`pacopt.cluster.policies.make_policy` and run through the online simulator.
"""

from __future__ import annotations

import importlib
import math
import random
import time
from pathlib import Path

from pacopt.cluster.errors import InputError
from pacopt.cluster.instance import Instance, load_instance
from pacopt.cluster.jct import JctModel
from pacopt.cluster.policies import POLICIES, make_policy
from pacopt.cluster.simulator import simulate
from pacopt.cluster.solution import Solution
from pacopt.formulations.interrupt import stop_requested, stoppable
from pacopt.solvers.exact import EXACT_METHODS
from pacopt.solvers.validate import ValidationError, validate

#: Methods ``solve`` knows, with a one-line description each (see the module doc).
METHODS = {**{name: "online: " + " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
              for name, cls in POLICIES.items()}, **EXACT_METHODS}
DEFAULT_METHOD = "min-feasible"

#: Methods that are not online policies: family -> (module, function), imported on demand. The
#: function is called as ``run(instance, method, model, time_limit=, threads=, seed=,
#: progress=)`` and returns a :class:`Solution` (not yet validated).
RUNNERS = {name: ("pacopt.solvers.exact", "run_exact") for name in EXACT_METHODS}
RUNNERS["lp-round"] = ("pacopt.formulations.lp_round", "run_lp_round")
METHODS["lp-round"] = ("offline: LP relaxation with randomised rounding and re-placement (Yu et "
                       "al.), best of 48 seeded rounds; the worker-count LP as bound")

#: Online policies that live above ``cluster`` (imported on demand): name -> (module, class),
#: built as ``cls(instance, checkpoint=...)``.
POLICY_CLASSES = {"pac-ml": ("pacopt.learned.agent", "LearnedPolicy"),
                  "lp-online": ("pacopt.formulations.lp_online", "LpOnline")}
METHODS["lp-online"] = ("online: at each arrival an LP over the running jobs, the arriving job "
                        "and sampled future arrivals; the arriving job's degree is rounded from it")
METHODS["pac-ml"] = ("online: the learned agent (GNN + masked PPO, PAC-ML's idea); the shipped "
                     "checkpoint for the instance's preset unless --checkpoint")

#: Seeds drawn for a randomised run without one fit in 31 bits (any backend takes them).
SEED_RANGE = 2**31


def method_family(method: str) -> str:
    """The :data:`METHODS` key ``method`` belongs to (``fixed:4`` -> ``fixed:K``); InputError
    naming the known methods when there is none. A recorded name that carries its choice,
    ``tuned(fixed-or-min:6, A)``, belongs to ``tuned``."""
    if method in METHODS:
        return method
    if method.endswith(")") and method.partition("(")[0] in METHODS:
        return method.partition("(")[0]
    head, sep, _ = method.partition(":")
    for key in METHODS:
        if sep and key.partition(":")[0] == head and key.partition(":")[1]:
            return key
    raise InputError(f"--method: unknown method '{method}'; known: {', '.join(METHODS)}")


def is_online(method: str) -> bool:
    """Whether ``method`` is an online policy (it decides jobs one at a time, proves no bound)."""
    return method_family(method) not in RUNNERS


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
    family = method_family(method)
    with stoppable():
        if family in RUNNERS:
            module, function = RUNNERS[family]
            run = getattr(importlib.import_module(module), function)
            solution = run(instance, method, model, time_limit=time_limit, threads=threads,
                           seed=seed, progress=progress)
        else:
            solution = simulate(instance, _Stoppable(_online_policy(method, instance, checkpoint)),
                                seed=seed, model=model,
                                progress=progress)
        solution.interrupted = stop_requested()
    solution.solve_seconds = time.perf_counter() - started
    solution.seed = seed
    try:
        validate(instance, solution, JctModel(instance.cluster, instance.model))
    except ValidationError as err:
        solution.status = "error"
        solution.metrics["validation_problems"] = err.problems
    return solution


def _online_policy(method: str, instance: Instance, checkpoint: str | Path | None):
    """The online policy ``method`` names, for ``instance``."""
    if method in POLICY_CLASSES:
        module, name = POLICY_CLASSES[method]
        return getattr(importlib.import_module(module), name)(instance, checkpoint=checkpoint)
    if checkpoint is not None:
        raise InputError(f"--checkpoint applies to the learned method only, not '{method}'")
    return make_policy(method, instance)


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
