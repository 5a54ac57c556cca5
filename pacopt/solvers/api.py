"""The front door: ``solve()`` runs a method on an instance and returns a validated solution.

Which methods exist, and how each is loaded, is the registry's business
(:mod:`pacopt.solvers.registry`); this module runs one and validates what it returns.
"""

from __future__ import annotations

import math
import random
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from pacopt.infra.collector import fewer_collections
from pacopt.infra.errors import InputError, warn
from pacopt.infra.interrupt import stop_requested, stoppable
from pacopt.model.instance import Instance, load_instance
from pacopt.model.jct import JctModel
from pacopt.model.placers import PLACERS, check_placer
from pacopt.model.simulator import simulate
from pacopt.model.sizes import check_result_size
from pacopt.model.solution import Solution
from pacopt.model.timing_cache import cache_dir
from pacopt.solvers.presimulate import start_beside
from pacopt.solvers.registry import (
    DEFAULT_METHOD,
    METHODS,
    is_online,
    method_entry,
    method_family,
)
from pacopt.solvers.validate import ValidationError, validate

__all__ = ["DEFAULT_METHOD", "METHODS", "PLACERS", "InputError", "check_options",
           "check_placement", "check_run", "check_time_limit", "is_online", "method_family", "solve"]

#: Seeds drawn for a randomised run without one fit in 31 bits (any backend takes them).
SEED_RANGE = 2**31


def check_time_limit(time_limit: float | None) -> None:
    """InputError unless ``time_limit`` is None or a finite number of seconds > 0 (nan would
    end a search at once, inf never)."""
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise InputError(f"--time-limit must be a finite number of seconds > 0, not {time_limit}")


def check_options(method: str, time_limit: float | None, threads: int | None,
                  seed: int | None, placement: str | None = None) -> None:
    """InputError naming the option when ``method``, ``time_limit``, ``threads``, ``seed`` or
    ``placement`` is out of range (checked before any work, so a bad flag costs nothing; whether
    the placer fits the instance's preset is :func:`check_placement`'s, once it is read)."""
    method_family(method)
    if placement is not None:
        if not isinstance(placement, str) or placement not in PLACERS:
            raise InputError(f"--placement: unknown placer '{placement}'; known: "
                             f"{', '.join(PLACERS)}")
        if not is_online(method):
            raise InputError(f"--placement applies to online methods only; '{method}' chooses "
                             "every footprint itself")
    check_time_limit(time_limit)
    if threads is not None and threads < 1:
        raise InputError(f"--threads must be >= 1, not {threads}")
    if seed is not None and not 0 <= seed < SEED_RANGE:
        raise InputError(f"--seed must be in [0, {SEED_RANGE}), not {seed}")


def check_placement(instance: Instance, placement: str | None) -> Instance:
    """``instance`` with its online placer set to ``placement`` (the flag wins over the
    instance's ``model.placement``); InputError if the placer does not fit its preset."""
    if placement is None:
        return instance
    check_placer(placement, instance.model.preset, "--placement")
    return replace(instance, model=replace(instance.model, placement=placement))


def check_run(instance: Instance, method: str, *, checkpoint: str | Path | None = None,
              placement: str | None = None):
    """What :func:`solve` checks of ``method`` on ``instance`` before running it, beyond
    :func:`check_options`: the placer fits the preset, the result can be read back
    (:func:`~pacopt.model.sizes.check_result_size`), an online method's policy can be built for
    this instance (``fixed:99`` on degrees up to 16, a checkpoint trained for another cluster),
    and a ``checkpoint`` goes with the learned method only. Returns the instance as it will run
    (its placer set) and the policy (None for other kinds); InputError otherwise. Studies call it
    for every cell before running any."""
    instance = check_placement(instance, placement)
    check_result_size(instance)
    entry = method_entry(method)
    if entry.online:
        return instance, entry.load()(method, instance, checkpoint=checkpoint)
    if checkpoint is not None:
        raise InputError(f"--checkpoint applies to the learned method only, not '{method}'")
    return instance, None


def solve(instance: Instance | str | Path, method: str = DEFAULT_METHOD, *,
          time_limit: float | None = None, threads: int | None = None, seed: int | None = None,
          progress: bool = False, model: JctModel | None = None,
          checkpoint: str | Path | None = None, placement: str | None = None) -> Solution:
    """Run ``method`` on ``instance`` (an :class:`Instance` or a path to ``instance.json``).

    The solution is always re-checked by :func:`pacopt.solvers.validate.validate`; a solution that
    fails it comes back with status ``error``, ``validated=False`` and the problems in
    ``metrics["validation_problems"]``. ``time_limit`` (seconds; default 120) and ``threads``
    bound exact methods; online heuristics take one pass and ignore them. ``seed`` seeds
    randomised methods; without one a seed is drawn, used and recorded, so every run can be
    repeated. ``progress`` shows a progress bar (online) or a live line with incumbent, bound and
    gap (exact). Ctrl-C stops the method and returns what it has, with ``interrupted`` set.
    ``checkpoint`` names the learned agent's checkpoint (``pac-ml``; default: the shipped ones,
    per decision the fine-tune of the distribution recognised from the arrivals so far).
    ``placement`` is an online method's placer (``first-fit``, ``best-fit``, ``compact``:
    :mod:`pacopt.model.placers`), overriding the instance's ``model.placement``; the solution
    records it.
    """
    check_options(method, time_limit, threads, seed, placement)
    if not isinstance(instance, Instance):
        instance = load_instance(instance)
    instance, policy = check_run(instance, method, checkpoint=checkpoint, placement=placement)
    if seed is None:
        seed = random.randrange(SEED_RANGE)
    model = model or JctModel(instance.cluster, instance.model)
    started = time.perf_counter()
    entry = method_entry(method)
    # a Ctrl-C after the method has finished, while its solution is validated, keeps it (and
    # marks it interrupted, so that the command exits 130)
    with stoppable(), ExitStack() as helper:
        steps = None
        if entry.online:
            beside = start_beside(instance)
            if beside is not None:
                helper.enter_context(beside)
            with fewer_collections():  # not for exact methods: their peak memory grew with it
                solution = simulate(instance, policy, seed=seed, model=model,
                                    progress=progress,
                                    on_record=None if beside is None else beside.note)
            if beside is not None:
                steps = beside.timings()
        else:
            solution = entry.load()(instance, method, model, time_limit=time_limit,
                                    threads=threads, seed=seed, progress=progress)
        solution.interrupted = stop_requested()
        solution.solve_seconds = time.perf_counter() - started
        solution.seed = seed
        try:
            with fewer_collections():
                # its own timings, never the solver's cache (some simulated by its helper)
                validate(instance, solution, steps=steps)
        except ValidationError as err:
            solution.status = "error"
            solution.metrics["validation_problems"] = err.problems
            if any("re-simulated" in problem for problem in err.problems):
                warn(f"the method's JCTs differ from the validator's own: if the timing cache "
                     f"in '{cache_dir()}' was edited or copied from elsewhere, delete it")
        # the method's state is freed here, where Ctrl-C still only asks for a stop: freed by
        # the return, a large episode's took long enough for a Ctrl-C to end a command
        # before it wrote the result
        del policy, model
        solution.interrupted = solution.interrupted or stop_requested()
    return solution
