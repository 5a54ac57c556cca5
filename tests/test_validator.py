"""The independent validator: a simulated solution passes, and every kind of hand-made
infeasibility is reported (each test breaks one thing and checks that exactly that is found)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from pacopt.model.instance import instance_from_dict
from pacopt.model.simulator import simulate
from pacopt.model.solution import Solution
from pacopt.online.policies import HEURISTICS, make_policy
from pacopt.solvers import api
from pacopt.solvers.api import solve
from pacopt.solvers.validate import ValidationError, find_problems, validate

CNN = str(Path(__file__).resolve().parents[1] / "examples" / "graphs" / "cnn.json")
TINY = {"ops": [{"id": "a", "forward_ms": 1.0, "backward_ms": 2.0, "activation_bytes": 1e6,
                 "parameter_bytes": 1e5},
                {"id": "b", "forward_ms": 0.5, "backward_ms": 1.0, "activation_bytes": 4e5,
                 "parameter_bytes": 0}],
        "deps": [["a", "b"]]}
#: (id, graph, arrival_ms, beta). With min-feasible on the default 4x4x2 cluster: j0 cnn d3
#: (0..~1070 ms), j1 cnn d4 (10..~813), j2 tiny d2 (20..~132), j3 rejected (beta too tight),
#: j4 tiny d1 (JCT == deadline), j5 cnn d3 reusing j0's workers after j0 has finished.
JOBS = [("j0", "cnn", 0, 0.5), ("j1", "cnn", 10, 0.3), ("j2", "tiny", 20, 0.6),
        ("j3", "cnn", 30, 0.1), ("j4", "tiny", 40, 1.0), ("j5", "cnn", 2000, 0.5)]


def make_instance(jobs=JOBS, **extra):
    data = {"model": {"preset": "ddls"}, "graphs": {"cnn": {"file": CNN}, "tiny": TINY},
            "jobs": [{"id": i, "graph": g, "arrival_ms": a, "max_jct_fraction": b}
                     for i, g, a, b in jobs], **extra}
    return instance_from_dict(data)


@pytest.fixture(scope="module")
def base():
    """The instance (no horizon) and its min-feasible solution."""
    instance = make_instance()
    return instance, simulate(instance, make_policy("min-feasible"), seed=0)


class DeadlineOnly:
    """The smallest degree meeting the deadline, blind to the horizon (min-feasible also asks
    for the end by the horizon): it starts jobs the horizon cuts, which the validator must
    accept as blocked (``horizon``)."""

    name = "deadline-only"

    def reset(self, seed):
        pass

    def choose(self, decision):
        ok = [d for d in decision.valid_degrees if decision.jct_ms(d) <= decision.deadline_ms]
        return ok[0] if ok else 0


@pytest.fixture(scope="module")
def with_horizon():
    """The same jobs with a horizon at 1000 ms: j0 runs past it, j5 arrives after it."""
    instance = make_instance(horizon_ms=1000.0)
    return instance, simulate(instance, DeadlineOnly(), seed=0)


def rec(solution, job_id):
    return next(job for job in solution.jobs if job.id == job_id)


def broken(pair):
    instance, solution = pair
    return instance, copy.deepcopy(solution)


def only_problem(instance, solution, fragment):
    """Exactly one problem is found, and it says ``fragment``."""
    problems = find_problems(instance, solution)
    assert len(problems) == 1 and fragment in problems[0], problems


def only_overlaps(instance, solution, first, second, workers):
    """The only problems are ``first`` and ``second`` sharing each of ``workers`` at once."""
    problems = find_problems(instance, solution)
    assert sorted(problems) == [f"worker {w} holds jobs '{first}' and '{second}' at once "
                                f"({rec(solution, second).start_ms:g} < "
                                f"{_held_until(instance, rec(solution, first)):g} ms)"
                                for w in sorted(workers)], problems


def _held_until(instance, record):
    horizon = instance.horizon_ms
    return record.end_ms if horizon is None else min(record.end_ms, horizon)


def block_within(instance, servers, m):
    """A valid block for ``m`` sub-ops lying on the named servers."""
    cluster = instance.cluster
    inside = {cluster.server_index(name) for name in servers}
    return next(b for b in cluster.blocks(m) if set(b.servers) <= inside)


# ----- valid solutions -------------------------------------------------------------------------
def test_simulated_solution_is_valid(base):
    instance, solution = base
    assert find_problems(instance, solution) == []
    # The fixture exercises what it is meant to: accepted and rejected jobs, and a worker reused
    # by a later job once its first job has finished (sharing in time is not an overlap).
    assert [j.id for j in solution.jobs if not j.accepted] == ["j3"]
    assert rec(solution, "j3").reason == "rejected"
    assert [rec(solution, j).degree for j in ("j0", "j1", "j2", "j4")] == [3, 4, 2, 1]
    assert rec(solution, "j4").jct_ms == pytest.approx(rec(solution, "j4").deadline_ms)
    assert set(rec(solution, "j0").workers) & set(rec(solution, "j5").workers)
    assert rec(solution, "j0").end_ms < rec(solution, "j5").start_ms


@pytest.mark.parametrize("policy", sorted(HEURISTICS))
def test_every_heuristic_gives_a_valid_solution(policy):
    instance = make_instance()
    for seed in (0, 1):
        assert find_problems(instance, simulate(instance, make_policy(policy), seed=seed)) == []


def test_horizon_solution_is_valid(with_horizon):
    instance, solution = with_horizon
    assert find_problems(instance, solution) == []
    j0, j5 = rec(solution, "j0"), rec(solution, "j5")
    assert not j0.accepted and j0.reason == "horizon" and j0.end_ms > 1000  # runs past it
    assert not j5.accepted and j5.reason == "horizon" and j5.start_ms is None
    assert rec(solution, "j1").accepted


def test_round_trip_through_json_still_validates(base):
    instance, solution = base
    again = Solution.from_dict(json.loads(solution.dumps()))
    assert again.jobs == solution.jobs
    assert (again.accepted, again.arrived) == (solution.accepted, solution.arrived)
    assert find_problems(instance, again) == []
    # ... and a broken one stays broken through the round trip.
    bad = copy.deepcopy(solution)
    rec(bad, "j1").jct_ms *= 1.01
    assert find_problems(instance, Solution.from_dict(json.loads(bad.dumps())))


# ----- overlapping jobs ------------------------------------------------------------------------
def test_two_jobs_on_one_worker_at_once(base):
    instance, solution = broken(base)
    j0, j2 = rec(solution, "j0"), rec(solution, "j2")
    assert j0.start_ms < j2.start_ms < j0.end_ms
    block = block_within(instance, j0.workers, 2)  # tiny at degree 2 splits both ops 2 ways
    j2.blocks = [block.label, block.label]
    j2.workers = sorted(instance.cluster.server_name(s) for s in block.servers)
    only_overlaps(instance, solution, "j0", "j2", j2.workers)


def test_job_blocked_at_horizon_holds_its_workers_until_then(with_horizon):
    instance, solution = broken(with_horizon)
    j0, j2 = rec(solution, "j0"), rec(solution, "j2")
    assert j0.reason == "horizon"
    block = block_within(instance, j0.workers, 2)
    j2.blocks = [block.label, block.label]
    j2.workers = sorted(instance.cluster.server_name(s) for s in block.servers)
    only_overlaps(instance, solution, "j0", "j2", j2.workers)


# ----- placements --------------------------------------------------------------------------------
def test_block_of_the_wrong_shape(base):
    instance, solution = broken(base)
    j2 = rec(solution, "j2")
    assert j2.blocks[0] == "0-1-0:2x1x1"
    j2.blocks[0] = "0-1-0:1x1x1"  # a real block, but for 1 sub-op; op 'a' is split 2 ways
    only_problem(instance, solution, "'0-1-0:1x1x1' is not a valid RAMP block for 2 sub-ops")


def test_block_that_wraps_off_the_cluster(base):
    instance, solution = broken(base)
    labels = {b.label for b in instance.cluster.blocks(2)}
    assert "2-1-0:2x1x1" in labels and "3-1-0:2x1x1" not in labels  # groups 3 and 4: no group 4
    rec(solution, "j2").blocks[1] = "3-1-0:2x1x1"
    only_problem(instance, solution, "'3-1-0:2x1x1' is not a valid RAMP block for 2 sub-ops")


def test_garbage_block_label_and_wrong_block_count(base):
    instance, solution = broken(base)
    rec(solution, "j2").blocks[0] = "nonsense"
    rec(solution, "j4").blocks.pop()
    problems = find_problems(instance, solution)
    assert len(problems) == 2, problems
    assert "'nonsense' is not a valid RAMP block" in problems[0]
    assert "job 'j4': 1 blocks for 2 ops" in problems[1]


def test_degree_out_of_range(base):
    instance, solution = broken(base)
    rec(solution, "j4").degree = 17
    only_problem(instance, solution, "degree 17 outside 1..16")


@pytest.mark.parametrize("change", ["drop", "add"])
def test_workers_not_the_union_of_the_blocks(base, change):
    instance, solution = broken(base)
    j1 = rec(solution, "j1")
    if change == "drop":
        j1.workers = j1.workers[:-1]
    else:
        j1.workers = sorted(j1.workers + ["3-3-1"])  # a free worker, so no overlap either
    only_problem(instance, solution, "are not the union of its blocks")


def test_memory_over_worker_memory():
    instance = make_instance([("m0", "tiny", 0, 1.0)],
                             cluster={"worker_memory": 7e5})  # op a 1.1 MB, op b 0.4 MB
    solution = simulate(instance, make_policy("min-feasible"), seed=0)
    assert find_problems(instance, solution) == []
    m0 = rec(solution, "m0")
    # First-fit could not stack both halves on one pair of workers (0.55 + 0.2 MB > 0.7 MB) ...
    assert m0.accepted and m0.degree == 2 and m0.blocks[0] != m0.blocks[1]
    # ... so a hand-built placement that does must be refused.
    m0.blocks = [m0.blocks[0], m0.blocks[0]]
    m0.workers = sorted(instance.cluster.server_name(s) for s in
                        instance.cluster.block_from_label(m0.blocks[0], 2).servers)
    only_problem(instance, solution, "exceeds the memory of worker")


# ----- times and deadlines -----------------------------------------------------------------------
def test_misreported_jct(base):
    instance, solution = broken(base)
    rec(solution, "j1").jct_ms *= 1.001
    only_problem(instance, solution, "job 'j1': reported JCT")


def test_jct_within_tolerance_is_accepted(base):
    instance, solution = broken(base)
    rec(solution, "j1").jct_ms *= 1 + 1e-9
    assert find_problems(instance, solution) == []


def test_missing_jct(base):
    instance, solution = broken(base)
    rec(solution, "j1").jct_ms = None
    only_problem(instance, solution, "reported JCT None ms")


def test_deadline_missed_after_beta_shrinks(base):
    # The same solution against an instance whose j4 has beta 0.9: j4 ran sequentially with a
    # JCT equal to its old deadline, so it now misses it (the record is made consistent otherwise).
    _, solution = broken(base)
    jobs = [(i, g, a, 0.9 if i == "j4" else b) for i, g, a, b in JOBS]
    instance = make_instance(jobs)
    j4 = rec(solution, "j4")
    assert j4.degree == 1
    j4.max_jct_fraction = 0.9
    j4.deadline_ms = instance.deadline_ms(next(j for j in instance.jobs if j.id == "j4"))
    only_problem(instance, solution, "job 'j4': accepted but its JCT 225 ms misses the deadline")


def test_deadline_missed_at_a_lower_degree(base):
    # Run j1 (deadline ~962 ms) at j0's degree 3 on a free column: consistent blocks, workers and
    # JCT (~1070 ms), but too slow.
    instance, solution = broken(base)
    j0, j1 = rec(solution, "j0"), rec(solution, "j1")
    assert all(label.startswith("0-0-0:") for label in j0.blocks)
    j1.degree = j0.degree
    j1.blocks = [label.replace("0-0-0:", "0-0-1:") for label in j0.blocks]
    j1.workers = ["0-0-1", "1-0-1", "2-0-1"]
    j1.jct_ms = j0.jct_ms
    assert j1.jct_ms > j1.deadline_ms
    only_problem(instance, solution, "job 'j1': accepted but its JCT")


def test_start_not_at_arrival(base):
    instance, solution = broken(base)
    rec(solution, "j2").start_ms += 5
    only_problem(instance, solution, "job 'j2': must start at its arrival 20")


def test_accepted_without_start(base):
    instance, solution = broken(base)
    rec(solution, "j2").start_ms = None
    only_problem(instance, solution, "must start at its arrival")


def test_wrong_deadline_or_arrival_in_record(base):
    instance, solution = broken(base)
    rec(solution, "j3").deadline_ms *= 2
    rec(solution, "j3").arrival_ms += 1
    problems = find_problems(instance, solution)
    assert len(problems) == 2, problems
    assert "graph or arrival differ" in problems[0] and "should be" in problems[1]


# ----- the job list --------------------------------------------------------------------------------
def test_missing_job(base):
    instance, solution = broken(base)
    solution.jobs = [job for job in solution.jobs if job.id != "j3"]
    only_problem(instance, solution, "missing ['j3']")


def test_unknown_job(base):
    instance, solution = broken(base)
    rec(solution, "j3").id = "ghost"
    only_problem(instance, solution, "(missing ['j3'], unknown ['ghost']")


def test_duplicated_job(base):
    instance, solution = broken(base)
    solution.jobs.append(copy.deepcopy(rec(solution, "j3")))
    only_problem(instance, solution, "7 records for 6 jobs")


# ----- blocking reasons ----------------------------------------------------------------------------
@pytest.mark.parametrize("reason", [None, "bogus"])
def test_blocked_without_a_valid_reason(base, reason):
    instance, solution = broken(base)
    rec(solution, "j3").reason = reason
    only_problem(instance, solution, f"job 'j3': blocked without a valid reason ({reason!r})")


def test_rejected_with_a_degree(base):
    instance, solution = broken(base)
    rec(solution, "j3").degree = 2
    only_problem(instance, solution, "job 'j3': rejected but degree 2")


def test_accepted_with_a_reason(base):
    instance, solution = broken(base)
    rec(solution, "j0").reason = "deadline"
    only_problem(instance, solution, "job 'j0': accepted but carries reason 'deadline'")


def test_horizon_reason_without_a_horizon(base):
    instance, solution = broken(base)
    assert instance.horizon_ms is None
    rec(solution, "j3").reason = "horizon"
    rec(solution, "j3").degree = 0
    only_problem(instance, solution, "job 'j3': blocked for the horizon, but the instance has none")


# ----- the horizon ---------------------------------------------------------------------------------
def test_accepted_but_running_at_the_horizon(with_horizon):
    instance, solution = broken(with_horizon)
    j0 = rec(solution, "j0")
    j0.accepted, j0.reason = True, None
    only_problem(instance, solution, "job 'j0': accepted but still running at the horizon")


@pytest.mark.parametrize("reason", [None, "rejected"])
def test_job_arriving_after_the_horizon_must_be_blocked_for_it(with_horizon, reason):
    instance, solution = broken(with_horizon)
    j5 = rec(solution, "j5")
    assert j5.arrival_ms >= instance.horizon_ms
    j5.accepted, j5.reason = reason is None, reason
    only_problem(instance, solution, "job 'j5': arrives at or after the horizon")


def test_horizon_reason_for_a_job_finishing_in_time(with_horizon):
    instance, solution = broken(with_horizon)
    j1 = rec(solution, "j1")
    assert j1.accepted and j1.end_ms < instance.horizon_ms
    j1.accepted, j1.reason = False, "horizon"
    only_problem(instance, solution, "job 'j1': blocked for the horizon but finishes before it")


# ----- summary fields ------------------------------------------------------------------------------
def test_wrong_preset(base):
    instance, solution = broken(base)
    solution.preset = "physical"
    only_problem(instance, solution, "solution preset 'physical' is not the instance's 'ddls'")


def test_unknown_status(base):
    instance, solution = broken(base)
    solution.status = "great"
    only_problem(instance, solution, "unknown status 'great'")


def claim(solution, method, status, bound):
    """Relabel ``solution`` as ``method`` claiming ``status`` and ``bound``, gap consistent."""
    solution.method, solution.status, solution.bound_accepted = method, status, bound
    solution.gap = None if bound is None else (bound - solution.accepted) / max(bound, 1)


def test_bound_below_accepted(base):
    instance, solution = broken(base)
    claim(solution, "bound", "feasible", solution.accepted - 1)
    only_problem(instance, solution, f"bound {solution.accepted - 1} is below the "
                                     f"{solution.accepted} accepted jobs")


def test_optimal_status_with_a_different_bound(base):
    instance, solution = broken(base)
    claim(solution, "milp", "optimal", solution.accepted + 1)
    only_problem(instance, solution, "status 'optimal' but the bound 6 differs")
    claim(solution, "milp", "optimal", solution.accepted)
    assert find_problems(instance, solution) == []


def test_a_heuristic_relabelled_optimal_is_invalid(base):
    """An online policy proves nothing, whatever bound it is given."""
    instance, solution = broken(base)
    claim(solution, "min-feasible", "optimal", solution.accepted)
    problems = find_problems(instance, solution)
    assert any("must be 'heuristic', not 'optimal'" in p for p in problems), problems
    assert any("proves no bound" in p for p in problems), problems


@pytest.mark.parametrize("gap", [0.5, None])
def test_a_gap_that_contradicts_the_bound(base, gap):
    instance, solution = broken(base)
    claim(solution, "cpsat", "feasible", solution.accepted + 2)
    solution.gap = gap
    only_problem(instance, solution, f"gap {gap} should be")


def test_a_status_without_a_bound(base):
    instance, solution = broken(base)
    claim(solution, "cpsat", "feasible", None)
    only_problem(instance, solution, "status 'feasible' needs a bound_accepted")


# ----- validate() and solve() -------------------------------------------------------------------------
def test_validate_marks_a_good_solution(base):
    instance, solution = broken(base)
    assert not solution.validated
    assert validate(instance, solution) is solution and solution.validated


def test_validate_raises_with_the_problems(base):
    instance, solution = broken(base)
    solution.validated = True
    rec(solution, "j1").jct_ms *= 2
    rec(solution, "j3").reason = None
    with pytest.raises(ValidationError) as info:
        validate(instance, solution)
    assert info.value.problems == find_problems(instance, solution)
    assert len(info.value.problems) == 2
    assert "reported JCT" in str(info.value) and "blocked without a valid reason" in str(info.value)
    assert solution.validated is False


def test_solve_validates_its_solution(base):
    instance, simulated = base
    solution = solve(instance, "min-feasible", seed=0)
    assert solution.validated is True and solution.status == "heuristic"
    assert "validation_problems" not in solution.metrics
    assert solution.jobs == simulated.jobs
    assert solution.method == "min-feasible" and solution.bound_accepted is None


def test_solve_reports_a_solution_that_fails_validation(base, monkeypatch):
    instance, _ = base
    real = api.simulate

    def corrupted(*args, **kwargs):
        solution = real(*args, **kwargs)
        rec(solution, "j1").jct_ms /= 2
        return solution

    monkeypatch.setattr(api, "simulate", corrupted)
    with pytest.warns(UserWarning, match="the method's JCTs differ from the validator's own"):
        solution = solve(instance, "min-feasible")
    assert solution.validated is False and solution.status == "error"
    assert any("job 'j1': reported JCT" in p for p in solution.metrics["validation_problems"])
