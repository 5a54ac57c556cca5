"""Trace workloads (``workload.trace``, ``pacopt trace``), their graphs, and the two trace policies.

Hand-made traces are written by the tests themselves; the real ElasticFlow traces are found as
the package finds them (``PACOPT_TRACES_DIR``, the download cache), else in
``shared/data/traces/elasticflow`` beside the repository (``conftest.trace_dir``), and those tests
skip cleanly without them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from offline_cases import TINY

from pacopt.cli import pacopt_main, solve_main
from pacopt.infra.errors import InputError
from pacopt.model.datasets import find_trace, find_traces, trace_path, traces_cache
from pacopt.model.decision import Decision
from pacopt.model.graph import graph_from_dict
from pacopt.model.graph_sources import EXAMPLES_DIR, read_graph_file
from pacopt.model.instance import SCHEMA_PATH, instance_from_dict, load_instance
from pacopt.model.jct import JctModel
from pacopt.model.settings import ModelSettings
from pacopt.model.state import ClusterState
from pacopt.model.topology import RampCluster
from pacopt.model.trace import (
    DEFAULT_LOAD,
    RAW_GRAPHS,
    TraceSpec,
    busiest_window,
    expand_trace,
    read_trace,
    requested_degree,
)
from pacopt.online.trace_policies import (
    ElasticFlow,
    buddy_levels,
    elasticflow_degree,
    make_trace_policy,
)
from pacopt.solvers.api import solve

GENERATED_HEADER = (
    "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration")
# three jobs: (id, submitted s, model, deadline s, GPUs, duration s)
THREE = [("a", 100, "resnet50", 1600, 1, 1000), ("b", 160, "bert", 900, 2, 500),
         ("c", 400, "resnet50", 1400, 8, 2000)]


def generated_csv(path: Path, rows) -> Path:
    lines = [GENERATED_HEADER] + [f"{i},{s},10,{m},{d},64,{g},{t}" for i, s, m, d, g, t in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def raw_csv(path: Path, rows) -> Path:
    lines = ["job_id,submission_time,duration,num_gpu"] + [",".join(map(str, r)) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def tiny_instance(trace: dict, **extra) -> dict:
    """An instance replaying ``trace`` with its models mapped to the inline tiny graph."""
    trace = {"models": {"resnet50": "tiny", "bert": "tiny"}, **trace}
    return {"graphs": {"tiny": TINY}, "workload": {"trace": trace}, **extra}


@pytest.fixture
def traces_env(trace_dir, pipedream_env) -> Path:
    """The traces, and the PipeDream graphs their models map to."""
    return trace_dir


# ----- hand-made traces: the mapping --------------------------------------------------------------
def test_three_jobs_become_the_expected_jobs(tmp_path):
    path = generated_csv(tmp_path / "three.csv", THREE)
    instance = instance_from_dict(tiny_instance({"file": path.name, "format": "elasticflow",
                                                 "load": None}), tmp_path)
    model = JctModel(instance.cluster, instance.model, persist=False)
    table = model.table(instance.graphs["tiny"])
    assert [j.id for j in instance.jobs] == ["a", "b", "c"]
    # time compression 1000: a trace second is a simulated millisecond; arrivals from the first
    assert [j.arrival_ms for j in instance.jobs] == [0.0, 60.0, 300.0]
    assert [j.requested_degree for j in instance.jobs] == [1, 2, 8]
    for job, (_, submitted, _, deadline, gpus, duration) in zip(instance.jobs, THREE):
        scale = instance.work_scale(job)
        jct = model.job_table(instance.graphs["tiny"], scale).jct_ms[job.requested_degree]
        assert jct == pytest.approx(duration, rel=1e-12)  # alone, at its GPUs: its duration
        assert job.training_steps == pytest.approx(scale * instance.model.training_steps)
        # the deadline is the trace's, compressed alike: beta x sequential JCT = slack
        assert instance.deadline_ms(job) == pytest.approx(deadline - submitted, rel=1e-12)
    # a's deadline is 1.5 x its duration at one GPU: beta above 1, kept (see JobSpec)
    assert instance.jobs[0].max_jct_fraction == pytest.approx(1.5, rel=1e-9)
    assert table.workers[8] == 8


def test_load_stretches_the_arrivals(tmp_path):
    path = generated_csv(tmp_path / "three.csv", THREE)
    native = instance_from_dict(tiny_instance({"file": str(path), "format": "elasticflow",
                                               "load": None}))
    loaded = instance_from_dict(tiny_instance({"file": str(path), "format": "elasticflow",
                                               "load": 0.5, "time_compression": 100}))
    # footprint x duration: 1 x 1000 + 2 x 500 + 8 x 2000 trace seconds over 32 x 300
    native_load = (1 * 1000 + 2 * 500 + 8 * 2000) / (32 * 300)
    stretch = native_load / 0.5
    assert [j.arrival_ms for j in loaded.jobs] == pytest.approx(
        [10 * j.arrival_ms * stretch for j in native.jobs])
    # compression scales every time alike: the deadlines and the work, not beta
    for a, b in zip(native.jobs, loaded.jobs):
        assert b.max_jct_fraction == pytest.approx(a.max_jct_fraction)
        assert loaded.deadline_ms(b) == pytest.approx(native.deadline_ms(a) * 10)
    stats = expand_trace(TraceSpec.parse({"file": str(path), "format": "elasticflow",
                                          "models": {"resnet50": "cnn", "bert": "cnn"}}),
                         {}, RampCluster(), ModelSettings()).stats
    assert stats["load"] == pytest.approx(DEFAULT_LOAD) and stats["jobs"] == 3
    assert stats["requested_degrees"] == {1: 1, 2: 1, 8: 1}


def test_windows_start_and_size(tmp_path):
    rows = [(f"j{i}", 10 * i, 30 + i, 1 + (i % 2)) for i in range(20)]
    path = raw_csv(tmp_path / "raw.csv", rows)
    base = {"file": str(path), "format": "elasticflow-raw", "graphs": ["tiny"], "load": None}
    window = instance_from_dict(tiny_instance({**base, "start_s": 45, "num_jobs": 5}))
    assert [j.id for j in window.jobs] == ["j5", "j6", "j7", "j8", "j9"]
    assert window.jobs[0].arrival_ms == 0
    everything = instance_from_dict(tiny_instance({**base, "num_jobs": None}))
    assert len(everything.jobs) == 20
    tail = instance_from_dict(tiny_instance({**base, "start_s": 150}))  # 1001 asked, 5 left
    assert [j.id for j in tail.jobs] == ["j15", "j16", "j17", "j18", "j19"]


def test_busiest_window_has_the_most_gpu_time_per_second(tmp_path):
    # 1-GPU jobs every 100 s, then a burst of 8-GPU jobs every 10 s, then quiet again
    rows = ([(f"q{i}", 100 * i, 50, 1) for i in range(10)]
            + [(f"b{i}", 1000 + 10 * i, 50, 8) for i in range(5)]
            + [(f"r{i}", 2000 + 100 * i, 50, 1) for i in range(10)])
    path = raw_csv(tmp_path / "raw.csv", rows)
    trace = read_trace(path, "elasticflow-raw")
    assert busiest_window(trace, 5) == 10
    instance = instance_from_dict(tiny_instance({"file": str(path), "format": "elasticflow-raw",
                                                 "graphs": ["tiny"], "window": "busiest",
                                                 "num_jobs": 5}))
    assert [j.id for j in instance.jobs] == [f"b{i}" for i in range(5)]


def test_raw_traces_draw_graphs_and_betas_from_the_seed(tmp_path):
    rows = [(f"j{i}", i, 100, 1) for i in range(40)]
    path = raw_csv(tmp_path / "raw.csv", rows)
    two = {"tiny": TINY, "tiny2": {**TINY, "ops": [{**TINY["ops"][0], "forward_ms": 2.0},
                                                   TINY["ops"][1]]}}

    def jobs(**trace):
        return instance_from_dict({"graphs": two, "workload": {"trace": {
            "file": str(path), "format": "elasticflow-raw", "graphs": ["tiny", "tiny2"],
            **trace}}}).jobs

    first, again, other = jobs(seed=1), jobs(seed=1), jobs(seed=2)
    assert first == again and first != other
    assert {j.graph for j in first} == {"tiny", "tiny2"}
    # the default beta is the paper's A: on its 0.01 grid in [0.1, 1]
    betas = np.array([j.max_jct_fraction for j in first])
    assert betas.min() >= 0.1 and betas.max() <= 1 and np.allclose(betas, betas.round(2))
    fixed = jobs(max_jct_fraction=0.4, weights=[0, 1])
    assert {j.graph for j in fixed} == {"tiny2"}
    assert all(j.max_jct_fraction == 0.4 for j in fixed)


def test_requested_degree_is_capped_to_what_the_cluster_gives(tmp_path):
    tiny = graph_from_dict(TINY, "tiny")
    model = JctModel(RampCluster(), ModelSettings(), persist=False)
    assert [requested_degree(model.table(tiny), g) for g in (1, 2, 3, 4, 8, 16, 32, 64)] == \
        [1, 2, 2, 4, 8, 16, 16, 16]
    # the cnn's ops split 16 and 12 ways at degree 16, and 12 has no RAMP shape here
    cnn = model.table(read_graph_file(EXAMPLES_DIR / "cnn.json"))
    assert not cnn.placed[16] and requested_degree(cnn, 16) == 8
    small = JctModel(RampCluster(2, 2, 2), ModelSettings(), persist=False)
    assert requested_degree(small.table(tiny), 64) == 8


def test_an_instance_without_graphs_needs_a_trace():
    with pytest.raises(InputError, match="graphs"):
        instance_from_dict({"workload": {"graphs": ["x"], "num_jobs": 1, "interarrival_ms": 1,
                                         "max_jct_fraction": 0.5}})
    with pytest.raises(InputError, match="workload.trace.format"):
        instance_from_dict({"workload": {"trace": {"file": "x.csv", "format": "philly"}}})


def test_trace_options_are_checked(tmp_path):
    path = generated_csv(tmp_path / "three.csv", THREE)
    with pytest.raises(InputError, match="graphs and weights apply to elasticflow-raw"):
        instance_from_dict(tiny_instance({"file": str(path), "format": "elasticflow",
                                          "graphs": ["tiny"]}))
    with pytest.raises(InputError, match="workload.trace.load"):
        instance_from_dict(tiny_instance({"file": str(path), "format": "elasticflow",
                                          "load": -1}))
    with pytest.raises(InputError, match="start_s.*no job"):
        instance_from_dict(tiny_instance({"file": str(path), "format": "elasticflow",
                                          "start_s": 10_000}))
    one = generated_csv(tmp_path / "one.csv", THREE[:1])
    with pytest.raises(InputError, match="same second"):
        instance_from_dict(tiny_instance({"file": str(one), "format": "elasticflow"}))
    assert len(instance_from_dict(tiny_instance({"file": str(one), "format": "elasticflow",
                                                 "load": None})).jobs) == 1


def test_a_trace_path_is_relative_to_the_instance_file(tmp_path):
    (tmp_path / "traces").mkdir()
    generated_csv(tmp_path / "traces" / "three.csv", THREE)
    path = tmp_path / "instance.json"
    path.write_text(json.dumps(tiny_instance({"file": "traces/three.csv",
                                              "format": "elasticflow"})))
    assert [j.id for j in load_instance(path).jobs] == ["a", "b", "c"]


# ----- traces found by name -----------------------------------------------------------------------
@pytest.fixture
def no_traces(tmp_path, monkeypatch) -> Path:
    """No traces anywhere the finder looks: no PACOPT_TRACES_DIR, an empty cache and home;
    returns the cache folder (``$PACOPT_CACHE_DIR``)."""
    monkeypatch.delenv("PACOPT_TRACES_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PACOPT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def traces_folder(folder: Path) -> Path:
    """A traces folder holding the three jobs as ``generated/three.csv`` and ``raw/three.csv``."""
    (folder / "generated").mkdir(parents=True)
    (folder / "raw").mkdir()
    generated_csv(folder / "generated" / "three.csv", THREE)
    raw_csv(folder / "raw" / "three.csv", [(i, s, t, g) for i, s, _, _, g, t in THREE])
    return folder


def test_the_traces_folder_is_the_variable_then_the_cache(no_traces, tmp_path, monkeypatch):
    with pytest.raises(InputError, match="run `pacopt download-traces` or set PACOPT_TRACES_DIR"):
        find_traces()
    home_cache = traces_folder(tmp_path / "home" / ".cache" / "pacopt" / "traces" / "elasticflow")
    assert find_traces() == home_cache  # downloaded before PACOPT_CACHE_DIR was set
    cache = traces_folder(no_traces / "traces" / "elasticflow")
    assert find_traces() == cache == traces_cache()
    own = traces_folder(tmp_path / "own")
    monkeypatch.setenv("PACOPT_TRACES_DIR", str(own))
    assert find_traces() == own
    assert find_trace("three", "elasticflow-raw") == own / "raw" / "three.csv"
    monkeypatch.setenv("PACOPT_TRACES_DIR", str(tmp_path))  # no generated/ or raw/ in it
    with pytest.raises(InputError, match="PACOPT_TRACES_DIR .* holds no generated/ or raw/"):
        find_traces()


def test_a_trace_file_may_name_a_trace_of_the_folder(no_traces, tmp_path, monkeypatch):
    folder = traces_folder(tmp_path / "own")
    monkeypatch.setenv("PACOPT_TRACES_DIR", str(folder))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    named = instance_from_dict(tiny_instance({"file": "three", "format": "elasticflow",
                                              "load": None}), elsewhere)
    assert [j.id for j in named.jobs] == ["a", "b", "c"]
    raw = instance_from_dict(tiny_instance({"file": "three", "format": "elasticflow-raw",
                                            "graphs": ["tiny"], "load": None}), elsewhere)
    assert [j.id for j in raw.jobs] == ["a", "b", "c"]
    # a file of that name beside the instance is the trace: existing instances keep their meaning
    generated_csv(elsewhere / "three", THREE[:2])
    assert trace_path("three", "elasticflow", elsewhere) == elsewhere / "three"
    # a path is never looked up, a missing name is one line naming what is there
    assert trace_path("gone.csv", "elasticflow", elsewhere) == elsewhere / "gone.csv"
    with pytest.raises(InputError, match=r"no trace 'cluster06' in .*generated \(there: three\); "
                                         r"run `pacopt download-traces cluster06`"):
        instance_from_dict(tiny_instance({"file": "cluster06", "format": "elasticflow"}))
    with pytest.raises(InputError, match="the release has no elasticflow-raw trace '195job'"):
        find_trace("195job", "elasticflow-raw")


def test_a_study_names_its_traces(no_traces, tmp_path, monkeypatch):
    from pacopt.analysis import study_from_dict

    monkeypatch.setenv("PACOPT_TRACES_DIR", str(traces_folder(tmp_path / "own")))
    study = study_from_dict({"name": "t", "grids": [{"name": "named", "trace": {
        "files": ["three"], "models": {"resnet50": "cnn", "bert": "cnn"}, "loads": [None]},
        "methods": ["as-requested"]}]}, tmp_path)
    assert [c.params["trace"] for c in study.cells] == ["three"]
    assert study.cells[0].params["num_jobs"] == 3


def test_the_committed_schema_knows_the_trace_workload():
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text())
    good = {"workload": {"trace": {"file": "t.csv", "format": "elasticflow", "load": None}}}
    jsonschema.validate(good, schema)
    bad = {"workload": {"trace": {"file": "t.csv", "format": "elasticflow", "lod": 1}}}
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)


# ----- bad trace files ----------------------------------------------------------------------------
BAD = [
    ("missing", None, "cannot read trace"),
    ("not CSV (JSON)", '{"jobs": [1, 2]}\n', "not a CSV trace file"),
    ("not CSV (binary)", b"\x00\x01\x02garbage", "not a CSV file"),
    ("empty", "", "empty"),
    ("no column", "job_id,submission_time,num_gpu\na,0,1\n", "column 'duration' is missing"),
    ("negative duration", "job_id,submission_time,duration,num_gpu\na,0,10,1\nb,5,-3,1\n",
     "row 2, field 'duration'"),
    ("zero GPUs", "job_id,submission_time,duration,num_gpu\na,0,10,0\n", "row 1, field 'num_gpu'"),
    ("fractional GPUs", "job_id,submission_time,duration,num_gpu\na,0,10,1.5\n",
     "row 1, field 'num_gpu'"),
    ("unsorted", "job_id,submission_time,duration,num_gpu\na,0,10,1\nb,50,10,1\nc,20,10,1\n",
     "row 3, field 'submission_time'"),
    ("duplicate", "job_id,submission_time,duration,num_gpu\na,0,10,1\nb,5,10,1\na,6,10,1\n",
     "row 3, field 'job_id': 'a' duplicates row 1"),
    ("not a number", "job_id,submission_time,duration,num_gpu\na,zero,10,1\n",
     "row 1, field 'submission_time'"),
    ("short row", "job_id,submission_time,duration,num_gpu\na,0,10\n", "row 1: 3 fields"),
    ("unmapped model", GENERATED_HEADER + "\na,0,1,alexnet,100,64,1,10\n",
     "row 1, field 'model_name': 'alexnet' has no graph mapping"),
    ("deadline before submission", GENERATED_HEADER + "\na,50,1,vgg16,40,64,1,10\n",
     "row 1, field 'deadline'"),
]


@pytest.mark.parametrize("case, content, fragment", BAD, ids=[b[0] for b in BAD])
def test_a_bad_trace_is_one_line_exit_2_and_nothing_written(case, content, fragment, tmp_path,
                                                            capsys):
    path = tmp_path / "trace.csv"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    out = tmp_path / "instance.json"
    fmt = ["--format", "elasticflow"] if "model_name" in str(content) else []
    assert pacopt_main(["trace", str(path), *fmt, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err, err
    assert not out.exists() and list(tmp_path.iterdir()) == ([path] if path.exists() else [])


def test_a_fifo_trace_is_refused_not_waited_on(tmp_path, capsys):
    fifo = tmp_path / "trace.csv"
    os.mkfifo(fifo)  # reading it would block for ever: no writer
    out = tmp_path / "instance.json"
    assert pacopt_main(["trace", str(fifo), "--out", str(out)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert not out.exists()


def test_equal_submission_times_are_real_and_kept(tmp_path):
    # the real traces submit up to ten jobs in the same second (cluster01: 855 such rows)
    rows = read_trace(raw_csv(tmp_path / "t.csv", [("a", 5, 10, 1), ("b", 5, 10, 2)]),
                      "elasticflow-raw")
    assert [r.job_id for r in rows] == ["a", "b"]


def test_pacopt_trace_round_trip(tmp_path, capsys):
    # a raw trace drawing from the bundled cnn graph only needs no downloads
    rows = [(f"j{i}", 7 * i, 100 + i, 1 + 3 * (i % 2)) for i in range(12)]
    path = raw_csv(tmp_path / "raw.csv", rows)
    out = tmp_path / "sub" / "replay.json"
    out.parent.mkdir()
    assert pacopt_main(["trace", str(path), "--cluster", "2x2x2", "--beta", "0.5",
                        "--graphs", "cnn", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "12 jobs" in text and "load" in text and "elasticflow-raw" in text
    data = json.loads(out.read_text())
    assert data["workload"]["trace"]["file"] == "../raw.csv"  # relative to the instance
    assert data["cluster"]["communication_groups"] == 2
    instance = load_instance(out)
    assert len(instance.jobs) == 12 and all(j.max_jct_fraction == 0.5 for j in instance.jobs)


# ----- the trace policies -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    """The tiny graph on the 4 x 4 x 2 cluster: it splits and places at every buddy level."""
    model = JctModel(RampCluster(), ModelSettings(), persist=False)
    graph = graph_from_dict(TINY, "tiny")
    return model, graph, model.table(graph)


def decision(tiny, beta, busy=(), requested=None):
    model, graph, table = tiny
    state = ClusterState(model.cluster)
    for i, server in enumerate(busy):
        state.mount(1000 + i, 1 << server, (server,), 1e9)
    return Decision(job_index=0, job_id="j", graph=graph, max_jct_fraction=beta,
                    deadline_ms=beta * table.seq_jct_ms, table=table, state=state, model=model,
                    requested_degree=requested)


def test_elasticflow_admits_the_minimum_share_then_gives_spare_workers(tiny):
    _, _, table = tiny
    assert buddy_levels(16) == (1, 2, 4, 8, 16)
    empty = decision(tiny, 0.3)
    share = elasticflow_degree(empty, spare=False)
    # the smallest power of two whose JCT meets the deadline
    assert share == next(d for d in (1, 2, 4, 8, 16) if table.jct_ms[d] <= 0.3 * table.seq_jct_ms)
    assert share == 4
    # every idle worker can go to the arriving job only: it climbs while the JCT shortens
    assert ElasticFlow().choose(empty) == 16
    # with 20 busy servers only 8 remain in one block: it stops at the largest level that fits
    busy = decision(tiny, 0.3, busy=range(20))
    assert elasticflow_degree(busy) == max(d for d in (4, 8) if busy.placeable(d))
    # admission control: the share does not fit alongside the running jobs, or none is fast enough
    assert elasticflow_degree(decision(tiny, 0.3, busy=range(30))) == 0
    assert elasticflow_degree(decision(tiny, 0.01)) == 0


def test_as_requested_plays_the_requested_degree(tiny):
    assert make_trace_policy("as-requested").choose(decision(tiny, 0.5, requested=8)) == 8
    with pytest.raises(InputError, match="requested_degree"):
        make_trace_policy("as-requested").choose(decision(tiny, 0.5))
    instance = instance_from_dict({"graphs": {"tiny": TINY}, "jobs": [
        {"id": "j", "graph": "tiny", "arrival_ms": 0, "max_jct_fraction": 0.5}]})
    with pytest.raises(InputError, match="no requested_degree"):
        solve(instance, "as-requested")


def test_trace_policies_never_read_later_jobs(tmp_path):
    rows = [(f"j{i}", 13 * i, 40 + 7 * (i % 5), (1, 2, 4, 8)[i % 4]) for i in range(60)]
    full = raw_csv(tmp_path / "full.csv", rows)
    # the same first 30 jobs, then different ones
    changed = raw_csv(tmp_path / "changed.csv",
                      rows[:30] + [(f"k{i}", 13 * (30 + i), 500, 16) for i in range(30)])

    def run(path, method):
        instance = instance_from_dict(tiny_instance({"file": str(path),
                                                     "format": "elasticflow-raw",
                                                     "graphs": ["tiny"], "load": None,
                                                     "max_jct_fraction": 0.3}))
        return solve(instance, method, seed=0)

    for method in ("as-requested", "elasticflow"):
        a, b = run(full, method), run(changed, method)
        assert a.validated and b.validated
        assert [(j.degree, j.accepted) for j in a.jobs[:30]] == \
            [(j.degree, j.accepted) for j in b.jobs[:30]]


def test_same_trace_and_seed_give_the_same_result(tmp_path):
    rows = [(f"j{i}", 11 * i, 60 + 13 * (i % 7), (1, 2, 4, 8)[i % 4]) for i in range(50)]
    path = raw_csv(tmp_path / "t.csv", rows)
    data = tiny_instance({"file": str(path), "format": "elasticflow-raw", "graphs": ["tiny"],
                          "seed": 3})
    for method in ("random", "elasticflow", "as-requested", "min-feasible"):
        one = solve(instance_from_dict(data), method, seed=5).to_dict()
        two = solve(instance_from_dict(data), method, seed=5).to_dict()
        for result in (one, two):
            result.pop("solve_seconds")
        assert one == two, method


def test_exact_methods_use_each_jobs_own_work(tmp_path):
    rows = [(f"j{i}", 20 * i, 30 + 25 * (i % 3), (1, 2, 4)[i % 3]) for i in range(8)]
    path = raw_csv(tmp_path / "t.csv", rows)
    instance = instance_from_dict({**tiny_instance({
        "file": str(path), "format": "elasticflow-raw", "graphs": ["tiny"],
        "max_jct_fraction": 0.6, "load": 0.8}),
        "cluster": {"communication_groups": 2, "racks_per_group": 2, "servers_per_rack": 1}})
    online = solve(instance, "min-feasible", seed=0)
    exact = solve(instance, "cpsat", time_limit=20, threads=1, seed=0)
    assert online.validated and exact.validated and exact.accepted >= online.accepted
    model = JctModel(instance.cluster, instance.model, persist=False)
    for job, record in zip(instance.jobs, exact.jobs):
        if record.accepted:  # its JCT is its graph's at that degree times its own work
            table = model.job_table(instance.graphs["tiny"], instance.work_scale(job))
            assert record.jct_ms == pytest.approx(table.jct_ms[record.degree], rel=1e-9)


# ----- the graphs pacopt profiles for the traces --------------------------------------------------
@pytest.mark.parametrize("name, params_m", [("bert", 109.48), ("gpt2", 124.44),
                                            ("deepspeech2", 86.62)])
def test_bundled_trace_graphs_have_their_published_sizes(name, params_m):
    graph = read_graph_file(EXAMPLES_DIR / f"{name}.json")
    assert sum(op.parameter_bytes for op in graph.ops) / 4e6 == pytest.approx(params_m, abs=0.01)
    assert 100 <= graph.step_ms <= 1000 and graph.join == graph.num_ops - 1


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "gpt2", "deepspeech2"])
def test_bundled_trace_graphs_are_current(name):
    from pacopt.model.zoo import profile_zoo_model

    assert read_graph_file(EXAMPLES_DIR / f"{name}.json") == profile_zoo_model(name), \
        "stale: rerun examples/make_graphs.py"


# ----- the real traces ----------------------------------------------------------------------------
def test_default_replay_of_a_real_cluster(traces_env):
    path = traces_env / "generated" / "cluster01.csv"
    instance = instance_from_dict({"workload": {"trace": {"file": str(path),
                                                          "format": "elasticflow"}}})
    assert len(instance.jobs) == 1001
    assert set(instance.graphs) == {"vgg16", "resnet50", "inception_v3", "bert", "gpt2",
                                    "deepspeech2"}
    rows = read_trace(path, "elasticflow")[:1001]
    model = JctModel(instance.cluster, instance.model, persist=False)
    for job, row in list(zip(instance.jobs, rows))[::50]:
        table = model.job_table(instance.graphs[job.graph], instance.work_scale(job))
        assert table.jct_ms[job.requested_degree] == pytest.approx(row.duration_s, rel=1e-9)
        assert instance.deadline_ms(job) == pytest.approx(row.deadline_s - row.submission_s,
                                                          rel=1e-9)
    results = {m: solve(instance, m, seed=0) for m in ("as-requested", "elasticflow",
                                                      "min-feasible")}
    assert all(r.validated and r.arrived == 1001 for r in results.values())
    # the defaults give a load where the methods differ (docs/traces.md)
    blocking = sorted(r.blocking_rate for r in results.values())
    assert blocking[-1] - blocking[0] > 0.05


def test_a_real_cluster_is_found_by_name(trace_dir):
    for fmt, sub in (("elasticflow", "generated"), ("elasticflow-raw", "raw")):
        assert trace_path("cluster07", fmt) == trace_dir / sub / "cluster07.csv"


def test_raw_and_generated_files_are_the_same_jobs(traces_env):
    raw = read_trace(traces_env / "raw" / "cluster05.csv", "elasticflow-raw")
    generated = read_trace(traces_env / "generated" / "cluster05.csv", "elasticflow")
    assert [(r.job_id, r.submission_s, r.duration_s, r.num_gpu) for r in raw] == \
        [(r.job_id, r.submission_s, r.duration_s, r.num_gpu) for r in generated]


def test_busiest_window_of_a_real_cluster(traces_env, tmp_path, capsys):
    path = traces_env / "raw" / "cluster09.csv"
    out = tmp_path / "busy.json"
    assert pacopt_main(["trace", str(path), "--busiest", "--num-jobs", "200", "--json",
                        "--out", str(out)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["jobs"] == 200 and stats["window"] == "busiest"
    assert stats["load"] == pytest.approx(DEFAULT_LOAD)
    assert stats["beta_source"] == "distribution"
    assert set(stats["graphs"]) <= set(RAW_GRAPHS)
    assert solve_main([str(out), "--method", "elasticflow", "--quiet"]) == 0


def test_pacopt_trace_takes_a_traces_name(traces_env, tmp_path, monkeypatch):
    """``pacopt trace cluster04``: the name is found in the traces folder and kept as the name
    in the instance, which then replays wherever the traces are."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "c04.json"
    assert pacopt_main(["trace", "cluster04", "--num-jobs", "50", "--out", str(out)]) == 0
    trace = json.loads(out.read_text())["workload"]["trace"]
    assert trace["file"] == "cluster04" and trace["format"] == "elasticflow"
    assert solve_main([str(out), "--method", "min-feasible", "--quiet"]) == 0


