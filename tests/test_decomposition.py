"""The exact methods' search (warm starts, relax, realise with drops, window lanes): restricted
problems keep exactly the right options and rows; the realisation only reports placements the
checks accept, places a set that fits and honours its time limit even inside its drop loop; the
window search (one lane or the two-lane portfolio) never loses a job, reaches the optimum on small
contended instances, keeps the incumbent when a step is interrupted, and stops on Ctrl-C with the
best solution so far."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from offline_cases import HAND_JOBS, SMALL, random_jobs, small_problem
from test_cpsat import example_workload

import pacopt.solvers.decomposition as decomposition
import pacopt.solvers.realise as realisation
from pacopt.formulations.cpsat import solve_cpsat
from pacopt.formulations.milp import solve_milp
from pacopt.formulations.offline import (
    ExactResult,
    check_choice,
    greedy_choice,
    to_solution,
)
from pacopt.infra.concurrency import Stop
from pacopt.solvers.decomposition import restrict, solve_decomposed
from pacopt.solvers.realise import realise
from pacopt.solvers.validate import find_problems


@pytest.fixture
def windows_only(monkeypatch):
    """Force the window search, with windows of 3 jobs and no realisation, on problems small
    enough to check."""
    monkeypatch.setattr(decomposition, "FULL_SEARCH_OPTIONS", 0)
    monkeypatch.setattr(decomposition, "REALISE_SHARE", 0.0)
    monkeypatch.setattr(decomposition, "FIRST_WINDOW", 3)
    monkeypatch.setattr(decomposition, "REQUIRED_WINDOW", 3)


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
@pytest.mark.parametrize("threads", [1, 2], ids=["one-lane", "portfolio"])
def test_window_search_reaches_the_optimum(name, backend, threads, windows_only):
    problem = small_problem(SMALL[name])
    optimum = len(solve_cpsat(problem, threads=1).chosen)
    start = first_options(problem)
    result = solve_decomposed(problem, backend, time_limit=60, threads=threads,
                              warm_start=start, online=[])
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
    monkeypatch.setattr(realisation, "CHUNK", 2)
    monkeypatch.setattr(realisation, "LOOKAHEAD", 1)
    problem = small_problem([(graph, 4 * arrival, beta) for graph, arrival, beta in HAND_JOBS])
    calls = []
    result = solve_decomposed(problem, recording(calls), time_limit=60, threads=1, online=[])
    assert result.status == "optimal" and result.bound_accepted == len(result.chosen)
    assert len(calls) > 1 and all(calls)  # realisation steps only, no window step
    check_choice(problem, result.chosen)


def contended():
    """A random contended instance: not every job can be accepted."""
    problem = small_problem(random_jobs(3, 12))
    assert len(solve_cpsat(problem, threads=1).chosen) < sum(1 for ks in problem.by_job if ks)
    return problem


@pytest.mark.parametrize("name", SMALL)
def test_realisation_reports_only_valid_placements(name):
    """With drops, what is placed is always a valid solution; a set that fits (an optimum's
    accepted jobs) is placed whole."""
    problem = small_problem(SMALL[name])
    jobs = [j for j, ks in enumerate(problem.by_job) if ks]
    best = sorted(solve_cpsat(problem, threads=1).chosen)
    for chosen, chunk in ((jobs, 4), (best, len(best))):
        out = realise(problem, solve_cpsat, chosen, deadline=time.perf_counter() + 60,
                      threads=1, chunk=chunk, lookahead=2)
        check_choice(problem, out.placed)
        solution = to_solution(problem, out.placed, method="cpsat", status="feasible",
                               bound_accepted=len(jobs), solve_seconds=0.0)
        assert find_problems(problem.instance, solution, problem.model) == []
        assert out.complete and sorted([*out.placed, *out.dropped]) == chosen
    assert not out.dropped and sorted(out.placed) == best  # the set that fits


def test_drops_free_the_job_that_blocks():
    """Two long jobs need all 8 servers at once; a third arrives while they run: one of the
    three is dropped, and the other two are placed."""
    problem = small_problem([("cnn", 0, 1.0), ("cnn", 10, 1.0), ("cnn", 20, 1.0)])
    busy = {j: [k for k in ks if problem.options[k].workers >= 4] for j, ks in
            enumerate(problem.by_job)}
    assert all(busy.values())
    out = realise(problem, solve_cpsat, [0, 1, 2], deadline=time.perf_counter() + 30, threads=1)
    check_choice(problem, out.placed)
    assert out.complete and len(out.placed) + len(out.dropped) == 3


def test_time_limit_holds_inside_the_drop_loop():
    """A backend that never decides (it uses its whole time limit and finds nothing) keeps the
    realisation in its drop loop; it still returns within the deadline plus a check."""
    problem = contended()
    jobs = [j for j, ks in enumerate(problem.by_job) if ks]
    checks = []

    def undecided(sub, *, time_limit, **_):
        checks.append(time_limit)
        time.sleep(min(time_limit, 0.3))
        return ExactResult(chosen={}, status="error", bound_accepted=None, seconds=0.3)

    started = time.perf_counter()
    out = realise(problem, undecided, jobs, deadline=started + 2.0, threads=1)
    assert time.perf_counter() - started < 2.0 + realisation.MIN_CHECK_SECONDS
    assert not out.complete and out.placed == {} and out.dropped  # it was dropping
    assert all(limit <= 2.0 for limit in checks)


def test_a_realisation_stopped_inside_a_chunk_keeps_its_largest_placement():
    """A backend that only ever places three jobs at a time: the realisation gives up while
    still dropping (``better_than``) and returns the largest placement it found, which fits."""
    problem = contended()
    jobs = [j for j, ks in enumerate(problem.by_job) if ks]

    def small_sets_only(sub, **kwargs):
        if sum(1 for ks in sub.by_job if ks) > 3:
            return ExactResult(chosen={}, status="error", bound_accepted=None, seconds=0.0)
        return solve_cpsat(sub, **kwargs)

    out = realise(problem, small_sets_only, jobs, deadline=time.perf_counter() + 60, threads=1,
                  chunk=len(jobs), better_than=len(jobs) - 2)
    assert not out.complete and len(out.dropped) == 2
    assert len(out.placed) == 3
    check_choice(problem, out.placed)


def test_a_stop_ends_the_realisation():
    problem = contended()
    stop = Stop()
    stop.set()
    out = realise(problem, solve_cpsat, [0, 1, 2], deadline=time.perf_counter() + 60, stop=stop)
    assert not out.complete and out.placed == {}


def test_the_portfolio_commits_only_what_still_fits(windows_only):
    """A lane's step computed against an older incumbent is refused when the other lane took
    its servers meanwhile, and taken when it still fits and is better."""
    problem = small_problem(HAND_JOBS)
    search = decomposition._WindowSearch(problem, solve_cpsat, 1, 60, {}, None)
    best = solve_cpsat(problem, threads=1).chosen
    first, *_ = sorted(best)
    clash = next(k for k in problem.by_job[first]
                 if any(set(problem.option_rows[k]) & set(problem.option_rows[best[j]])
                        for j in best if j != first))
    others = {j: k for j, k in best.items() if j != first}
    assert search.offer(others)
    assert not search.commit({first}, {first: clash})  # it would share a server
    assert search.commit({first}, {first: best[first]})
    assert search.incumbent == best
    assert not search.commit({first}, {})  # worse: refused


def test_online_methods_warm_start_the_search():
    """With no warm start given, the best online method's episode is the first incumbent."""
    problem = small_problem(HAND_JOBS)
    result = solve_decomposed(problem, solve_cpsat, time_limit=30, threads=1)
    assert result.trace[0][1] > 0  # an incumbent before any search
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

    result = solve_decomposed(problem, failing, time_limit=5, threads=1, warm_start=start,
                              online=[])
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
                              warm_start=first_options(problem), online=[])
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

    result = solve_decomposed(problem, then_interrupt, time_limit=60, threads=1, warm_start=start,
                              online=[])
    assert result.interrupted and len(calls) == 2
    assert len(result.chosen) >= len(start)
    check_choice(problem, result.chosen)


