"""The online simulator: events, blocking reasons, horizon, metrics, reproducibility."""

import math
import pickle

import numpy as np
import pytest
from episodes import random_decisions

from pacopt.model.instance import instance_from_dict
from pacopt.model.jct import JctModel
from pacopt.model.simulator import OnlineEpisode, simulate
from pacopt.online.policies import make_policy
from pacopt.solvers.validate import find_problems


class Always:
    """A policy that always answers ``degree``."""

    name = "always"

    def __init__(self, degree):
        self.degree = degree

    def reset(self, seed):
        pass

    def choose(self, decision):
        return self.degree


def alexnet_instance(pipedream_dir, jobs, horizon=None, preset="ddls"):
    data = {"model": {"preset": preset},
            "graphs": {"alexnet": {"pipedream": str(pipedream_dir / "alexnet.txt")}},
            "jobs": [{"id": f"j{i}", "graph": "alexnet", "arrival_ms": t, "max_jct_fraction": b}
                     for i, (t, b) in enumerate(jobs)]}
    if horizon is not None:
        data["horizon_ms"] = horizon
    return instance_from_dict(data)


def reasons(solution):
    return [job.reason for job in solution.jobs]


def test_para_max_on_alexnet_repeats_accept_accept_block(pipedream_dir):
    """The reference's illustration (docs/model.md#alexnet): jobs at 0 and 1000 take the two
    (4,4,1) halves, the one at 2000 finds no free worker, the first job ends at 2254.76."""
    instance = alexnet_instance(pipedream_dir, [(1000.0 * i, 0.5) for i in range(9)])
    solution = simulate(instance, make_policy("para-max"))
    assert [j.accepted for j in solution.jobs] == [True, True, False] * 3
    assert reasons(solution)[2] == "rejected"
    first, second = solution.jobs[:2]
    assert first.degree == 16 and first.blocks[0] == "0-0-0:4x4x1"
    assert second.blocks[0] == "0-0-1:4x4x1"
    assert first.end_ms == pytest.approx(2254.76, abs=0.1)
    assert find_problems(instance, solution) == []


def test_every_blocking_reason(pipedream_dir):
    arrivals = [(0.0, 1.0), (10.0, 1.0), (20.0, 1.0)]
    rejected = simulate(alexnet_instance(pipedream_dir, arrivals), Always(0))
    assert reasons(rejected) == ["rejected"] * 3
    # two 16-way jobs fill the cluster; the third cannot be placed
    full = simulate(alexnet_instance(pipedream_dir, arrivals), Always(16))
    assert reasons(full) == [None, None, "no_placement"]
    # sequential meets only beta = 1: its JCT is exactly the sequential JCT
    late = simulate(alexnet_instance(pipedream_dir, [(0.0, 0.99), (5e4, 1.0)]), Always(1))
    assert reasons(late) == ["deadline", None]


def test_horizon_blocks_late_and_unfinished_jobs(pipedream_dir):
    """A job still running at the horizon is blocked but holds its workers until then; a job
    arriving at or after the horizon is never decided."""
    instance = alexnet_instance(pipedream_dir, [(0.0, 1.0), (1000.0, 1.0), (2500.0, 1.0),
                                                (2600.0, 1.0), (3000.0, 1.0)], horizon=3000.0)
    solution = simulate(instance, Always(16))  # each run takes 2254.76 ms
    assert reasons(solution) == [None, "horizon", "horizon", "no_placement", "horizon"]
    first, cut, cut_too, _, late = solution.jobs
    assert cut.degree == 16 and cut.start_ms == 1000.0 and cut.blocks[0] == "0-0-1:4x4x1"
    assert cut_too.blocks[0] == first.blocks[0] == "0-0-0:4x4x1"  # the other half is still held
    assert late.degree == 0 and late.start_ms is None
    assert solution.metrics["blocked_by_reason"]["horizon"] == 3
    assert find_problems(instance, solution) == []


