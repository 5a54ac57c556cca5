"""The Pyomo/HiGHS MILP backend of the offline problem."""

import random
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from pacopt.formulations.milp import build_model, compile_model, solve_milp
from pacopt.formulations.offline import build_problem, check_choice, objective
from pacopt.infra.interrupt import stoppable
from pacopt.model.instance import instance_from_dict
from pacopt.model.simulator import simulate
from pacopt.online.policies import make_policy
from pacopt.solvers.warm import warm_start_from

GRAPHS = Path(__file__).resolve().parents[1] / "examples" / "graphs"


def instance(jobs, cluster=None, **extra):
    """An instance over the bundled cnn and transformer graphs; ``jobs``: (graph, arrival, beta)."""
    return instance_from_dict({
        "cluster": cluster or {},
        "graphs": {g: {"file": str(GRAPHS / f"{g}.json")} for g in ("cnn", "transformer")},
        "jobs": [{"id": f"j{i}", "graph": g, "arrival_ms": t, "max_jct_fraction": beta}
                 for i, (g, t, beta) in enumerate(jobs)], **extra})


def contended(seed, num_jobs, gap_ms=250.0):
    """Jobs arriving ``gap_ms`` apart (their JCTs span 0.8-3.7 s, so many overlap); beta 0.3
    forces degree 4, 0.6 degree 2, and 0.1 leaves no option on a small cluster."""
    rng = random.Random(seed)
    return [(rng.choice(["cnn", "transformer"]), gap_ms * i, rng.choice([0.1, 0.3, 0.3, 0.6, 1.0]))
            for i in range(num_jobs)]


#: 2 x 2 x 2 = 8 servers: about 26 options per job (degrees 1, 2, 4), so brute force is quick.
SMALL_CLUSTER = {"communication_groups": 2, "racks_per_group": 2, "servers_per_rack": 2}


def brute_force(problem):
    """Most jobs any feasible choice accepts: depth-first over jobs (each option or reject),
    pruned by conflicts and by the jobs still to come."""
    rows_of = [set() for _ in problem.options]
    for i, row in enumerate(problem.rows):
        for k in row:
            rows_of[k].add(i)
    remaining = [sum(1 for ks in problem.by_job[j:] if ks) for j in range(problem.num_jobs + 1)]
    best = 0

    def search(j, taken, accepted):
        nonlocal best
        if accepted + remaining[j] <= best:
            return
        if j == problem.num_jobs:
            best = accepted
            return
        for k in problem.by_job[j]:
            if taken.isdisjoint(rows_of[k]):
                search(j + 1, taken | rows_of[k], accepted + 1)
        search(j + 1, taken, accepted)

    search(0, frozenset(), 0)
    return best


def workload(num_jobs, interarrival_ms):
    """Jobs of the three bundled graphs, paper beta A."""
    names = ["cnn", "resnet", "transformer"]
    return build_problem(instance_from_dict({
        "graphs": {g: {"file": str(GRAPHS / f"{g}.json")} for g in names},
        "workload": {"graphs": names, "num_jobs": num_jobs, "interarrival_ms": interarrival_ms,
                     "max_jct_fraction": {"paper": "A"}, "seed": 0}}))


@pytest.fixture(scope="module")
def paper_like():
    """200 jobs, one a second, as in the paper (about 68k options)."""
    return workload(200, 1000.0)


@pytest.fixture(scope="module")
def sixty():
    """60 jobs, two a second (20k options): HiGHS is still searching after seconds."""
    return workload(60, 500.0)


@pytest.mark.parametrize("seed", range(5))
def test_optimum_matches_brute_force(seed):
    problem = build_problem(instance(contended(seed, 8), SMALL_CLUSTER))
    result = solve_milp(problem, time_limit=20)
    assert result.status == "optimal"
    assert len(result.chosen) == result.bound_accepted == brute_force(problem)
    check_choice(problem, result.chosen)


def test_chosen_respects_jobs_and_rows():
    problem = build_problem(instance(contended(3, 12, gap_ms=200.0)))
    # a limit with room for a loaded machine (a quiet one proves the optimum well within it)
    result = solve_milp(problem, time_limit=10, threads=1)
    assert result.status in ("optimal", "feasible") and result.chosen
    for j, k in result.chosen.items():
        assert k in problem.by_job[j]
    taken = set(result.chosen.values())
    assert all(len(taken.intersection(row)) <= 1 for row in problem.rows)
    assert result.bound_accepted >= len(result.chosen)


def test_model_has_one_row_per_job_choice_and_conflict():
    problem = build_problem(instance(contended(1, 6), SMALL_CLUSTER))
    compiled = compile_model(build_model(problem))
    multi = sum(1 for ks in problem.by_job if len(ks) > 1)
    assert len(compiled.row_upper) == multi + len(problem.rows)
    assert len(compiled.a_value) == sum(
        len(ks) for ks in problem.by_job if len(ks) > 1) + sum(map(len, problem.rows))
    options = [v.index() for v in compiled.columns]
    assert sorted(options) == list(range(len(problem.options)))
    weights = objective(problem)
    assert [compiled.cost[c] for c in range(len(options))] == [
        weights.coefficient[k] for k in options]