@pytest.mark.slow
def test_a_15000_job_cluster_converts_and_replays_in_under_30_s(traces_env, tmp_path):
    path = traces_env / "generated" / "cluster04.csv"
    out = tmp_path / "c04.json"
    started = time.perf_counter()
    assert pacopt_main(["trace", str(path), "--num-jobs", "all", "--out", str(out)]) == 0
    assert solve_main([str(out), "--method", "min-feasible", "--quiet"]) == 0
    seconds = time.perf_counter() - started
    result = json.loads(out.with_name("c04.min-feasible.result.json").read_text())
    assert result["arrived"] == 15802 and result["validated"]
    assert seconds < 30, f"{seconds:.1f} s"


def test_a_trace_study(tmp_path):
    from pacopt.analysis import run_study, study_from_dict

    rows = [(f"j{i}", 9 * i, 40 + 5 * (i % 4), (1, 2, 4)[i % 3]) for i in range(30)]
    raw_csv(tmp_path / "t.csv", rows)
    study = study_from_dict({"name": "t", "grids": [{"name": "replay", "trace": {
        "files": ["t.csv"], "format": "elasticflow-raw", "graphs": ["cnn"],
        "windows": [{"num_jobs": 20}, {"window": "busiest", "num_jobs": 10}],
        "loads": [0.5, None], "cluster": {"communication_groups": 2, "racks_per_group": 2,
                                         "servers_per_rack": 2}},
        "methods": ["as-requested", "elasticflow"]}]}, tmp_path)
    assert len(study.cells) == 8
    table = run_study(study, tmp_path / "out", workers=1, progress=False)
    assert len(table) == 8 and table["validated"].all()
    assert set(table["window"]) == {"first20", "busiest10"} and set(table["num_jobs"]) == {20, 10}
    assert (tmp_path / "out" / "replay-blocking.png").exists()
    with pytest.raises(InputError, match="start_s applies to window 'first' only"):
        study_from_dict({"name": "t", "grids": [{"trace": {
            "files": ["t.csv"], "format": "elasticflow-raw", "graphs": ["cnn"],
            "windows": [{"window": "busiest", "start_s": 5}]}, "methods": ["as-requested"]}]},
            tmp_path)
