"""The ``solve`` and ``pacopt`` commands: results, exit codes and one-line errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pacopt.cluster.instance import load_instance
from pacopt.cluster.solution import Solution
from pacopt.solvers import api
from pacopt.cluster.policies import HEURISTICS
from pacopt.solvers.cli import pacopt_main, solve_main
from pacopt.solvers.validate import find_problems

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BUNDLED = str(EXAMPLES / "bundled.json")
CNN = str(EXAMPLES / "graphs" / "cnn.json")

#: DESIGN.md section 5.
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
    run = [sys.executable, "-m", "pacopt.solvers.cli"]
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