def test_a_completion_at_the_arrival_frees_workers_first(pipedream_dir):
    probe = alexnet_instance(pipedream_dir, [(0.0, 1.0)])
    jct = JctModel(probe.cluster, probe.model).table(probe.graphs["alexnet"]).jct_ms[16]
    instance = alexnet_instance(pipedream_dir, [(0.0, 1.0), (0.0, 1.0), (jct, 1.0), (jct, 1.0)])
    solution = simulate(instance, Always(16))
    assert reasons(solution) == [None, None, None, None]
    assert solution.jobs[2].blocks == solution.jobs[0].blocks


def test_a_policy_answering_out_of_range_is_an_error(pipedream_dir):
    with pytest.raises(ValueError, match="degree 17"):
        simulate(alexnet_instance(pipedream_dir, [(0.0, 0.5)]), Always(17))


def test_the_episode_can_be_stepped_one_decision_at_a_time(pipedream_dir):
    """What a gymnasium environment does: look at the decision, answer, repeat."""
    instance = alexnet_instance(pipedream_dir, [(0.0, 0.5), (10.0, 0.5), (20.0, 0.5), (99.0, 0.5)],
                                horizon=50.0)
    episode = OnlineEpisode(instance)
    seen = []
    while not episode.done:
        seen.append(episode.decision.job_id)
        assert episode.decision.state.now_ms == instance.jobs[len(seen) - 1].arrival_ms
        episode.decide(16 if len(seen) < 3 else 1)
    assert seen == ["j0", "j1", "j2"]          # j3 arrives after the horizon: never decided
    assert reasons(episode.solution("manual")) == ["horizon", "horizon", "no_placement", "horizon"]
    with pytest.raises(RuntimeError, match="over"):
        episode.decide(1)
    stepped = OnlineEpisode(instance)
    stepped.decide(16)
    with pytest.raises(RuntimeError, match="still has jobs"):
        stepped.solution("manual")


def paper_instance(pipedream_dir, preset="ddls", beta="A", num_jobs=1001, seed=0):
    names = ["alexnet", "vgg16", "resnet18", "squeezenet1_0", "gnmt"]
    return instance_from_dict({
        "model": {"preset": preset},
        "graphs": {g: {"pipedream": str(pipedream_dir / f"{g}.txt")} for g in names},
        "workload": {"graphs": names, "num_jobs": num_jobs, "interarrival_ms": 1000,
                     "max_jct_fraction": {"paper": beta}, "seed": seed},
        "horizon_ms": 1000.0 * (num_jobs - 1)})


@pytest.fixture(scope="module")
def paper_runs(pipedream_dir):
    instance = paper_instance(pipedream_dir)
    model = JctModel(instance.cluster, instance.model)
    return instance, {name: simulate(instance, make_policy(name), seed=0, model=model)
                      for name in ("para-max", "para-min", "random", "min-feasible", "sequential")}


def test_paper_baselines_land_near_the_papers_numbers(paper_runs):
    """The paper (beta A, mean of 3 seeds): Para_max 0.262, Para_min 0.309, Random 0.517."""
    instance, runs = paper_runs
    assert runs["para-max"].blocking_rate == pytest.approx(0.262, abs=0.03)
    assert runs["para-min"].blocking_rate == pytest.approx(0.309, abs=0.03)
    assert runs["random"].blocking_rate == pytest.approx(0.517, abs=0.04)
    assert runs["sequential"].blocking_rate > 0.98  # only beta = 1.00 can be met
    for solution in runs.values():
        assert solution.arrived == 1001
        assert find_problems(instance, solution) == []


def test_metrics_are_consistent(paper_runs):
    instance, runs = paper_runs
    for solution in runs.values():
        m = solution.metrics
        assert m["accepted"] + sum(m["blocked_by_reason"].values()) == m["arrived"] == 1001
        assert m["blocking_rate"] == pytest.approx(solution.blocking_rate)
        assert 0.0 <= m["worker_utilisation"] <= 1.0
        assert m["episode_ms"] == instance.horizon_ms
        accepted = [j for j in solution.jobs if j.accepted]
        if accepted:
            assert m["mean_jct_ms"] == pytest.approx(sum(j.jct_ms for j in accepted) / len(accepted))
            assert m["throughput_jobs_per_hour"] == pytest.approx(len(accepted) / 1000.0 * 3600)
    # min-feasible never accepts a job that then misses its deadline, by construction
    assert runs["min-feasible"].metrics["blocked_by_reason"]["deadline"] == 0
    assert runs["para-max"].metrics["mean_degree"] > runs["min-feasible"].metrics["mean_degree"]


