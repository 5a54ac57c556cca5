"""The ``solve`` and ``pacopt`` commands: results, exit codes and one-line errors."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pacopt.cli import pacopt_main, solve_main
from pacopt.model.instance import load_instance
from pacopt.model.solution import Solution
from pacopt.online.policies import HEURISTICS
from pacopt.solvers import api
from pacopt.solvers.registry import Method
from pacopt.solvers.validate import find_problems

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BUNDLED = str(EXAMPLES / "bundled.json")
CNN = str(EXAMPLES / "graphs" / "cnn.json")

#: the result format (docs/formats.md).
SUMMARY_KEYS = {"instance", "method", "preset", "status", "accepted", "arrived", "blocking_rate",
                "bound_accepted", "gap", "solve_seconds", "validated", "jobs"}
JOB_KEYS = {"id", "accepted", "degree", "workers", "start_ms", "jct_ms", "deadline_ms", "reason"}
PROFILE_KEYS = {"degree", "placed", "workers", "jct_ms", "seq_jct_ms", "comm_overhead_ms"}


def small_instance(path: Path, **changes) -> Path:
    """A three-job cnn instance (quick to solve) written to ``path``."""
    data = {"graphs": {"cnn": {"file": CNN}},
            "jobs": [{"id": f"j{i}", "graph": "cnn", "arrival_ms": 100 * i,
                      "max_jct_fraction": beta} for i, beta in enumerate((0.5, 0.3, 0.05))]}
    data.update(changes)
    path.write_text(json.dumps(data))
    return path


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def bundled_result(tmp_path_factory):
    """``solve examples/bundled.json --out .../r.json`` run once; (exit code, result path)."""
    out = tmp_path_factory.mktemp("solve") / "r.json"
    code = solve_main([BUNDLED, "--out", str(out), "--quiet"])
    return code, out


# ----- solve ---------------------------------------------------------------------------------------
def test_solve_bundled_writes_a_valid_result(bundled_result):
    code, out = bundled_result
    assert code == 0
    data = json.loads(out.read_text())
    assert SUMMARY_KEYS <= data.keys()
    assert data["instance"] == BUNDLED and data["method"] == api.DEFAULT_METHOD
    assert data["preset"] == "ddls" and data["status"] == "heuristic" and data["validated"] is True
    assert data["arrived"] == len(data["jobs"]) == 300  # the bundled workload's num_jobs
    blocked = [job for job in data["jobs"] if not job["accepted"]]
    assert data["accepted"] + len(blocked) == data["arrived"]
    assert 0 < data["accepted"] < data["arrived"]
    assert data["blocking_rate"] == pytest.approx(len(blocked) / data["arrived"])
    for job in data["jobs"]:
        assert JOB_KEYS <= job.keys()
        assert (job["reason"] is None) == job["accepted"]
        if job["accepted"]:
            assert job["degree"] >= 1 and job["workers"] and job["jct_ms"] <= job["deadline_ms"]
    assert all(job["reason"] in ("rejected", "no_placement", "deadline", "horizon")
               for job in blocked)
    # The file is a result the validator accepts on its own.
    assert find_problems(load_instance(BUNDLED), Solution.load(out)) == []


def test_solve_json_prints_the_result(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert solve_main([BUNDLED, "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == json.loads(out.read_text())
    assert "accepted / arrived" in captured.err  # the summary moves to stderr


def test_solve_summary_and_default_output_path(tmp_path, capsys):
    instance = small_instance(tmp_path / "small.json")
    assert solve_main([str(instance)]) == 0
    out = tmp_path / "small.min-feasible.result.json"
    assert json.loads(out.read_text())["arrived"] == 3
    summary = capsys.readouterr().out
    assert "accepted / arrived" in summary and str(out) in summary


@pytest.mark.parametrize("method", sorted(HEURISTICS))
def test_each_online_method(method, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert solve_main([BUNDLED, "--method", method, "--seed", "1", "--out", str(out),
                       "--quiet"]) == 0
    assert capsys.readouterr().out == ""  # --quiet
    data = json.loads(out.read_text())
    assert data["method"] == method and data["validated"] is True
    assert data["status"] == "heuristic" and data["arrived"] == 300
    assert data["accepted"] + sum(not job["accepted"] for job in data["jobs"]) == data["arrived"]


@pytest.mark.parametrize("method", ["bound", "cpsat", "milp"])
def test_exact_methods_report_a_bound_and_print_progress(method, tmp_path, capsys):
    data = json.loads(Path(BUNDLED).read_text())
    data["graphs"] = {name: {"file": str(Path(BUNDLED).parent / entry["file"])}
                      for name, entry in data["graphs"].items()}
    data["workload"]["num_jobs"] = 40
    instance = tmp_path / "small.json"
    instance.write_text(json.dumps(data))
    out = tmp_path / "r.json"
    assert solve_main([str(instance), "--method", method, "--time-limit", "10", "--threads", "2",
                       "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "incumbent" in captured.err and "bound on accepted" in captured.out
    data = json.loads(out.read_text())
    assert data["validated"] is True and data["status"] in ("optimal", "feasible")
    assert data["bound_accepted"] >= data["accepted"] >= data["metrics"]["warm_start_accepted"]
    assert data["gap"] == pytest.approx((data["bound_accepted"] - data["accepted"])
                                        / data["bound_accepted"])


def test_seed_makes_random_reproducible(tmp_path):
    def run(seed, name):
        out = tmp_path / name
        assert solve_main([BUNDLED, "--method", "random", "--seed", str(seed), "--out", str(out),
                           "--quiet"]) == 0
        data = json.loads(out.read_text())
        assert data["seed"] == seed
        return [(job["degree"], job["accepted"], job["workers"]) for job in data["jobs"]]

    first = run(3, "a.json")
    assert run(3, "b.json") == first
    assert run(4, "c.json") != first


def test_failed_validation_exits_1(tmp_path, monkeypatch):
    real = api.simulate

    def corrupted(*args, **kwargs):
        solution = real(*args, **kwargs)
        accepted = next(job for job in solution.jobs if job.accepted)
        accepted.jct_ms *= 2
        return solution

    monkeypatch.setattr(api, "simulate", corrupted)
    out = tmp_path / "r.json"
    assert solve_main([str(small_instance(tmp_path / "i.json")), "--out", str(out),
                       "--quiet"]) == 1
    data = json.loads(out.read_text())
    assert data["validated"] is False and data["status"] == "error"
    assert any("reported JCT" in p for p in data["metrics"]["validation_problems"])


def _bad_cases(tmp: Path) -> dict[str, tuple[list[str], str]]:
    (tmp / "invalid.json").write_text('{"graphs": {')
    return {
        "missing file": ([str(tmp / "nothere.json")], "nothere.json"),
        "invalid json": ([str(tmp / "invalid.json")], "is not valid JSON"),
        "field error": ([str(small_instance(tmp / "beta.json", jobs=[
            {"id": "j0", "graph": "cnn", "arrival_ms": 0, "max_jct_fraction": 1.5}]))],
            "jobs[0].max_jct_fraction"),
        "unknown graph": ([str(small_instance(tmp / "graph.json", jobs=[
            {"id": "j0", "graph": "nosuch", "arrival_ms": 0, "max_jct_fraction": 0.5}]))],
            "unknown graph 'nosuch'"),
        "unknown method": ([BUNDLED, "--method", "nosuch"], "unknown method 'nosuch'"),
        "unknown flag": ([BUNDLED, "--bogus"], "unrecognized arguments: --bogus"),
        "bad seed": ([BUNDLED, "--seed", "x"], "--seed"),
        "bad time limit": ([BUNDLED, "--time-limit", "0"], "--time-limit must be a finite number of seconds > 0"),
        "no instance": ([], "instance"),
    }


@pytest.mark.parametrize("case", ["missing file", "invalid json", "field error", "unknown graph",
                                  "unknown method", "unknown flag", "bad seed", "bad time limit",
                                  "no instance"])
def test_bad_input_exits_2_with_one_line(case, tmp_path, capsys):
    argv, fragment = _bad_cases(tmp_path)[case]
    before = set(tmp_path.iterdir())
    out = tmp_path / "r.json"
    assert solve_main(argv + ["--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert fragment in one_error_line(captured.err)
    assert captured.out == ""
    assert set(tmp_path.iterdir()) == before  # no result file, no temporary file


@pytest.mark.parametrize("instance, fragment", [(".", "is a folder"), ("./", "is a folder"),
                                                ("/", "is a folder"),
                                                ("/dev/null", "not a regular file")])
def test_a_folder_or_device_as_instance_is_one_line(instance, fragment, tmp_path, capsys,
                                                    monkeypatch):
    """The default result name is made from the instance's: a folder has none (a traceback and
    exit 1 once); it is one line and exit 2, before any work."""
    monkeypatch.chdir(tmp_path)
    assert solve_main([instance]) == 2
    assert fragment in one_error_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


def test_json_error_says_at_once(tmp_path, capsys):
    """json's message "Invalid control character at" is not followed by a second "at"."""
    bad = tmp_path / "i.json"
    bad.write_text('{"a": "x\ty"}')
    assert solve_main([str(bad)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "Invalid control character at line 1" in line and "at at" not in line


def test_field_error_names_beta_field(tmp_path, capsys):
    instance = small_instance(tmp_path / "beta.json", jobs=[
        {"id": "j0", "graph": "cnn", "arrival_ms": 0, "max_jct_fraction": 1.5}])
    assert solve_main([str(instance)]) == 2  # default output path beside the instance
    line = one_error_line(capsys.readouterr().err)
    assert "max_jct_fraction" in line and "1.5" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["beta.json"]


# ----- pacopt ----------------------------------------------------------------------------------------
def test_profile_pipedream_json(pipedream_dir, capsys):
    assert pacopt_main(["profile", str(pipedream_dir / "alexnet.txt"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list) and len(rows) == 16
    assert all(set(row) == PROFILE_KEYS for row in rows)
    assert [row["degree"] for row in rows] == list(range(1, 17))
    last = rows[-1]
    assert last["placed"] is True and last["workers"] == 16
    assert rows[0]["jct_ms"] == pytest.approx(rows[0]["seq_jct_ms"])  # degree 1: sequential
    assert last["jct_ms"] < rows[0]["jct_ms"]


def test_profile_bundled_example_prints_a_table(capsys):
    assert pacopt_main(["profile", "cnn"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("cnn: 23 forward ops")
    assert lines[1].split() == ["degree", "placed", "workers", "jct_ms", "speed-up", "comm_ms"]
    rows = [line.split() for line in lines[2:]]
    assert [int(row[0]) for row in rows] == list(range(1, 17))
    assert rows[0][1:3] == ["yes", "1"] and rows[0][4] == "1.00"


def test_profile_unknown_graph_exits_2(capsys):
    assert pacopt_main(["profile", "nosuchgraph"]) == 2
    captured = capsys.readouterr()
    assert "no graph 'nosuchgraph'" in one_error_line(captured.err) and captured.out == ""


def test_validate_good_and_corrupted_results(bundled_result, tmp_path, capsys):
    _, out = bundled_result
    assert pacopt_main(["validate", BUNDLED, str(out)]) == 0
    assert capsys.readouterr().out.strip() == "valid"
    data = json.loads(out.read_text())
    job = next(job for job in data["jobs"] if job["accepted"])
    job["jct_ms"] += 1.0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert pacopt_main(["validate", BUNDLED, str(bad)]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "INVALID: 1 problem(s)"
    assert lines[0].startswith(f"job '{job['id']}': reported JCT")


@pytest.mark.parametrize("content", ["[1]", '{"method": "x"}', "not json",
                                     "MALFORMED_JOB", "STRING_DEGREE"])
def test_validate_malformed_result_exits_2(bundled_result, content, tmp_path, capsys):
    _, out = bundled_result
    if content == "MALFORMED_JOB":
        data = json.loads(out.read_text())
        data["jobs"][0] = 1
        content = json.dumps(data)
    elif content == "STRING_DEGREE":
        data = json.loads(out.read_text())
        next(job for job in data["jobs"] if job["accepted"])["degree"] = "2"
        content = json.dumps(data)
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert pacopt_main(["validate", BUNDLED, str(bad)]) == 2
    captured = capsys.readouterr()
    one_error_line(captured.err)
    assert captured.out == ""


def test_validate_missing_result_exits_2(capsys):
    assert pacopt_main(["validate", BUNDLED, "/nonexistent/r.json"]) == 2
    assert "/nonexistent/r.json" in one_error_line(capsys.readouterr().err)


def test_schema(capsys):
    assert pacopt_main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"graphs", "jobs", "workload", "horizon_ms"} <= schema["properties"].keys()


@pytest.mark.parametrize("argv, fragment", [([], "command"), (["frobnicate"], "frobnicate"),
                                            (["profile", "cnn", "--bogus"], "--bogus")])
def test_pacopt_bad_arguments_exit_2(argv, fragment, capsys):
    assert pacopt_main(argv) == 2
    assert fragment in one_error_line(capsys.readouterr().err)


# ----- real processes ------------------------------------------------------------------------------
def test_pacopt_module_in_a_subprocess(bundled_result):
    _, out = bundled_result
    run = [sys.executable, "-m", "pacopt.cli"]
    good = subprocess.run(run + ["validate", BUNDLED, str(out)], capture_output=True, text=True,
                          timeout=120)
    assert good.returncode == 0 and good.stdout.strip() == "valid", good.stderr
    bad = subprocess.run(run + ["profile", "nosuchgraph"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert "nosuchgraph" in one_error_line(bad.stderr)


def test_solve_console_script(tmp_path):
    script = shutil.which("solve")
    if script is None:
        pytest.skip("the 'solve' console script is not installed")
    instance = small_instance(tmp_path / "i.json")
    out = tmp_path / "r.json"
    done = subprocess.run([script, str(instance), "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["validated"] is True and data["arrived"] == 3
    bad = subprocess.run([script, str(tmp_path / "nothere.json"), "--out", str(out.with_name("x"))],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "nothere.json" in one_error_line(bad.stderr)
    assert not out.with_name("x").exists()


def test_job_level_plan_beats_or_ties_the_single_degree_rule(capsys):
    assert pacopt_main(["job", "cnn", "--budget", "8", "--preset", "physical", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["status"] == "optimal" and plan["workers"] <= 8
    assert sum(plan["counts"].values()) == 23                    # one count per op of cnn
    assert plan["simulated_jct_ms"] <= plan["single_degree"]["jct_ms"] * 1.001
    assert pacopt_main(["job", "cnn", "--budget", "0"]) == 2      # bad input: one line, exit 2
    assert capsys.readouterr().err.startswith("error: budget")


# ----- the front door keeps every promise ---------------------------------------------------------
def test_output_path_is_checked_before_any_work(tmp_path, monkeypatch, capsys):
    """A missing folder or a folder as --out is one line at once, not after solving."""
    def never(*args, **kwargs):
        raise AssertionError("solve() ran although --out was unusable")

    monkeypatch.setattr(api, "solve", never)
    instance = small_instance(tmp_path / "i.json")
    (tmp_path / "folder").mkdir()
    before = set(tmp_path.rglob("*"))
    for out, fragment in ((tmp_path / "missing" / "r.json", "does not exist"),
                          (tmp_path / "folder", "is a folder")):
        assert solve_main([str(instance), "--out", str(out)]) == 2
        assert fragment in one_error_line(capsys.readouterr().err)
    assert set(tmp_path.rglob("*")) == before  # no stray .tmp


@pytest.mark.parametrize("flags, fragment", [
    (["--seed", "-1"], "--seed must be in [0, 2147483648), not -1"),
    (["--time-limit", "nan"], "--time-limit must be a finite number of seconds > 0, not nan"),
    (["--time-limit", "inf"], "--time-limit must be a finite number of seconds > 0, not inf"),
    (["--threads", "0"], "--threads must be >= 1"),
])
def test_out_of_range_flags_exit_2(flags, fragment, tmp_path, capsys):
    """A flag out of its range is one line and exit 2; nothing is written."""
    out = tmp_path / "r.json"
    assert solve_main([str(small_instance(tmp_path / "i.json")), *flags, "--out", str(out)]) == 2
    assert fragment in one_error_line(capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.parametrize("change, fragment", [
    ({"workload": {"graphs": ["cnn"], "num_jobs": 10**12, "interarrival_ms": 1,
                   "max_jct_fraction": 0.5}}, "workload.num_jobs: must be less than or equal to"),
    ({"cluster": {"communication_groups": 100000, "racks_per_group": 1000,
                  "servers_per_rack": 2}}, "cluster.communication_groups"),
    ({"cluster": {"communication_groups": 64, "racks_per_group": 64, "servers_per_rack": 2}},
     "8192 servers; pacopt handles at most 4096"),
])
def test_size_guards_reject_before_allocating(change, fragment, tmp_path, capsys):
    """Sizes far beyond real use are one line, at once (not terabytes, not minutes)."""
    started = time.perf_counter()
    assert solve_main([str(small_instance(tmp_path / "i.json", **change)), "--out",
                       str(tmp_path / "r.json")]) == 2
    assert fragment in one_error_line(capsys.readouterr().err)
    assert time.perf_counter() - started < 5


def test_errors_list_every_problem(tmp_path, capsys):
    """No "(and N more problems)" hiding problems that fit on the line."""
    instance = small_instance(tmp_path / "i.json", jobs=[
        {"id": "j0", "graph": "cnn", "arrival_ms": -1, "max_jct_fraction": 0.5},
        {"id": "j1", "graph": "cnn", "arrival_ms": 0, "max_jct_fraction": 2},
        {"id": "j2", "graph": "cnn", "arrival_ms": 0}])
    assert solve_main([str(instance)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "more problem" not in line
    for fragment in ("jobs[0].arrival_ms", "jobs[1].max_jct_fraction",
                     "jobs[2].max_jct_fraction: required field is missing"):
        assert fragment in line


def test_non_utf8_result_and_instance_files(bundled_result, tmp_path, capsys):
    """A file that is not UTF-8 is one line, whichever file it is."""
    _, out = bundled_result
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b'{"method": "\xff\xfe"}')
    assert pacopt_main(["validate", BUNDLED, str(garbage)]) == 2
    assert "is not UTF-8 text" in one_error_line(capsys.readouterr().err)
    assert pacopt_main(["validate", str(garbage), str(out)]) == 2
    assert "is not UTF-8 text" in one_error_line(capsys.readouterr().err)


def test_a_graph_given_to_solve_and_an_instance_given_to_profile(tmp_path, capsys):
    """Each command says when it got the other's kind of file."""
    assert solve_main([CNN, "--out", str(tmp_path / "r.json")]) == 2
    assert "is a graph, not an instance" in one_error_line(capsys.readouterr().err)
    assert pacopt_main(["profile", BUNDLED]) == 2
    assert "is an instance, not a graph" in one_error_line(capsys.readouterr().err)


def _tampered(out: Path, tmp_path: Path, change) -> Path:
    data = json.loads(out.read_text())
    change(data)
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(data))
    return bad


@pytest.mark.parametrize("change, fragment", [
    (lambda d: d.update(accepted=d["accepted"] + 1), "summary says accepted"),
    (lambda d: d.update(arrived=7), "summary says arrived 7"),
    (lambda d: d.update(status="optimal", bound_accepted=d["accepted"], gap=0.0),
     "online policy: its status must be 'heuristic', not 'optimal'"),
])
def test_validate_checks_the_summary(bundled_result, tmp_path, capsys, change, fragment):
    """A summary contradicting the jobs, or a heuristic relabelled optimal, is invalid."""
    _, out = bundled_result
    assert pacopt_main(["validate", BUNDLED, str(_tampered(out, tmp_path, change))]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("INVALID") and any(fragment in line for line in lines), lines


def test_failing_validation_exits_1_when_piped_into_head(bundled_result, tmp_path):
    """The reader leaving (``| head``) does not turn a failure into exit 0."""
    _, out = bundled_result
    bad = _tampered(out, tmp_path, lambda d: d.update(accepted=0))
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first line
    try:
        done = subprocess.run([sys.executable, "-m", "pacopt.cli", "validate", BUNDLED,
                               str(bad)], stdout=write, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    finally:
        os.close(write)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr


def test_result_records_limits_threads_seed_and_interruption(tmp_path):
    """An exact method records the effective time limit and threads; random without --seed draws
    a seed, uses it and records it, so the run can be repeated."""
    out = tmp_path / "r.json"
    assert solve_main([BUNDLED, "--method", "random", "--out", str(out), "--quiet"]) == 0
    first = json.loads(out.read_text())
    assert isinstance(first["seed"], int) and first["interrupted"] is False
    assert first["time_limit"] is None and first["threads"] is None
    assert solve_main([BUNDLED, "--method", "random", "--seed", str(first["seed"]), "--out",
                       str(out), "--quiet"]) == 0
    again = json.loads(out.read_text())
    assert [job["degree"] for job in again["jobs"]] == [job["degree"] for job in first["jobs"]]
    instance = small_instance(tmp_path / "i.json")
    assert solve_main([str(instance), "--method", "bound", "--time-limit", "7", "--threads", "1",
                       "--out", str(out), "--quiet"]) == 0
    exact = json.loads(out.read_text())
    assert (exact["time_limit"], exact["threads"], exact["interrupted"]) == (7, 1, False)


def test_utilisation_is_over_the_jobs_span(tmp_path):
    """A horizon far beyond the last job does not dilute the utilisation."""
    runs = {}
    for horizon in (None, 1e9):
        changes = {} if horizon is None else {"horizon_ms": horizon}
        out = tmp_path / f"r{horizon}.json"
        assert solve_main([str(small_instance(tmp_path / "i.json", **changes)), "--out", str(out),
                           "--quiet"]) == 0
        runs[horizon] = json.loads(out.read_text())["metrics"]
    assert runs[1e9]["worker_utilisation"] == pytest.approx(runs[None]["worker_utilisation"])
    assert runs[1e9]["episode_ms"] == runs[None]["episode_ms"] < 1e9
    assert runs[None]["worker_utilisation"] > 0.01


def test_solve_help_wraps_every_description_whole(capsys, monkeypatch):
    """A long method description wraps under itself; none is cut."""
    long = "online: " + " ".join(f"word{i}" for i in range(40)) + " END."
    monkeypatch.setitem(api.METHODS, "demo:K", Method("demo:K", "online", long, "x:y"))
    with pytest.raises(SystemExit):
        solve_main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for description in (m.summary for m in api.METHODS.values()):
        assert " ".join(description.split()) in help_text


def test_method_registry_takes_parametric_families(monkeypatch):
    monkeypatch.setitem(api.METHODS, "demo:K", Method("demo:K", "online", "a family", "x:y"))
    assert api.method_family("demo:4") == "demo:K" and api.method_family("milp") == "milp"
    assert api.is_online("demo:7") and not api.is_online("cpsat")
    for bad in ("demo", "nosuch:3", "milp:2"):
        with pytest.raises(api.InputError, match="unknown method"):
            api.method_family(bad)


def echo_command(argv: list[str]) -> int:
    """A subcommand registered by the test below."""
    print("echo", *argv)
    return 3


def test_a_subcommand_is_one_registration(monkeypatch, capsys):
    from pacopt import cli

    monkeypatch.setitem(cli.COMMANDS, "echo", (__name__, "echo_command", "say it back"))
    assert pacopt_main(["echo", "a", "--b"]) == 3
    assert capsys.readouterr().out == "echo a --b\n"
    assert pacopt_main(["--help"]) == 0
    assert "say it back" in capsys.readouterr().out


def test_failed_download_leaves_no_empty_folder(tmp_path, monkeypatch, capsys):
    """The folders a failed download created are removed again."""
    from pacopt.model import pipedream

    def offline(dest, models=None):
        Path(dest).mkdir(parents=True, exist_ok=True)
        raise OSError("no route to host")

    monkeypatch.setattr(pipedream, "download_pipedream", offline)
    dest = tmp_path / "a" / "b" / "pipedream"
    assert pacopt_main(["download-pipedream", "--dest", str(dest)]) == 2
    assert "download failed" in one_error_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


def test_live_line_ticks_on_a_terminal_and_logs_improvements_elsewhere():
    """Exact methods are never silent: on a terminal the line is redrawn with the clock."""
    from pacopt.solvers.exact_runner import LiveLine

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal, log = Terminal(), io.StringIO()
    started = time.perf_counter()
    with LiveLine(started, stream=terminal) as live, LiveLine(started, stream=log) as logged:
        for report in (live, logged):
            report(0.1, 40, 50)
            report(0.2, 40, 50)  # no change: nothing new in a log
            report(0.3, 45, 50)
        time.sleep(1.2)
    assert terminal.getvalue().count("\r") >= 2 and "gap 10.00%" in terminal.getvalue()
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and "incumbent    40" in lines[0] and "gap 10.00%" in lines[1]


@pytest.mark.parametrize("name, content, fragment", [
    ("nested.txt", "node1 -- Input0 -- forward_compute_time=1.0, backward_compute_time=1.0, "
                   "activation_size=[1; [2]], parameter_size=0.0\n", "not a valid PipeDream"),
    ("huge.txt", "node1 -- Input0 -- forward_compute_time=1e300, backward_compute_time=1.0, "
                 "activation_size=1.0, parameter_size=0.0\n", "above pacopt's limit"),
    ("cr.json", json.dumps({"ops": [{"id": "a", "forward_ms": 1, "backward_ms": 1,
                                     "activation_bytes": 1, "parameter_bytes": 1}],
                            "deps": [["\r", "a"]]}), "unknown op '\\r'"),
])
def test_fuzz_findings_in_graph_files(name, content, fragment, tmp_path, capsys):
    """Found by tests/test_fuzz.py: each was a traceback or a two-line error."""
    path = tmp_path / name
    path.write_text(content)
    assert pacopt_main(["profile", str(path)]) == 2
    assert fragment in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("change, fragment", [
    ({"cluster": {"communication_groups": 2, "racks_per_group": 2, "servers_per_rack": 20}},
     "servers_per_rack 20 needs more transceivers"),
    ({"graphs": {"cnn": {"ops": [{"id": "a", "forward_ms": 1e308, "backward_ms": 1,
                                  "activation_bytes": 1, "parameter_bytes": 1}]}}},
     "graphs.cnn.ops[0].forward_ms: must be less than or equal to 1000000000000"),
    ({"workload": {"graphs": ["cnn"], "num_jobs": 4, "interarrival_ms": 1e308,
                   "max_jct_fraction": 0.5}}, "workload.interarrival_ms"),
])
def test_fuzz_findings_in_instances(change, fragment, tmp_path, capsys):
    """Found by tests/test_fuzz.py: a division by zero and an integer overflow, now one line."""
    assert solve_main([str(small_instance(tmp_path / "i.json", **change)), "--out",
                       str(tmp_path / "r.json")]) == 2
    assert fragment in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("limit", ["nan", "inf", "-1"])
def test_job_time_limit_must_be_finite(limit, capsys):
    """`pacopt job` checks its time limit too: inf would run unbounded."""
    assert pacopt_main(["job", "cnn", "--budget", "4", "--time-limit", limit]) == 2
    assert "--time-limit must be a finite number" in one_error_line(capsys.readouterr().err)
