"""The CP-SAT model of the offline problem: its optimum matches brute force on tiny instances,
every answer is feasible, and hints, time limits, progress reports and Ctrl-C behave."""

from __future__ import annotations

import json
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from offline_cases import HAND_JOBS, SMALL, small_problem

from pacopt.formulations.cpsat import build_model, solve_cpsat
from pacopt.formulations.offline import EPS_MS, build_problem, greedy_choice, objective
from pacopt.model.instance import instance_from_dict
from pacopt.solvers.decomposition import restrict

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example_workload(num_jobs: int):
    """Jobs over the example graphs on the default 32-server cluster (about 340 options a job)."""
    data = json.loads((EXAMPLES / "bundled.json").read_text())
    data["workload"]["num_jobs"] = num_jobs
    return build_problem(instance_from_dict(data, EXAMPLES))


@pytest.fixture(scope="module")
def workload_200():
    """200 jobs, about 68k options: CP-SAT's presolve alone takes seconds."""
    return example_workload(200)


def conflict(a, b) -> bool:
    """Two options clash when they share a server while both run (independent of the rows)."""
    return bool(a.mask & b.mask) and min(a.end_ms, b.end_ms) > max(a.start_ms, b.start_ms) + EPS_MS


def assert_feasible(problem, chosen: dict[int, int]) -> None:
    options = problem.options
    assert all(options[k].job == j for j, k in chosen.items())
    picked = list(chosen.values())
    for i, a in enumerate(picked):
        assert not any(conflict(options[a], options[b]) for b in picked[i + 1:])


def brute_force(problem) -> int:
    """The best weighted objective, by depth-first search over jobs (options best first, then
    rejection), pruned when even each remaining job's best option could not beat the best."""
    coefficient = objective(problem).coefficient
    options = problem.options
    jobs = [sorted(group, key=lambda k: -coefficient[k]) for group in problem.by_job if group]
    rest = [0] * (len(jobs) + 1)  # rest[i]: the most jobs i, i+1, ... could add
    for i in reversed(range(len(jobs))):
        rest[i] = rest[i + 1] + coefficient[jobs[i][0]]
    best = 0

    def search(i: int, taken: list[int], value: int) -> None:
        nonlocal best
        if value + rest[i] <= best:
            return
        if i == len(jobs):
            best = value
            return
        for k in jobs[i]:
            if not any(conflict(options[k], options[t]) for t in taken):
                search(i + 1, taken + [k], value + coefficient[k])
        search(i + 1, taken, value)

    search(0, [], 0)
    return best


@pytest.mark.parametrize("name", SMALL)
def test_optimum_matches_brute_force(name):
    problem = small_problem(SMALL[name])
    weights = objective(problem)
    best = brute_force(problem)
    result = solve_cpsat(problem, threads=1)
    assert_feasible(problem, result.chosen)
    assert sum(weights.coefficient[k] for k in result.chosen.values()) == best
    assert len(result.chosen) == weights.accepted_bound(best)
    assert result.status == "optimal" and result.bound_accepted == len(result.chosen)
    # real contention: some job that has options is still rejected
    assert 0 < len(result.chosen) < sum(1 for group in problem.by_job if group)


def test_no_options_means_nothing_to_decide():
    problem = small_problem([("cnn", 0, 0.1), ("cnn", 10, 0.12)])  # deadlines nothing meets
    assert problem.options == []
    result = solve_cpsat(problem)
    assert (result.chosen, result.status, result.bound_accepted) == ({}, "optimal", 0)


