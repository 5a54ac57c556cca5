"""The two exact backends agree on the offline optimum of 50 random small instances, and the
optimum dominates every online heuristic on each (the bound the candidate set promises)."""

import random

import pytest
from offline_cases import chain, random_arrivals

from pacopt.formulations.cpsat import solve_cpsat
from pacopt.formulations.milp import solve_milp
from pacopt.formulations.offline import build_problem, to_solution
from pacopt.model.instance import instance_from_dict
from pacopt.model.simulator import simulate
from pacopt.online.policies import HEURISTICS, make_policy
from pacopt.solvers.api import solve
from pacopt.solvers.validate import find_problems


def random_instance(seed):
    rng = random.Random(seed)
    jobs = random_arrivals(rng, 11)
    return instance_from_dict({
        "cluster": {"communication_groups": 2, "racks_per_group": 2, "servers_per_rack": 2},
        "model": {"preset": rng.choice(["ddls", "physical"]), "max_partitions_per_op": 8,
                  "quantum_ms": 0.1, "training_steps": 20},
        "graphs": {"a": chain(rng, "a", 3), "b": chain(rng, "b", 4)},
        "jobs": jobs})


@pytest.mark.parametrize("seed", range(50))
def test_milp_and_cpsat_agree_and_dominate_the_heuristics(seed):
    instance = random_instance(seed)
    problem = build_problem(instance)
    milp = solve_milp(problem, time_limit=30, threads=1)
    cpsat = solve_cpsat(problem, time_limit=30, threads=1)
    assert milp.status == cpsat.status == "optimal"
    assert len(milp.chosen) == len(cpsat.chosen) == milp.bound_accepted == cpsat.bound_accepted
    for result in (milp, cpsat):
        solution = to_solution(problem, result.chosen, method="exact", status=result.status,
                               bound_accepted=result.bound_accepted, solve_seconds=0.0)
        assert find_problems(instance, solution) == []
    if instance.model.preset == "ddls":  # where the candidate set provably bounds them
        for name in HEURISTICS:
            assert len(cpsat.chosen) >= simulate(instance, make_policy(name), seed=0).accepted


@pytest.mark.parametrize("method", ["milp", "cpsat"])
def test_front_door_proves_and_validates(method):
    instance = random_instance(7)
    solution = solve(instance, method, time_limit=30, threads=1)
    assert solution.status == "optimal" and solution.validated
    assert solution.gap == 0.0 and solution.bound_accepted == solution.accepted


def test_the_instances_have_real_contention():
    """Guard against the agreement test going trivial: on a fair share of these instances the
    offline optimum accepts strictly more jobs than the best heuristic."""
    better = 0
    for seed in range(50):
        instance = random_instance(seed)
        optimum = len(solve_cpsat(build_problem(instance), threads=1).chosen)
        best = max(simulate(instance, make_policy(n), seed=0).accepted for n in HEURISTICS)
        better += optimum > best
    assert better >= 5
