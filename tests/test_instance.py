"""Instances: reading, defaults, deadlines, path resolution, error messages, schema, freezing."""

import copy
import json
import shutil

import jsonschema
import pytest
from offline_cases import TINY

from pacopt.infra.errors import InputError
from pacopt.model.instance import (
    SCHEMA_PATH,
    Instance,
    JobSpec,
    instance_from_dict,
    instance_json_schema,
    load_instance,
)
from pacopt.model.settings import ModelSettings
from pacopt.model.topology import RampCluster

# The inline-graph example of docs/formats.md: one step = 1 + 2 + 0.5 + 1 = 4.5 ms, so 225 ms in 50 steps.
TINY_SEQ_JCT = 225.0
ALEXNET_SEQ_JCT = 36061.15  # the paper digest's table (6.2), 50 steps

GOOD = {"graphs": {"tiny": TINY},
        "jobs": [{"id": "j0", "graph": "tiny", "arrival_ms": 10, "max_jct_fraction": 0.5},
                 {"id": "j1", "graph": "tiny", "arrival_ms": 0, "max_jct_fraction": 1}]}


def write_json(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def full_instance(tmp_path, pipedream_dir):
    """An instance file using all three graph forms (relative paths) plus explicit and generated
    jobs, with its graphs in a sub-folder."""
    write_json(tmp_path / "graphs" / "tiny.json", TINY)
    shutil.copy(pipedream_dir / "alexnet.txt", tmp_path / "graphs" / "alexnet.txt")
    return write_json(tmp_path / "instance.json", {
        "graphs": {"alexnet": {"pipedream": "graphs/alexnet.txt"},
                   "tiny_file": {"file": "graphs/tiny.json"},
                   "tiny": TINY},
        "jobs": [{"id": "late", "graph": "alexnet", "arrival_ms": 2500, "max_jct_fraction": 0.45},
                 {"id": "first", "graph": "tiny_file", "arrival_ms": 0, "max_jct_fraction": 0.2},
                 {"id": "second", "graph": "tiny", "arrival_ms": 0, "max_jct_fraction": 1}],
        "workload": {"graphs": ["alexnet", "tiny"], "num_jobs": 4, "interarrival_ms": 1000,
                     "max_jct_fraction": {"paper": "C"}, "seed": 3},
        "horizon_ms": 1e6,
    })


def expect_error(data, *fragments, base_dir="."):
    with pytest.raises(InputError) as info:
        instance_from_dict(data, base_dir)
    for fragment in fragments:
        assert fragment in str(info.value)
    return str(info.value)


def mutated(change):
    data = copy.deepcopy(GOOD)
    change(data)
    return data


# ----- good instances ----------------------------------------------------------------------------
def test_full_instance_defaults_deadlines_and_order(full_instance):
    inst = load_instance(full_instance)
    assert inst.cluster == RampCluster() and inst.cluster.num_servers == 32
    assert inst.cluster.channel_bandwidth == 4e11
    assert inst.model == ModelSettings() and inst.model.training_steps == 50
    assert inst.horizon_ms == 1e6 and inst.source == str(full_instance)
    assert inst.graphs["alexnet"].num_ops == 23
    # Explicit jobs come before generated ones at equal arrival times (stable sort).
    assert [j.id for j in inst.jobs] == ["first", "second", "w0", "w1", "w2", "late", "w3"]
    assert [j.arrival_ms for j in inst.jobs] == [0, 0, 0, 1000, 2000, 2500, 3000]
    by_id = {j.id: j for j in inst.jobs}
    assert inst.deadline_ms(by_id["late"]) == pytest.approx(0.45 * ALEXNET_SEQ_JCT)
    assert inst.deadline_ms(by_id["first"]) == pytest.approx(0.2 * TINY_SEQ_JCT)
    assert inst.deadline_ms(by_id["second"]) == pytest.approx(TINY_SEQ_JCT)
    assert inst.graphs["tiny_file"].fingerprint == inst.graphs["tiny"].fingerprint


def test_cluster_and_model_fields_override_defaults():
    inst = instance_from_dict({**GOOD, "cluster": {"communication_groups": 2, "racks_per_group": 2},
                               "model": {"preset": "physical", "training_steps": 10}})
    assert inst.cluster.num_servers == 8 and inst.cluster.channels == 1
    assert inst.model.preset == "physical" and inst.model.quantum_ms == 0.01
    assert inst.deadline_ms(inst.jobs[0]) == pytest.approx(45.0)


def test_jobs_sorted_on_construction_too():
    jobs = [JobSpec("b", "tiny", 5.0, 0.5), JobSpec("a", "tiny", 1.0, 0.5), JobSpec("c", "tiny", 5.0, 1)]
    inst = Instance(RampCluster(), ModelSettings(), {}, jobs)
    assert [j.id for j in inst.jobs] == ["a", "b", "c"]


def test_relative_paths_resolve_against_the_instance_folder(full_instance, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_instance(full_instance).graphs["alexnet"].num_ops == 23
    data = json.loads(full_instance.read_text())
    assert instance_from_dict(data, full_instance.parent).graphs["tiny_file"].num_ops == 2
    expect_error(data, "graphs.alexnet", "alexnet.txt", base_dir=elsewhere)


def test_bare_pipedream_name_is_looked_up(pipedream_env, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    data = {**GOOD, "graphs": {"tiny": TINY, "alexnet": {"pipedream": "alexnet"}}}
    alexnet = instance_from_dict(data).graphs["alexnet"]
    assert alexnet.seq_jct_ms(50) == pytest.approx(ALEXNET_SEQ_JCT)
    monkeypatch.delenv("PACOPT_PIPEDREAM_DIR")
    cache = tmp_path / ".cache" / "pacopt" / "pipedream"
    cache.mkdir(parents=True)
    expect_error(data, "graphs.alexnet", "not found", "pacopt download-pipedream")
    shutil.copy(pipedream_env / "alexnet.txt", cache / "alexnet.txt")
    assert instance_from_dict(data).graphs["alexnet"].num_ops == 23


def test_freezing_a_generated_workload_round_trips(full_instance):
    inst = load_instance(full_instance)
    frozen = inst.to_dict()
    assert "workload" not in frozen and len(frozen["jobs"]) == 7
    assert all("ops" in graph for graph in frozen["graphs"].values())
    again = instance_from_dict(json.loads(json.dumps(frozen)))
    assert again.jobs == inst.jobs and again.horizon_ms == inst.horizon_ms
    assert again.cluster == inst.cluster and again.model == inst.model
    assert {n: g.fingerprint for n, g in again.graphs.items()} == \
        {n: g.fingerprint for n, g in inst.graphs.items()}
    assert again.graphs["alexnet"].join == inst.graphs["alexnet"].join


# ----- bad instances -----------------------------------------------------------------------------
@pytest.mark.parametrize("change, fragments", [
    (lambda d: d["jobs"][1].pop("graph"), ["jobs[1].graph", "required"]),
    (lambda d: d.pop("graphs"), ["graphs", "required"]),
    (lambda d: d["jobs"][0].update(arrival_ms="soon"),
     ["jobs[0].arrival_ms", "valid number", '"soon"']),
    (lambda d: d["jobs"][0].update(id=7), ["jobs[0].id", "valid string"]),
    (lambda d: d.update(cluster={"channels": 1.5}), ["cluster.channels", "valid integer"]),
    (lambda d: d.update(model={"preset": "fast"}), ["model.preset", "'ddls' or 'physical'"]),
    (lambda d: d["jobs"][1].update(graph="vgg16"), ["jobs[1].graph", "unknown graph 'vgg16'"]),
    (lambda d: d.update(workload={"graphs": ["tiny", "vgg16"], "num_jobs": 2, "interarrival_ms": 1,
                                  "max_jct_fraction": 0.5}),
     ["workload.graphs[1]", "unknown graph 'vgg16'"]),
    (lambda d: d["jobs"][0].update(arrival_ms=-1),
     ["jobs[0].arrival_ms", "greater than or equal to 0", "-1"]),
    (lambda d: d["graphs"]["tiny"]["ops"][1].update(backward_ms=-2.5),
     ["graphs.tiny.ops[1].backward_ms", "greater than or equal to 0", "-2.5"]),
    (lambda d: d["jobs"][1].update(max_jct_fraction=0), ["jobs[1].max_jct_fraction", "greater than 0"]),
    (lambda d: d["jobs"][1].update(max_jct_fraction=1.5),
     ["jobs[1].max_jct_fraction", "less than or equal to 1", "1.5"]),
    (lambda d: d.update(horizon=5), ["horizon", "unknown field", "did you mean 'horizon_ms'"]),
    (lambda d: d["jobs"][0].update(arival_ms=5), ["jobs[0].arival_ms", "unknown field"]),
    (lambda d: d.update(horizon_ms=0), ["horizon_ms", "greater than 0"]),
    (lambda d: d.pop("jobs"), ["'jobs'", "'workload'"]),
    (lambda d: d["jobs"][1].update(id="j0"), ["jobs[1].id", "'j0'", "jobs[0]"]),
    (lambda d: d.update(cluster={"racks_per_group": 8}), ["cluster.racks_per_group"]),
    (lambda d: d["graphs"].update(bad={"pipedrem": "x.txt"}), ["graphs.bad", '{"pipedream": path}']),
    (lambda d: d["graphs"]["tiny"]["deps"].append(["b", "zz"]), ["graphs.tiny", "unknown op 'zz'"]),
    (lambda d: d["graphs"]["tiny"]["deps"].append(["b"]), ["graphs.tiny.deps[1]", "at least 2"]),
])
def test_bad_instance_names_the_field(change, fragments):
    expect_error(mutated(change), *fragments)


def test_generated_id_clashing_with_an_explicit_one():
    data = mutated(lambda d: d["jobs"][1].update(id="w0"))
    data["workload"] = {"graphs": ["tiny"], "num_jobs": 2, "interarrival_ms": 1, "max_jct_fraction": 1}
    expect_error(data, "workload", "'w0'", "jobs[1]")


def test_cyclic_graph():
    cyclic = copy.deepcopy(TINY)
    cyclic["ops"].append({**TINY["ops"][0], "id": "sink"})
    cyclic["deps"].append(["b", "a"])
    expect_error({**GOOD, "graphs": {"tiny": cyclic}}, "graphs.tiny", "cycle")


def test_cyclic_graph_without_a_sink():
    expect_error(mutated(lambda d: d["graphs"]["tiny"]["deps"].append(["b", "a"])), "cycle")


def test_not_an_object():
    expect_error([GOOD], "instance", "must be an object")


def test_malformed_json(tmp_path):
    path = tmp_path / "instance.json"
    path.write_text('{"graphs": {"tiny": {}},\n "jobs": [,]}')
    with pytest.raises(InputError, match=r"not valid JSON: .* line 2, column 11"):
        load_instance(path)


def test_missing_instance_file(tmp_path):
    with pytest.raises(InputError, match="cannot read .*nope.json.*No such file"):
        load_instance(tmp_path / "nope.json")


def test_graph_files_missing_or_bad(tmp_path):
    data = {**GOOD, "graphs": {"tiny": {"file": "tiny.json"}}}
    expect_error(data, "graphs.tiny", "tiny.json", "No such file", base_dir=tmp_path)
    write_json(tmp_path / "tiny.json", {**TINY, "ops": [{**TINY["ops"][0], "forward_ms": -1}]})
    expect_error(data, "graphs.tiny", "tiny.json", "ops[0].forward_ms", "-1", base_dir=tmp_path)
    (tmp_path / "tiny.json").write_text("{")
    expect_error(data, "graphs.tiny", "not valid JSON", base_dir=tmp_path)
    expect_error({**GOOD, "graphs": {"tiny": {"pipedream": "missing.txt"}}}, "graphs.tiny",
                 "missing.txt", base_dir=tmp_path)


# ----- schema ------------------------------------------------------------------------------------
def test_committed_schema_is_current():
    assert json.loads(SCHEMA_PATH.read_text()) == instance_json_schema(), \
        "regenerate with: python -m pacopt.model.instance"


@pytest.fixture
def validator():
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_schema_validates_good_and_rejects_bad_instances(validator):
    validator.validate(GOOD)
    validator.validate(instance_from_dict(GOOD).to_dict())
    assert not validator.is_valid({**GOOD, "horizon": 5})
    assert not validator.is_valid(mutated(lambda d: d["jobs"][1].update(max_jct_fraction=1.5)))
    assert not validator.is_valid(mutated(lambda d: d["graphs"].update(bad={"pipedrem": "x"})))


def test_schema_validates_the_full_instance(validator, full_instance):
    validator.validate(json.loads(full_instance.read_text()))
    validator.validate(load_instance(full_instance).to_dict())