def test_required_jobs_must_be_accepted():
    problem = small_problem(HAND_JOBS)
    optimum = solve_cpsat(problem, threads=1).chosen
    rejected = next(j for j, group in enumerate(problem.by_job) if group and j not in optimum)
    # only the optimum's jobs, all required: a pure feasibility search
    sub, _ = restrict(problem, set(optimum), required=set(optimum))
    placed = solve_cpsat(sub, threads=1)
    assert placed.status == "optimal" and placed.chosen.keys() == optimum.keys()
    assert_feasible(sub, placed.chosen)
    # a rejected job required among all the others: still an optimisation, one job worse at most
    forced = solve_cpsat(replace(problem, required=frozenset({rejected})), threads=1)
    assert forced.status == "optimal" and rejected in forced.chosen
    assert len(optimum) - 1 <= len(forced.chosen) <= len(optimum)
    # every job required: more than fit
    everyone = frozenset(j for j, group in enumerate(problem.by_job) if group)
    assert solve_cpsat(replace(problem, required=everyone), threads=1).status == "infeasible"
    # a required job without options
    impossible = replace(problem, by_job=[[] if j == rejected else group
                                          for j, group in enumerate(problem.by_job)],
                         required=frozenset({rejected}))
    assert solve_cpsat(impossible).status == "infeasible"


def test_model_has_one_variable_per_option_and_every_constraint():
    problem = small_problem(HAND_JOBS)
    proto = build_model(problem, objective(problem)).proto
    assert len(proto.variables) == len(problem.options)
    groups = sum(1 for group in problem.by_job if len(group) > 1)
    assert len(proto.constraints) == groups + len(problem.rows)


def test_hint_is_used_and_checked():
    problem = small_problem(HAND_JOBS)
    optimum = solve_cpsat(problem, threads=1)
    progress = []
    hinted = solve_cpsat(problem, threads=1, warm_start=optimum.chosen,
                         progress=lambda *entry: progress.append(entry))
    assert hinted.status == "optimal" and len(hinted.chosen) == len(optimum.chosen)
    # the hint is the first incumbent, so no worse solution is ever reported
    assert {inc for _, inc, _ in progress if inc} == {len(optimum.chosen)}
    j, k = next(iter(optimum.chosen.items()))
    other = next(i for i, group in enumerate(problem.by_job) if group and i != j)
    with pytest.raises(AssertionError):
        solve_cpsat(problem, warm_start={other: k})


def test_progress_reports_each_improvement():
    problem = small_problem(SMALL["random-3"])
    calls = []
    result = solve_cpsat(problem, threads=2, progress=lambda *entry: calls.append(entry))
    assert calls and calls == result.trace
    seconds = [s for s, _, _ in calls]
    assert seconds == sorted(seconds) and seconds[-1] <= result.seconds
    for _, incumbent, bound in calls:
        assert bound is not None and (incumbent is None or incumbent <= bound)
    assert calls[-1][1:] == (len(result.chosen), result.bound_accepted)


def test_time_limit_on_200_jobs(workload_200):
    start = greedy_choice(workload_200, {j: group for j, group in enumerate(workload_200.by_job)})
    started = time.perf_counter()
    result = solve_cpsat(workload_200, time_limit=3, warm_start=start)
    assert time.perf_counter() - started < 10
    assert result.status in ("feasible", "optimal")
    assert result.bound_accepted is not None and result.bound_accepted >= len(result.chosen)
    assert_feasible(workload_200, result.chosen)


def test_ctrl_c_returns_the_incumbent():
    """60 jobs: the first solutions come within seconds (tens of them on a loaded machine), the
    proof not within a minute; the search stops within seconds of the Ctrl-C."""
    problem = example_workload(60)
    previous = signal.getsignal(signal.SIGINT)
    sent = []

    def send() -> None:
        sent.append(time.perf_counter())
        signal.raise_signal(signal.SIGINT)

    interrupt = threading.Timer(0.5, send)

    def on_progress(seconds, incumbent, bound):
        if incumbent and not interrupt.is_alive() and not interrupt.finished.is_set():
            interrupt.start()  # once an incumbent exists

    result = solve_cpsat(problem, time_limit=120, progress=on_progress)
    assert sent and time.perf_counter() - sent[0] < 10
    assert result.status == "feasible" and result.chosen and result.interrupted
    assert result.bound_accepted > len(result.chosen)
    assert_feasible(problem, result.chosen)
    assert signal.getsignal(signal.SIGINT) is previous