def test_random_is_reproducible_from_its_seed(pipedream_dir):
    instance = paper_instance(pipedream_dir, num_jobs=200)
    a, b, c = (simulate(instance, make_policy("random"), seed=s) for s in (1, 1, 2))
    assert [j.degree for j in a.jobs] == [j.degree for j in b.jobs]
    assert [j.degree for j in a.jobs] != [j.degree for j in c.jobs]


def test_physical_preset_makes_communication_matter(pipedream_dir):
    """Under consistent units maximum parallelism loses more jobs to communication: para-max's
    blocking rises well above the ddls preset's, and min-feasible beats it."""
    ddls = simulate(paper_instance(pipedream_dir, num_jobs=400), make_policy("para-max"))
    instance = paper_instance(pipedream_dir, preset="physical", num_jobs=400)
    para_max = simulate(instance, make_policy("para-max"))
    min_feasible = simulate(instance, make_policy("min-feasible"))
    assert para_max.blocking_rate > ddls.blocking_rate + 0.1
    assert min_feasible.blocking_rate < para_max.blocking_rate
    assert find_problems(instance, min_feasible) == []


class StoppedInsideAPlacer(Always):
    """Answers ``degree``, but the third decision is cut by a stop (Ctrl-C) inside the placer:
    it requests the stop and raises ``OutOfTime``, as a footprint menu does."""

    def __init__(self, degree, stop=True):
        super().__init__(degree)
        self.calls, self.stop = 0, stop

    def choose(self, decision):
        from pacopt.infra.interrupt import OutOfTime, request_stop

        self.calls += 1
        if self.calls == 3:
            if self.stop:
                request_stop()
            raise OutOfTime("building the footprint menu")
        return self.degree


def test_a_stop_inside_a_placer_rejects_the_job_and_ends_the_episode(pipedream_dir):
    from pacopt.infra.interrupt import OutOfTime, stoppable

    instance = alexnet_instance(pipedream_dir, [(i * 1000.0, 1.0) for i in range(6)])
    with stoppable():
        solution = simulate(instance, StoppedInsideAPlacer(2))
    assert [job.accepted for job in solution.jobs] == [True, True, False, False, False, False]
    assert not find_problems(instance, solution)
    with pytest.raises(OutOfTime):  # without a stop it is a real error, not swallowed
        simulate(instance, StoppedInsideAPlacer(2, stop=False))


def test_blocking_rate_is_blocked_over_arrived_exactly():
    """19 blocked of 100 prints and saves as 0.19, not 1 - 0.81 (0.18999999999999995)."""
    from pacopt.model.solution import JobRecord, Solution

    jobs = [JobRecord(id=f"j{i}", graph="g", arrival_ms=i, max_jct_fraction=0.5, deadline_ms=1.0,
                      accepted=i >= 19) for i in range(100)]
    solution = Solution(method="m", preset="ddls", status="heuristic", jobs=jobs)
    assert solution.blocking_rate == 0.19
    assert solution.to_dict()["blocking_rate"] == 0.19


def _paper(jobs: int, preset: str = "ddls"):
    from pacopt.model.paper_workload import paper_instance

    return paper_instance("C", 9700, jobs, preset)


