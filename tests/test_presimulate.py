"""The validator's helper process (``pacopt.solvers.presimulate``): it simulates the step of
every placement class an episode records, as the validator would, and whatever goes wrong with
it the validator still checks every job."""

from __future__ import annotations

import shutil
import sys
import time

import pytest

from pacopt.infra.interrupt import request_stop, stoppable
from pacopt.model.instance import instance_from_dict
from pacopt.model.jct import JctModel
from pacopt.model.paper_workload import on_cluster, paper_instance_dict
from pacopt.model.simulator import simulate
from pacopt.online.policies import make_policy
from pacopt.solvers import presimulate, validate
from pacopt.solvers.api import solve
from pacopt.solvers.presimulate import Presimulation, start_beside, worth_starting

pytestmark = pytest.mark.usefixtures("pipedream_env")


def _instance(jobs: int, preset: str = "physical", shape=(4, 4, 2), seed: int = 9500):
    data = paper_instance_dict("C", seed, jobs, preset)
    if shape != (4, 4, 2):
        data = on_cluster(data, shape)
    return instance_from_dict(data, source="presimulate-test")


def test_the_helper_simulates_every_class_of_the_episode_as_the_validator_does():
    """The helper's timings are the validator's own model's, class for class, for exactly
    the classes the episode's running jobs fall in, once it has finished what it was sent
    (every placement, the last partial batch too)."""
    instance = _instance(150)
    with Presimulation(instance) as helper:
        solution = simulate(instance, make_policy("random"), seed=3, on_record=helper.note)
        steps = helper.timings(patience=60.0)  # else it would stop where it is (SIGUSR1)
    own = JctModel(instance.cluster, instance.model, persist=False)
    for record in solution.jobs:
        if record.blocks:
            graph = instance.graphs[record.graph]
            placement, counts = validate.rebuild_placement(instance, own, graph, record.degree,
                                                           record.blocks)
            own.timing(graph, counts, placement)
    expected = own.step_timings()
    assert sum(map(len, expected.values())) > 10  # several classes, of several graphs
    assert steps == expected


def test_a_helper_that_fails_leaves_the_validator_to_simulate(monkeypatch):
    """A helper that exits at once: nothing comes back, and the solution is still checked."""
    instance = _instance(60)
    monkeypatch.setattr(sys, "executable", shutil.which("false"))
    with Presimulation(instance) as helper:
        solution = simulate(instance, make_policy("tuned"), seed=1, on_record=helper.note)
        assert helper.timings() == {}
    validate.validate(instance, solution, steps={})
    assert solution.validated


def test_a_stop_request_ends_the_wait_for_the_helper():
    instance = _instance(60)
    with stoppable(), Presimulation(instance) as helper:
        simulate(instance, make_policy("tuned"), seed=1, on_record=helper.note)
        request_stop()
        started = time.perf_counter()
        assert helper.timings() == {}
        assert time.perf_counter() - started < 1.0


def test_only_large_episodes_of_a_main_process_get_the_helper(monkeypatch):
    small, ddls = _instance(5), _instance(5, "ddls", (8, 8, 4))
    large = _instance(5, shape=(8, 8, 4))
    _two_free_cores(monkeypatch)
    assert worth_starting(large) and worth_starting(ddls)
    assert not worth_starting(small)
    monkeypatch.setattr(presimulate, "_cores_taken", lambda: True)  # a study's worker
    assert not worth_starting(large)
    _two_free_cores(monkeypatch)
    monkeypatch.setattr(presimulate, "available_cores", lambda: 1)
    assert not worth_starting(large) and start_beside(large) is None


def _two_free_cores(monkeypatch) -> None:
    """The machine as ``bench_scale.py`` sees it, whatever this test process has loaded."""
    monkeypatch.setattr(presimulate, "available_cores", lambda: 2)
    monkeypatch.setattr(presimulate, "_cores_taken", lambda: False)


def test_a_large_physical_solve_is_validated_with_the_helpers_timings(monkeypatch):
    """End to end at 256 servers: the helper is started, its timings reach the validator, and
    the validator itself simulates none of the classes it already has."""
    _two_free_cores(monkeypatch)
    instance = _instance(120, shape=(8, 8, 4))
    given = []
    original = validate.find_problems

    def find_problems(instance, solution, model=None, steps=None):
        given.append(steps)
        return original(instance, solution, model, steps)

    monkeypatch.setattr(validate, "find_problems", find_problems)
    timings = Presimulation.timings  # the episode may end before the helper has started
    monkeypatch.setattr(Presimulation, "timings", lambda self: timings(self, patience=60.0))
    solution = solve(instance, "tuned", seed=0)
    assert solution.validated and solution.status == "heuristic"
    (steps,) = given
    assert steps and sum(map(len, steps.values())) >= 5
