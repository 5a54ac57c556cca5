"""The exact methods' search (relax, then windows or the whole model): restricted problems keep
exactly the right options and rows; the window search never loses a job, reaches the optimum
on small contended instances, keeps the incumbent when a step is interrupted, and stops on
Ctrl-C with the best solution so far."""

from __future__ import annotations

import pytest

import pacopt.formulations.decomposition as decomposition
from pacopt.formulations.bound import Relaxation
from pacopt.formulations.cpsat import solve_cpsat
from pacopt.formulations.decomposition import restrict, solve_decomposed
from pacopt.formulations.milp import solve_milp
from pacopt.formulations.offline import ExactResult
from pacopt.formulations.warm import check_choice, greedy_choice

from offline_cases import HAND_JOBS, SMALL, random_jobs, small_problem


@pytest.fixture
def windows_only(monkeypatch):
    """Force the window search, with windows of 3 jobs and no realisation, on problems small
    enough to check."""
    monkeypatch.setattr(decomposition, "FULL_SEARCH_OPTIONS", 0)
    monkeypatch.setattr(decomposition, "REALISE_SHARE", 0.0)
    monkeypatch.setattr(decomposition, "FIRST_WINDOW", 3)


def recording(calls: list[bool]):
    """CP-SAT as a backend that notes, per call, whether every job of the step was required
    (a realisation step; window steps leave the window's own jobs free)."""

    def backend(sub, **kwargs):
        calls.append(all(j in sub.required for j, ks in enumerate(sub.by_job) if ks))
        return solve_cpsat(sub, **kwargs)

    return backend


def first_options(problem) -> dict[int, int]:
    """A feasible but poor start: greedy in arrival order, each job's first option."""
    return greedy_choice(problem, {j: ks[:1] for j, ks in enumerate(problem.by_job) if ks})


def test_restrict_keeps_the_jobs_options_and_their_rows():
    problem = small_problem(HAND_JOBS)
    jobs = {0, 1, 3, 5}
    fixed = {1: problem.by_job[1][2]}
    sub, original = restrict(problem, jobs, required={1}, fixed=fixed)
    assert sub.required == {1}
    assert [o.job for o in sub.options] == [problem.options[k].job for k in original]
    assert all(problem.options[k].job in jobs for k in original)
    assert [original[i] for i in sub.by_job[1]] == [fixed[1]]
    for j in jobs - {1}:
        assert [original[i] for i in sub.by_job[j]] == problem.by_job[j]
    expected = set()
    kept = set(original)
    for row in problem.rows:
        inside = [k for k in row if k in kept]
        if len({problem.options[k].job for k in inside}) >= 2:
            expected.add(tuple(inside))
    assert {tuple(original[i] for i in row) for row in sub.rows} == expected


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("backend", [solve_cpsat, solve_milp], ids=["cpsat", "milp"])
def test_window_search_reaches_the_optimum(name, backend, windows_only):
    problem = small_problem(SMALL[name])
    optimum = len(solve_cpsat(problem, threads=1).chosen)
    start = first_options(problem)
    result = solve_decomposed(problem, backend, time_limit=60, threads=1, warm_start=start)
    check_choice(problem, result.chosen)
    assert len(start) < optimum  # the windows had something to do
    assert len(result.chosen) == optimum
    assert result.bound_accepted >= optimum
    counts = [accepted for _, accepted, _ in result.trace]
    assert counts == sorted(counts) and counts[0] >= len(start)


def test_realising_the_relaxation_proves_the_optimum(monkeypatch):
    """Jobs spread out enough that the worker count is the only limit: the relaxation's
    selection is placeable, so the realisation alone proves the optimum."""
    monkeypatch.setattr(decomposition, "FULL_SEARCH_OPTIONS", 0)
    monkeypatch.setattr(decomposition, "REALISE_WINDOW", 2)
    monkeypatch.setattr(decomposition, "LOOKAHEAD", 1)
    problem = small_problem([(graph, 4 * arrival, beta) for graph, arrival, beta in HAND_JOBS])
    calls = []
    result = solve_decomposed(problem, recording(calls), time_limit=60, threads=1)
    assert result.status == "optimal" and result.bound_accepted == len(result.chosen)
    assert len(calls) > 1 and all(calls)  # realisation steps only, no window step
    check_choice(problem, result.chosen)


def test_a_selection_below_the_bound_is_not_realised(monkeypatch):
    """Realising a selection that does not meet the relaxation's bound cannot prove anything,
    so the search goes straight to the windows (their steps never require every job)."""
    monkeypatch.setattr(decomposition, "FULL_SEARCH_OPTIONS", 0)
    monkeypatch.setattr(decomposition, "FIRST_WINDOW", 3)
    problem = small_problem([(graph, 4 * arrival, beta) for graph, arrival, beta in HAND_JOBS])
    jobs = [j for j, ks in enumerate(problem.by_job) if ks]
    degree = {j: problem.options[problem.by_job[j][0]].degree for j in jobs}
    short = Relaxation(bound=len(jobs), selection={j: degree[j] for j in jobs[1:]})
    monkeypatch.setattr(decomposition, "solve_relaxation", lambda *args, **kwargs: short)
    calls = []
    result = solve_decomposed(problem, recording(calls), time_limit=60, threads=1,
                              warm_start=first_options(problem))
    assert calls and not any(calls)
    check_choice(problem, result.chosen)


def test_nothing_to_decide():
    problem = small_problem([("cnn", 0, 0.1), ("cnn", 10, 0.12)])  # deadlines nothing meets
    result = solve_decomposed(problem, solve_cpsat, time_limit=10, threads=1)
    assert (result.chosen, result.status, result.bound_accepted) == ({}, "optimal", 0)


def test_whole_model_search_proves_small_problems():
    problem = small_problem(random_jobs(3, 12))
    result = solve_decomposed(problem, solve_cpsat, time_limit=60, threads=1)
    assert result.status == "optimal" and not result.interrupted
    assert result.bound_accepted == len(result.chosen) == len(solve_cpsat(problem).chosen)


def test_a_failed_step_keeps_the_incumbent(windows_only):
    problem = small_problem(HAND_JOBS)
    start = first_options(problem)

    def failing(sub, **_):
        return ExactResult(chosen={}, status="error", bound_accepted=None, seconds=0.0)

    result = solve_decomposed(problem, failing, time_limit=5, threads=1, warm_start=start)
    assert result.chosen == start and result.status in ("feasible", "optimal")


def test_an_interrupted_step_ends_the_search(windows_only):
    problem = small_problem(HAND_JOBS)
    calls = []

    def interrupted(sub, **kwargs):
        calls.append(sub)
        answer = solve_cpsat(sub, **kwargs)
        answer.interrupted = True
        return answer

    result = solve_decomposed(problem, interrupted, time_limit=60, threads=1,
                              warm_start=first_options(problem))
    assert len(calls) == 1 and result.interrupted
    check_choice(problem, result.chosen)


def test_ctrl_c_between_steps_returns_the_best_so_far(windows_only):
    problem = small_problem(HAND_JOBS)
    start = first_options(problem)
    calls = []

    def then_interrupt(sub, **kwargs):
        calls.append(sub)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return solve_cpsat(sub, **kwargs)

    result = solve_decomposed(problem, then_interrupt, time_limit=60, threads=1, warm_start=start)
    assert result.interrupted and len(calls) == 2
    assert len(result.chosen) >= len(start)
    check_choice(problem, result.chosen)
