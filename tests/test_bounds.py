"""The worker-count relaxation solved to its optimum (``solve_relaxation_fully``): on small
instances its proven optimum is never below the offline optimum (exhaustive search, or a proven
CP-SAT solve over several cluster shapes, both presets, with and without a horizon), started
from a schedule it keeps at least that schedule, and it agrees with ``solve_relaxation``."""

from __future__ import annotations

import random

import pytest
from offline_cases import SMALL, chain, random_arrivals, small_problem

from pacopt.formulations.bound import solve_relaxation, solve_relaxation_fully
from pacopt.formulations.cpsat import solve_cpsat
from pacopt.formulations.offline import EPS_MS, build_problem
from pacopt.model.instance import instance_from_dict
from pacopt.model.pipedream import PAPER_GRAPHS
from pacopt.model.simulator import simulate
from pacopt.online.policies import make_policy

#: RAMP shapes of 4-16 servers: (groups, racks per group, servers per rack).
SHAPES = ((2, 2, 2), (4, 2, 1), (2, 1, 2), (4, 4, 1))


def conflict(a, b) -> bool:
    """Two options clash when they share a server while both run."""
    return bool(a.mask & b.mask) and min(a.end_ms, b.end_ms) > max(a.start_ms, b.start_ms) + EPS_MS


def exhaustive_optimum(problem) -> int:
    """The most jobs any conflict-free choice of options accepts, by depth-first search."""
    options = problem.options
    jobs = [group for group in problem.by_job if group]
    best = 0

    def search(i: int, taken: list[int]) -> None:
        nonlocal best
        if len(taken) + len(jobs) - i <= best:
            return
        if i == len(jobs):
            best = len(taken)
            return
        for k in jobs[i]:
            if not any(conflict(options[k], options[t]) for t in taken):
                search(i + 1, taken + [k])
        search(i + 1, taken)

    search(0, [])
    return best


def random_instance(seed):
    rng = random.Random(seed)
    jobs = random_arrivals(rng, 12)
    shape = SHAPES[seed % len(SHAPES)]
    data = {"cluster": dict(zip(("communication_groups", "racks_per_group", "servers_per_rack"),
                                shape)),
            "model": {"preset": ("ddls", "physical")[seed // len(SHAPES) % 2],
                      "max_partitions_per_op": 8, "quantum_ms": 0.1, "training_steps": 20},
            "graphs": {"a": chain(rng, "a", 3), "b": chain(rng, "b", 4)},
            "jobs": jobs}
    if seed % 3 == 0:
        data["horizon_ms"] = jobs[-1]["arrival_ms"] * 0.8
    return instance_from_dict(data)


def degrees(problem, chosen: dict[int, int]) -> dict[int, int]:
    return {j: problem.options[k].degree for j, k in chosen.items()}


@pytest.mark.parametrize("name", SMALL)
def test_proven_optimum_bounds_the_exhaustive_optimum(name):
    problem = small_problem(SMALL[name])
    optimum = exhaustive_optimum(problem)
    relaxed = solve_relaxation_fully(problem, time_limit=30)
    assert relaxed.proven and not relaxed.interrupted
    assert relaxed.bound >= optimum
    assert relaxed.bound <= relaxed.dual + 1e-6 <= relaxed.lp + 2e-6


@pytest.mark.parametrize("seed", range(24))
def test_proven_optimum_bounds_the_proven_offline_optimum(seed):
    instance = random_instance(seed)
    problem = build_problem(instance)
    exact = solve_cpsat(problem, time_limit=30, threads=1)
    assert exact.status == "optimal"
    start = degrees(problem, exact.chosen)
    relaxed = solve_relaxation_fully(problem, time_limit=30, start=start)
    assert relaxed.proven
    assert relaxed.bound >= relaxed.best >= len(exact.chosen)
    assert relaxed.bound == solve_relaxation(problem, time_limit=30).bound
    assert relaxed.bound <= solve_relaxation(problem, integral=False).bound
    # the best selection is a feasible point: each job once, at a degree it has
    assert all(any(problem.options[k].degree == d for k in problem.by_job[j])
               for j, d in relaxed.selection.items())


def test_a_time_limited_search_keeps_its_start_and_a_valid_bound(pipedream_dir):
    """200 paper jobs (not closed in seconds): the best selection is at least the schedule it
    was started from, and every bound is at least that schedule."""
    instance = instance_from_dict({
        "graphs": {g: {"pipedream": str(pipedream_dir / f"{g}.txt")} for g in PAPER_GRAPHS},
        "workload": {"graphs": list(PAPER_GRAPHS), "num_jobs": 200, "interarrival_ms": 1000,
                     "max_jct_fraction": {"paper": "A"}, "seed": 0}})
    problem = build_problem(instance)
    schedule = simulate(instance, make_policy("fixed-or-min:6"), seed=0)
    index = {job.id: j for j, job in enumerate(instance.jobs)}
    start = {index[r.id]: r.degree for r in schedule.jobs if r.accepted}
    relaxed = solve_relaxation_fully(problem, time_limit=3, start=start)
    assert relaxed.best >= schedule.accepted
    assert relaxed.best <= relaxed.bound <= relaxed.dual + 1e-6 <= relaxed.lp + 2e-6
    assert relaxed.seconds < 10


def test_no_columns():
    problem = small_problem([("cnn", 0, 0.0001)])  # no degree meets the deadline
    relaxed = solve_relaxation_fully(problem)
    assert (relaxed.bound, relaxed.best, relaxed.selection) == (0, 0, {})
