"""The offline problem's data: candidate footprints, conflict rows, the relaxation bound."""

import itertools
import random
import signal
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacopt.formulations.bound import solve_relaxation, worker_count_bound
from pacopt.formulations.offline import (
    ColumnSet,
    build_problem,
    conflict_rows_of,
    footprints,
    maximal_cliques,
    objective,
    to_solution,
)
from pacopt.infra.interrupt import stoppable
from pacopt.model.first_fit import first_fit
from pacopt.model.graph_sources import EXAMPLES_DIR, read_graph_file
from pacopt.model.instance import instance_from_dict
from pacopt.model.partition import op_counts
from pacopt.model.pipedream import PAPER_GRAPHS, read_pipedream
from pacopt.model.simulator import simulate
from pacopt.model.state import EPS_MS
from pacopt.model.topology import RampCluster
from pacopt.online.policies import make_policy
from pacopt.solvers.validate import find_problems

CLUSTER = RampCluster()


def masks(counts):
    return {sum(b.mask for b in {id(b): b for b in chosen.values()}.values())
            for chosen in footprints(counts, CLUSTER)}


def union(chosen):
    mask = 0
    for block in chosen.values():
        mask |= block.mask
    return mask


def test_uniform_patterns_have_exactly_the_blocks_of_their_degree(pipedream_dir):
    alexnet = read_pipedream(pipedream_dir / "alexnet.txt")
    for d in (1, 2, 4, 8, 16):
        found = {union(c) for c in footprints(op_counts(alexnet, d, 0.01), CLUSTER)}
        assert found == {b.mask for b in CLUSTER.blocks(d)}


def test_mixed_patterns_take_minimal_unions(pipedream_dir):
    gnmt = read_pipedream(pipedream_dir / "gnmt.txt")
    at16 = footprints(op_counts(gnmt, 16, 0.01), CLUSTER)      # counts {1, 6, 8, 16} nest in 16
    assert {union(c) for c in at16} == {b.mask for b in CLUSTER.blocks(16)}
    at8 = [union(c) for c in footprints(op_counts(gnmt, 8, 0.01), CLUSTER)]
    # a (4,2,1) 8-block holds a (3,2,1) 6-block; a (2,2,2) one needs a 6-block beside it
    assert min(m.bit_count() for m in at8) == 8 and max(m.bit_count() for m in at8) > 8
    assert all(a & ~b for a, b in itertools.permutations(at8, 2))   # none contains another
    for chosen in footprints(op_counts(gnmt, 8, 0.01), CLUSTER):
        assert sorted(chosen) == [1, 6, 8] and all(len(b.servers) == m for m, b in chosen.items())


@pytest.mark.parametrize("name, degree", [("alexnet", 4), ("alexnet", 8), ("gnmt", 8),
                                          ("gnmt", 16), ("cnn", 6), ("resnet", 8)])
def test_every_first_fit_footprint_contains_a_candidate(pipedream_dir, name, degree):
    """The heart of the bound: whatever the live state, first-fit's footprint contains one of
    the candidate footprints, so an online solution maps onto candidates."""
    path = pipedream_dir / f"{name}.txt"
    graph = read_pipedream(path) if path.exists() else read_graph_file(EXAMPLES_DIR / f"{name}.json")
    counts = op_counts(graph, degree, 0.01)
    candidates = [union(c) for c in footprints(counts, CLUSTER)]
    rng = random.Random(7)
    placed = 0
    for _ in range(300):
        occupied = sum(1 << s for s in rng.sample(range(32), rng.randrange(0, 20)))
        placement = first_fit(graph, counts, CLUSTER, occupied)
        if placement is None:
            continue
        placed += 1
        assert any(c & ~placement.mask == 0 for c in candidates)
    assert placed > 20


def small_instance(pipedream_dir, num_jobs=12, seed=1, horizon=None):
    data = {"graphs": {"alexnet": {"pipedream": str(pipedream_dir / "alexnet.txt")},
                       "gnmt": {"pipedream": str(pipedream_dir / "gnmt.txt")}},
            "workload": {"graphs": ["alexnet", "gnmt"], "num_jobs": num_jobs,
                         "interarrival_ms": 400, "max_jct_fraction": {"uniform": [0.1, 0.3]},
                         "seed": seed}}
    if horizon:
        data["horizon_ms"] = horizon
    return instance_from_dict(data)


def test_rows_are_exactly_the_conflicts(pipedream_dir):
    problem = build_problem(small_instance(pipedream_dir, num_jobs=8))
    options = problem.options
    together = set()
    for row in problem.rows:
        together.update(itertools.combinations(sorted(row), 2))
    for a, b in itertools.combinations(range(len(options)), 2):
        oa, ob = options[a], options[b]
        if oa.job == ob.job:
            continue
        overlap = oa.start_ms < ob.end_ms - 1e-7 and ob.start_ms < oa.end_ms - 1e-7
        conflict = overlap and oa.mask & ob.mask
        assert bool(conflict) == ((a, b) in together), (a, b)


def _cliques_by_definition(intervals):
    """The columns running (by start, then index) at each maximal instant: a start after which
    something running ends before the next start, and the last start."""
    starts = sorted({start for start, _ in intervals})
    cliques = []
    for i, t in enumerate(starts):
        active = sorted((k for k, (a, b) in enumerate(intervals) if a <= t and b > t + EPS_MS),
                        key=lambda k: intervals[k][0])
        following = starts[i + 1] if i + 1 < len(starts) else None
        if following is None or any(intervals[k][1] <= following + EPS_MS for k in active):
            cliques.append(active)
    return cliques