@pytest.mark.usefixtures("pipedream_env")
@pytest.mark.parametrize("preset", ["ddls", "physical"])
def test_a_sequential_episode_times_only_the_degree_it_plays(preset):
    """The tables' times are simulated when first read: ``sequential`` under first fit reads
    which degrees fit and times degree 1 alone; the times read afterwards are the ones a
    table timed at once has."""
    instance = _paper(60, preset)
    model = JctModel(instance.cluster, instance.model, persist=False)
    simulate(instance, make_policy("sequential"), seed=0, model=model)
    timed = model.step_timings()
    assert timed and all(len(classes) == 1 for classes in timed.values())
    for graph in instance.graphs.values():
        table = model.table(graph)
        assert table.placed[1:].sum() > 4  # many degrees fit, yet none but 1 was timed
        fresh = JctModel(instance.cluster, instance.model, persist=False)
        for d in range(1, table.max_degree + 1):
            if table.placed[d]:
                timing = fresh.timing(graph, table.counts[d], fresh.place(graph, table.counts[d]))
                assert table.jct_ms[d] == timing.jct_ms
                assert table.comm_overhead_ms[d] == timing.comm_overhead_ms
            else:
                assert math.isnan(table.jct_ms[d])


@pytest.mark.usefixtures("pipedream_env")
def test_a_pickled_table_carries_its_times_and_a_scaled_one_scales_them():
    instance = _paper(5)
    model = JctModel(instance.cluster, instance.model, persist=False)
    graph = instance.graphs["vgg16"]
    table = model.table(graph)
    copy = pickle.loads(pickle.dumps(table))
    assert copy.timer is None
    assert np.array_equal(copy.jct_ms, table.jct_ms, equal_nan=True)
    scaled = model.job_table(graph, 2.5)
    assert np.array_equal(scaled.jct_ms, table.jct_ms * 2.5, equal_nan=True)
    assert np.array_equal(scaled.comm_overhead_ms, table.comm_overhead_ms * 2.5, equal_nan=True)
    assert not scaled.jct_ms.flags.writeable and not table.jct_ms.flags.writeable


@pytest.mark.usefixtures("pipedream_env")
def test_first_fits_placement_without_the_options_is_the_options_placement():
    """Under first fit a decision places a degree without the live options of every degree;
    at every decision of an episode that is the placement, and the placeability, the options
    give."""
    checked = 0
    for decision in random_decisions(_paper(120), 4):
        direct = [decision.placement(d) for d in range(1, decision.max_degree + 1)]
        assert decision._options is None
        options = decision.options()
        for d, placement in enumerate(direct, start=1):
            assert (placement is not None) == bool(options.placeable[d])
            if placement is not None:
                assert placement.mask == options.masks[d]
                assert placement == decision.placement(d)
                checked += 1
    assert checked > 500


@pytest.mark.usefixtures("pipedream_env")
def test_a_table_outliving_its_model_is_timed_the_same():
    """A table holds its model weakly (so that a dropped model is freed at once): read after
    the model is gone, its times are a fresh model's, the same."""
    import weakref

    instance = _paper(5)
    graph = instance.graphs["resnet18"]
    model = JctModel(instance.cluster, instance.model, persist=False)
    table, gone = model.table(graph), weakref.ref(model)
    del model
    assert gone() is None  # freed by its last reference, not by the collector
    alive = JctModel(instance.cluster, instance.model, persist=False)
    assert np.array_equal(table.jct_ms, alive.table(graph).jct_ms, equal_nan=True)


@pytest.mark.usefixtures("pipedream_env")
@pytest.mark.parametrize("preset", ["ddls", "physical"])
def test_steps_timed_together_are_the_steps_timed_one_by_one(preset, tmp_path, monkeypatch):
    """A table's first read simulates its steps together, in threads: the times, and the
    cache file's lines, are those of timing each degree in turn."""
    instance = _paper(5, preset)
    graph = instance.graphs[instance.jobs[0].graph]
    files = []
    for way in ("together", "in turn"):
        monkeypatch.setenv("PACOPT_CACHE_DIR", str(tmp_path / way))
        model = JctModel(instance.cluster, instance.model)
        table = model.table(graph)
        work = [(table.counts[d], model.place(graph, table.counts[d], 0))
                for d in range(1, len(table.placed)) if table.placed[d]]
        assert len(work) > 4
        if way == "together":
            timings = model.timings(graph, work)
        else:
            assert timings == [model.timing(graph, c, p) for c, p in work]
        files.append(sorted(p.read_text() for p in (tmp_path / way).rglob("*") if p.is_file()))
    assert files[0] == files[1] and files[0]