def test_no_options_is_optimal_and_empty():
    problem = build_problem(instance([("cnn", 0.0, 0.1)], SMALL_CLUSTER))
    assert not problem.options
    result = solve_milp(problem)
    assert (result.chosen, result.status, result.bound_accepted) == ({}, "optimal", 0)


def test_warm_start_is_taken(sixty):
    online = simulate(sixty.instance, make_policy("para-max"))
    start = warm_start_from(sixty, online)
    assert len(start) == online.accepted > 0
    result = solve_milp(sixty, time_limit=2, threads=1, warm_start=start)
    assert len(result.chosen) >= len(start)
    assert result.trace[0][1] == len(start)  # the start is the first incumbent reported


def test_infeasible_warm_start_is_refused():
    problem = build_problem(instance(contended(2, 8), SMALL_CLUSTER))
    k, m = next((a, b) for row in problem.rows for a in row for b in row
                if problem.options[a].job != problem.options[b].job)
    with pytest.raises(AssertionError, match="conflict row"):
        solve_milp(problem, warm_start={problem.options[k].job: k, problem.options[m].job: m})


def test_time_limit_on_a_paper_like_instance(paper_like):
    result = solve_milp(paper_like, time_limit=3, threads=2)
    assert result.seconds < 10
    assert result.status in ("optimal", "feasible")
    assert result.bound_accepted >= len(result.chosen)
    check_choice(paper_like, result.chosen)


def test_progress_reports_each_improvement(sixty):
    calls = []
    # 2 s found no incumbent while the machine was loaded three times over
    result = solve_milp(sixty, time_limit=6, threads=1, progress=lambda *entry: calls.append(entry))
    assert calls and calls == result.trace
    seconds, incumbents, bounds = zip(*calls)
    assert list(seconds) == sorted(seconds)
    assert list(incumbents) == sorted(incumbents) and list(bounds) == sorted(bounds, reverse=True)
    assert incumbents[-1] == len(result.chosen) and bounds[-1] == result.bound_accepted


def test_ctrl_c_returns_the_incumbent(sixty):
    before = signal.getsignal(signal.SIGINT)
    timer = threading.Timer(2.0, signal.raise_signal, (signal.SIGINT,))
    # as solve() does: a Ctrl-C that lands while the model is still being built (a loaded
    # machine) is a stop request too, not a KeyboardInterrupt through pytest
    with stoppable():
        timer.start()
        try:
            result = solve_milp(sixty, time_limit=25, threads=1)
        finally:
            timer.cancel()
    assert result.seconds < 15  # stopped by the interrupt, not the time limit
    assert result.status == "feasible" and result.chosen and result.interrupted
    assert result.bound_accepted >= len(result.chosen)
    check_choice(sixty, result.chosen)
    assert signal.getsignal(signal.SIGINT) is before


def test_progress_errors_surface_after_the_solve():
    problem = build_problem(instance(contended(4, 8), SMALL_CLUSTER))

    def progress(*_):
        raise RuntimeError("display broke")

    with pytest.raises(RuntimeError, match="display broke"):
        solve_milp(problem, progress=progress)


def test_required_jobs_are_all_accepted_or_proven_impossible():
    problem = build_problem(instance(contended(0, 8), SMALL_CLUSTER))
    optimum = solve_milp(problem, time_limit=20)
    required = replace(problem, required=frozenset(optimum.chosen))
    result = solve_milp(required, time_limit=20)
    assert result.status == "optimal" and set(result.chosen) == set(optimum.chosen)
    # every job with an option: more than the optimum accepts, so impossible
    everyone = replace(problem, required=frozenset(j for j, ks in enumerate(problem.by_job) if ks))
    assert len(everyone.required) > len(optimum.chosen)
    assert solve_milp(everyone, time_limit=20).status == "infeasible"
    hopeless = replace(problem, required=frozenset(j for j, ks in enumerate(problem.by_job)
                                                   if not ks))
    assert hopeless.required and solve_milp(hopeless).status == "infeasible"


def test_stdout_comes_back_when_silenced_solves_overlap(tmp_path):
    """Two lanes' solves silence stdout in overlapping spans (A opens, B opens, A closes, B
    closes): stdout must be the real one afterwards, not the /dev/null that was in place when B
    opened (a subprocess, so that file descriptor 1 is a file we can read)."""
    script = tmp_path / "overlap.py"
    script.write_text(
        "import os, threading\n"
        "from pacopt.infra.quiet import c_stdout_silenced\n"
        "a_open, b_open, a_closed = threading.Event(), threading.Event(), threading.Event()\n"
        "def lane_a():\n"
        "    with c_stdout_silenced():\n"
        "        a_open.set(); b_open.wait(); os.write(1, b'lost-a\\n')\n"
        "    a_closed.set()\n"
        "def lane_b():\n"
        "    a_open.wait()\n"
        "    with c_stdout_silenced():\n"
        "        b_open.set(); a_closed.wait(); os.write(1, b'lost-b\\n')\n"
        "threads = [threading.Thread(target=f) for f in (lane_a, lane_b)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "os.write(1, b'kept\\n')\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "kept\n"
