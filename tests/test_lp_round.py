"""lp-round: seeded and reproducible, every answer valid, never above the exact optimum, its
bound valid, its fast conflict check the same as the clique rows, and the alteration round's
guarantee met on average."""

import numpy as np
import pytest
from offline_cases import SMALL, random_jobs, small_problem

from pacopt.formulations.milp import solve_milp
from pacopt.formulations.offline import to_solution
from pacopt.formulations.packing_lp import solve_lp
from pacopt.infra.interrupt import request_stop, stoppable
from pacopt.solvers.api import solve
from pacopt.solvers.lp_round import (
    Board,
    _Columns,
    _preference,
    guarantee_scale,
    lp_round,
    repair,
    round_once,
)
from pacopt.solvers.validate import find_problems

CASES = {**SMALL, "random-7": random_jobs(7, 16), "random-8": random_jobs(8, 20)}


@pytest.fixture(scope="module")
def problems():
    return {name: small_problem(jobs) for name, jobs in CASES.items()}


@pytest.fixture(scope="module")
def optima(problems):
    out = {}
    for name, problem in problems.items():
        result = solve_milp(problem, time_limit=60)
        assert result.status == "optimal"
        out[name] = len(result.chosen)
    return out


@pytest.mark.parametrize("window", [None, 4])
def test_seeded_and_reproducible(problems, window):
    problem = problems["random-8"]
    first = lp_round(problem, seed=5, rounds=6, window=window)
    again = lp_round(problem, seed=5, rounds=6, window=window)
    assert first.chosen == again.chosen


def test_the_rounding_is_random(problems):
    """Different generators give different rounded picks (before re-placement evens them out)."""
    problem = problems["random-8"]
    point = solve_lp(problem.options, problem.by_job, problem.rows)
    columns = _Columns.of(problem.options, wide=False)
    by_job = {j: _preference(ks, point.x, columns) for j, ks in enumerate(problem.by_job) if ks}
    picks = {tuple(sorted(round_once(by_job, point.x, columns, Board(False), 1.0,
                                     np.random.default_rng(s), replace=False).items()))
             for s in range(8)}
    assert len(picks) > 1


@pytest.mark.parametrize("window", [None, 3, 5])
def test_valid_and_never_above_the_optimum(problems, optima, window):
    for name, problem in problems.items():
        for seed in range(3):
            result = lp_round(problem, seed=seed, rounds=4, window=window)
            solution = to_solution(problem, result.chosen, method="lp-round", status="heuristic",
                                   bound_accepted=None, solve_seconds=0.0)
            assert find_problems(problem.instance, solution) == [], (name, seed)
            assert len(result.chosen) <= optima[name]
            if window is None:  # the whole LP bounds the optimum
                assert result.lp_bound >= optima[name]


def test_close_to_the_optimum_on_small_cases(problems, optima):
    """Not the worst-case guarantee, the measured quality: within one job of the optimum."""
    for name, problem in problems.items():
        assert len(lp_round(problem, seed=0).chosen) >= optima[name] - 1, name


def test_board_conflicts_are_the_clique_rows(problems):
    """Two options of different jobs conflict on the board exactly when they share a row."""
    problem = problems["random-8"]
    columns = _Columns.of(problem.options, wide=False)
    rows_of = problem.option_rows
    rng = np.random.default_rng(0)
    pairs = rng.integers(len(problem.options), size=(400, 2))
    checked = 0
    for a, b in pairs:
        if problem.options[a].job == problem.options[b].job:
            continue
        board = Board(wide=False)
        board.take(problem.options[a].job, columns.start[a], columns.end[a], columns.mask[a])
        free = board.free(columns.start[b], columns.end[b:b + 1], columns.mask[b:b + 1])[0]
        count, _ = board.blockers(columns.start[b], columns.end[b:b + 1], columns.mask[b:b + 1])
        shared = not set(rows_of[a]).isdisjoint(rows_of[b])
        assert free == (not shared) == (count[0] == 0), (a, b)
        checked += 1
    assert checked > 300


def test_alteration_round_meets_its_guarantee(problems):
    """The scaled round without re-placement keeps, on average, at least LP / (4 W)."""
    for problem in problems.values():
        point = solve_lp(problem.options, problem.by_job, problem.rows)
        columns = _Columns.of(problem.options, wide=False)
        widths = np.array([o.workers for o in problem.options])
        alpha = guarantee_scale(widths)
        by_job = {j: _preference(ks, point.x, columns) for j, ks in enumerate(problem.by_job) if ks}
        kept = [len(round_once(by_job, point.x, columns, Board(False), alpha,
                               np.random.default_rng(s), replace=False)) for s in range(300)]
        expected = sum(alpha * point.x[k] * (1 - alpha * widths[k])
                       for k in range(len(problem.options)))
        assert np.mean(kept) >= 0.8 * expected >= point.x.sum() / (4 * widths.max()) * 0.8


def test_solve_reports_a_valid_bound(problems, optima):
    problem = problems["random-7"]
    solution = solve(problem.instance, "lp-round", seed=1)
    assert solution.validated and solution.status in ("feasible", "optimal")
    assert solution.accepted <= optima["random-7"] <= solution.bound_accepted
    assert solve(problem.instance, "lp-round", seed=1).to_dict()["jobs"] == \
        solution.to_dict()["jobs"]


def test_every_pair_conflict_is_resolved():
    """A burst of identical jobs that cannot all run: the rounding keeps a feasible subset."""
    problem = small_problem([("cnn", 0, 0.3)] * 6 + [("cnn", 5, 0.3)] * 4)
    result = lp_round(problem, seed=0, rounds=3)
    taken = set(result.chosen.values())
    for row in problem.rows:
        assert len(taken.intersection(row)) <= 1
    assert 0 < len(result.chosen) < 10


def test_a_stop_while_its_problem_is_built_returns_the_best_online_episode(problems,
                                                                          monkeypatch):
    import pacopt.solvers.lp_round as lp_round_module
    from pacopt.infra.interrupt import OutOfTime

    def cut(*args, **kwargs):
        raise OutOfTime("building the conflict rows")

    monkeypatch.setattr(lp_round_module, "build_problem", cut)
    instance = problems["random-7"].instance
    with pytest.warns(UserWarning, match="lp-round: stopped while building the conflict rows; "
                                         "returning the best online episode"):
        solution = solve(instance, "lp-round", seed=1)
    assert solution.validated and solution.status == "feasible"
    assert solution.metrics["stopped"] == "stopped while building the conflict rows"
    assert solution.accepted <= solution.bound_accepted


def test_a_stop_ends_the_re_placement_between_jobs(problems):
    """Ctrl-C while lp-round re-places (it walks every job left out, again while it gains):
    it returns at once with the choice it holds, the board still holding exactly that."""
    problem = problems["random-8"]
    point = solve_lp(problem.options, problem.by_job, problem.rows)
    columns = _Columns.of(problem.options, wide=False)
    by_job = {j: _preference(ks, point.x, columns) for j, ks in enumerate(problem.by_job) if ks}
    board = Board(False)
    chosen = round_once(by_job, point.x, columns, board, 0.05, np.random.default_rng(0),
                        replace=False)
    assert len(chosen) < len(by_job)  # someone is left out: there is work to stop
    before, taken = dict(chosen), dict(board.taken)
    with stoppable():
        request_stop()
        assert repair(by_job, columns, board, chosen) == 0
    assert chosen == before and board.taken == taken
    assert repair(by_job, columns, board, chosen) >= 0  # not stopped: it runs
