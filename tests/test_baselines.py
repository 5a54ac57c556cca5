"""The baselines through the front door: ``solve --method fixed:K | fixed-or-min:K | tuned``."""

from __future__ import annotations

import json

import pytest

from pacopt.cli import solve_main
from pacopt.model.paper_workload import paper_instance_dict
from pacopt.online.policies import tuned_choice
from pacopt.solvers.api import METHODS, is_online, solve


@pytest.fixture
def paper_file(tmp_path, pipedream_dir):
    """A 60-job paper instance (beta D) with the profiles named by path."""
    data = paper_instance_dict("D", seed=5, num_jobs=60)
    data["graphs"] = {name: {"pipedream": str(pipedream_dir / f"{name}.txt")}
                      for name in data["graphs"]}
    path = tmp_path / "paper.json"
    path.write_text(json.dumps(data))
    return path


def test_the_baselines_are_registered():
    assert {"fixed:K", "fixed-or-min:K", "tuned", "tuned-given-label"} <= set(METHODS)
    assert "future jobs" in METHODS["tuned-given-label"].description


@pytest.mark.parametrize("method", ["fixed:4", "fixed-or-min:8"])
def test_solve_runs_a_parametric_baseline(paper_file, tmp_path, method):
    out = tmp_path / "r.json"
    assert solve_main([str(paper_file), "--method", method, "--out", str(out), "--quiet"]) == 0
    data = json.loads(out.read_text())
    assert data["method"] == method and data["validated"] and data["status"] == "heuristic"
    k = int(method.rsplit(":", 1)[1])
    degrees = {job["degree"] for job in data["jobs"] if job["accepted"]}
    assert k in degrees
    if method.startswith("fixed:"):
        assert degrees == {k}  # never anything else, and never blocked by its own deadline
        assert all(job["reason"] in (None, "rejected", "horizon") for job in data["jobs"])


def test_solve_tuned_records_its_choice(paper_file):
    solution = solve(paper_file, "tuned", seed=0)
    assert solution.validated
    assert solution.method == f"tuned(online: {tuned_choice('D')}, D)"
    assert is_online(solution.method)  # so the validator checks it as an online policy
    oracle = solve(paper_file, "tuned-given-label", seed=0)
    assert oracle.validated and oracle.method == f"tuned-given-label({tuned_choice('D')}, D)"
    assert is_online(oracle.method) and METHODS["tuned-given-label"].reads_future


@pytest.mark.parametrize("method", ["fixed:0", "fixed-or-min:x", "fixed:17"])
def test_bad_k_is_one_line_and_exit_2(paper_file, tmp_path, capsys, method):
    out = tmp_path / "r.json"
    assert solve_main([str(paper_file), "--method", method, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "K must be" in err[0]
    assert not out.exists()