def _rows_by_definition(intervals, jobs, servers):
    """Conflict rows one column and server at a time: at each maximal instant, per server
    ascending, the columns running there that use it, when of two jobs or more, each row once."""
    rows = []
    for active in _cliques_by_definition(intervals):
        for server in sorted({v for k in active for v in servers[k]}):
            row = [k for k in active if server in servers[k]]
            if len({jobs[k] for k in row}) >= 2 and row not in rows:
                rows.append(row)
    return rows


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 4), st.integers(0, 4),
                          st.sets(st.integers(0, 7), max_size=4)), max_size=14))
def test_conflict_rows_are_those_of_the_definition(columns):
    """The array-built cliques and conflict rows are the definition's, in its order: coarse
    times so that starts, ends and ends within the tolerance of a start tie often."""
    intervals = [(float(a), a + b + (EPS_MS / 2 if b == 1 else 0.0)) for a, b, _, _ in columns]
    jobs = [j for _, _, j, _ in columns]
    servers = [tuple(sorted(v)) for *_, v in columns]
    assert maximal_cliques(intervals) == _cliques_by_definition(intervals)
    assert conflict_rows_of(intervals, jobs, servers) == _rows_by_definition(intervals, jobs,
                                                                              servers)
    some = list(range(0, len(columns), 2))  # a subset's rows name the set's columns
    columns = ColumnSet(np.array([a for a, _ in intervals]), np.array([b for _, b in intervals]),
                        np.array(jobs), servers)
    assert columns.conflict_rows(np.array(some, dtype=np.int64)) == [
        [some[k] for k in row] for row in _rows_by_definition(
            [intervals[k] for k in some], [jobs[k] for k in some], [servers[k] for k in some])]


def test_options_meet_deadlines_and_horizon(pipedream_dir):
    instance = small_instance(pipedream_dir, horizon=3000.0)
    problem = build_problem(instance)
    for option in problem.options:
        job = instance.jobs[option.job]
        assert option.jct_ms <= instance.deadline_ms(job)
        assert option.end_ms <= 3000.0 + 1e-7
    assert problem.late == {j for j, job in enumerate(instance.jobs) if job.arrival_ms >= 3000.0}


def test_bound_dominates_heuristics_and_lp_dominates_ip(pipedream_dir):
    for seed in range(3):
        instance = small_instance(pipedream_dir, num_jobs=20, seed=seed)
        problem = build_problem(instance)
        ip = worker_count_bound(problem, time_limit=5)
        lp = worker_count_bound(problem, integral=False)
        assert lp >= ip
        for name in ("para-max", "para-min", "min-feasible", "random"):
            assert ip >= simulate(instance, make_policy(name), seed=0).accepted


def test_ctrl_c_stops_the_relaxation_with_a_valid_bound(pipedream_dir):
    """200 paper jobs: HiGHS does not close the relaxation within a minute."""
    instance = instance_from_dict({
        "graphs": {g: {"pipedream": str(pipedream_dir / f"{g}.txt")} for g in PAPER_GRAPHS},
        "workload": {"graphs": list(PAPER_GRAPHS), "num_jobs": 200, "interarrival_ms": 1000,
                     "max_jct_fraction": {"paper": "A"}, "seed": 0}})
    problem = build_problem(instance)
    before = signal.getsignal(signal.SIGINT)
    timer = threading.Timer(1.0, signal.raise_signal, (signal.SIGINT,))
    started = time.perf_counter()
    with stoppable():  # as solve() does: a Ctrl-C during model building is a stop request too
        timer.start()
        try:
            relaxation = solve_relaxation(problem, time_limit=60)
        finally:
            timer.cancel()
    assert relaxation.interrupted and time.perf_counter() - started < 15
    assert relaxation.bound <= worker_count_bound(problem, integral=False)
    assert relaxation.bound >= simulate(instance, make_policy("para-max")).accepted
    assert signal.getsignal(signal.SIGINT) is before


def test_a_choice_becomes_a_valid_solution(pipedream_dir):
    instance = small_instance(pipedream_dir, num_jobs=6, horizon=2500.0)
    problem = build_problem(instance)
    # greedily take the first option of each job that conflicts with nothing taken so far
    chosen, taken = {}, set()
    for j, ks in enumerate(problem.by_job):
        for k in ks:
            clash = any(k in row and taken & set(row) for row in problem.rows)
            if not clash:
                chosen[j], taken = k, taken | {k}
                break
    solution = to_solution(problem, chosen, method="greedy", status="feasible",
                           bound_accepted=len(instance.jobs), solve_seconds=0.0)
    assert solution.accepted == len(chosen) > 0
    assert find_problems(instance, solution) == []


def test_objective_never_trades_a_job_for_worker_time(pipedream_dir):
    problem = build_problem(small_instance(pipedream_dir))
    obj = objective(problem)
    tiebreaks = [obj.scale - c for c in obj.coefficient]
    assert all(t >= 0 for t in tiebreaks)
    assert sum(max(tiebreaks[k] for k in ks) for ks in problem.by_job if ks) < obj.scale