def test_ctrl_c_stops_both_lanes_with_the_incumbent():
    """A real SIGINT while the two-lane portfolio searches 60 jobs: both lanes stop within
    seconds, and the result is the incumbent (at least the warm start), marked interrupted."""
    problem = example_workload(60)
    start = first_options(problem)
    sent = []

    def send() -> None:
        sent.append(time.perf_counter())
        signal.raise_signal(signal.SIGINT)

    interrupt = threading.Timer(3.0, send)
    interrupt.start()
    try:
        result = solve_decomposed(problem, solve_cpsat, time_limit=60, threads=2,
                                  warm_start=start, online=[])
    finally:
        interrupt.cancel()
    assert sent and time.perf_counter() - sent[0] < 10
    assert result.interrupted and len(result.chosen) >= len(start)
    assert [name for name in (t.name for t in threading.enumerate()) if "lane" in name] == []
    check_choice(problem, result.chosen)


def test_an_error_in_the_helper_lane_surfaces():
    """A bug in the objective lane's backend is raised to the caller, not lost in its thread."""
    problem = small_problem(HAND_JOBS)

    def broken(sub, **kwargs):
        if threading.current_thread().name == "objective-lane":
            raise RuntimeError("lane bug")
        return solve_cpsat(sub, **kwargs)

    with pytest.raises(RuntimeError, match="lane bug"):
        solve_decomposed(problem, broken, time_limit=30, threads=2,
                         warm_start=first_options(problem), online=[])
