"""Studies: the same table locally and on Ray, resumption, failed cells, bad study files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pacopt.analysis import (
    comparable,
    load_study,
    read_table,
    run_study,
    study_from_dict,
)
from pacopt.analysis.study_command import study_main
from pacopt.infra.errors import InputError
from pacopt.solvers import api

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GRAPHS = {"cnn": {"file": str(EXAMPLES / "graphs" / "cnn.json")},
          "resnet": {"file": str(EXAMPLES / "graphs" / "resnet.json")}}
ONLINE = ["para-max", "random", "min-feasible"]


def study_data(methods=ONLINE, **workload) -> dict:
    """A small study on the bundled graphs: 2 distributions x 2 seeds x ``methods``."""
    return {"name": "small", "grids": [{"name": "g", "methods": methods, "workload": {
        "graphs": GRAPHS, "distributions": ["A", "D"], "seeds": 2, "num_jobs": 30,
        "interarrival_ms": 150, **workload}}]}


def write_study(folder: Path, data: dict) -> Path:
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_cells_are_the_grid_in_order():
    study = study_from_dict(study_data(), EXAMPLES)
    assert len(study.cells) == 2 * 2 * 3
    first = study.cells[0]
    assert (first.params["distribution"], first.params["seed"], first.method) == ("A", 10000, "para-max")
    assert first.options == {"seed": 10000}  # randomised methods are seeded by the workload
    assert len({c.id for c in study.cells}) == len(study.cells)
    # ids are stable: the same study gives the same ids (they name the result files)
    assert [c.id for c in study_from_dict(study_data(), EXAMPLES).cells] == [c.id for c in study.cells]


def test_same_table_on_a_local_pool_and_on_ray(tmp_path):
    """A real local Ray instance (2 CPUs); the exact cell asks for 2 CPUs (threads=2). Online
    rows must agree in every column but time; the exact cell (tiny, proven optimal) in its
    accepted count, bound and status (which optimum a solver returns may differ)."""
    data = study_data(methods=[*ONLINE, {"name": "cpsat", "time_limit": 30, "threads": 2}],
                      num_jobs=12, seeds=1)
    study = study_from_dict(data, EXAMPLES)
    local = run_study(study, tmp_path / "local", workers=2, progress=False, plots=False)
    on_ray = run_study(study, tmp_path / "ray", workers=2, ray=True, progress=False, plots=False)
    assert len(local) == len(study.cells) and (local["status"] != "error").all(), local["error"]
    exact = local["method"] == "cpsat"
    assert (local.loc[exact, "status"] == "optimal").all()
    pd.testing.assert_frame_equal(comparable(local[~exact]), comparable(on_ray[~exact]))
    for column in ("cell", "accepted", "bound_accepted", "status", "opt_incumbent", "opt_bound"):
        assert local.loc[exact, column].tolist() == on_ray.loc[exact, column].tolist()
    # the online rows carry their gap to the exact optimum of the same instance
    assert local.loc[~exact, "opt_status"].eq("proven optimum").all()
    assert (local.loc[~exact, "gap_accepted"] >= 0).all()


def test_interrupted_study_resumes_to_the_same_table(tmp_path):
    study = study_from_dict(study_data(), EXAMPLES)
    through = run_study(study, tmp_path / "through", workers=1, progress=False, plots=False)

    def stop_after_five(row, seen=[]):
        seen.append(row)
        if len(seen) == 5:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run_study(study, tmp_path / "resumed", workers=1, progress=False, plots=False,
                  on_row=stop_after_five)
    assert len(read_table(tmp_path / "resumed")) == 5  # the finished cells are on disk
    rerun: list[dict] = []
    resumed = run_study(study, tmp_path / "resumed", workers=1, progress=False, plots=False,
                        on_row=rerun.append)
    assert len(rerun) == len(study.cells) - 5  # finished cells are not redone
    pd.testing.assert_frame_equal(comparable(through), comparable(resumed))
    assert len(list((tmp_path / "resumed" / "results").glob("*.json"))) == len(study.cells)


def test_a_failed_cell_is_a_row_and_is_retried(tmp_path, monkeypatch):
    study = study_from_dict(study_data(), EXAMPLES)
    real = api.solve

    def flaky(instance, method, **kwargs):
        if method == "random":
            raise RuntimeError("solver crashed")
        return real(instance, method, **kwargs)
    monkeypatch.setattr(api, "solve", flaky)
    table = run_study(study, tmp_path, workers=1, progress=False, plots=False)
    failed = table[table["status"] == "error"]
    assert len(table) == len(study.cells) and len(failed) == 4
    assert failed["error"].eq("RuntimeError: solver crashed").all()
    assert table.loc[table["status"] != "error", "validated"].all()
    monkeypatch.setattr(api, "solve", real)
    retried: list[dict] = []
    table = run_study(study, tmp_path, workers=1, progress=False, plots=False, on_row=retried.append)
    assert len(retried) == 4 and (table["status"] != "error").all()


def test_study_command_writes_table_results_and_plots(tmp_path, capsys):
    path = write_study(tmp_path, study_data(seeds=1))
    out = tmp_path / "out"
    assert study_main([str(path), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    table = pd.read_csv(out / "results.csv")
    assert len(table) == 6 and set(table["method"]) == set(ONLINE)
    assert len(read_table(out)) == 6
    for row in table.itertuples():
        result = json.loads((out / "results" / f"{row.cell}.json").read_text())
        assert result["validated"] and result["accepted"] == row.accepted
    assert {"g-blocking.png", "g-degree-vs-beta.png", "g-utilisation.png",
            "g-cluster.png"} <= {p.name for p in out.glob("*.png")}


def test_study_command_prints_a_narrow_summary(tmp_path, capsys):
    """One line per (grid, method), blocking as mean ± std: no 330-character rows."""
    path = write_study(tmp_path, study_data(seeds=2))
    assert study_main([str(path), "--out", str(tmp_path / "out"), "--workers", "1",
                       "--no-plots"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["grid", "method", "runs", "blocking", "(mean", "±", "std)",
                                "utilisation", "speed-up"]
    assert len(lines) == 1 + len(ONLINE) and max(map(len, lines)) <= 100
    assert all("±" in line and int(line.split()[2]) >= 2 for line in lines[1:])


@pytest.mark.parametrize("change, message", [
    ({"methods": ["para-max", "para-maxx"]}, "grids[0].methods[1].name: unknown method 'para-maxx'"),
    ({"distributions": ["A", "E"]}, 'grids[0].workload.distributions[1]: unknown beta '
                                    'distribution "E"'),
    ({"seeds": -2}, "grids[0].workload.seeds"),
    ({"instances": ["missing.json"]}, "grids[0].instances[0]: cannot read"),
    ({"methods": [{"name": "milp", "time_limt": 5}]}, "grids[0].methods[0].time_limt: unknown "
                                                       "method option"),
    ({"num_jobs": 0}, "grids[0].workload.num_jobs[0]"),
])
def test_bad_study_file_is_one_line_and_exit_2(tmp_path, capsys, change, message):
    data = study_data()
    grid = data["grids"][0]
    for key, value in change.items():
        if key == "instances":
            del grid["workload"]
            grid[key] = value
        elif key == "methods":
            grid[key] = value
        else:
            grid["workload"][key] = value
    out = tmp_path / "out"
    assert study_main([str(write_study(tmp_path, data)), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not out.exists()  # nothing ran, nothing was written


def test_bad_yaml_and_missing_file_are_one_line(tmp_path, capsys):
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    assert study_main([str(broken)]) == 2
    assert study_main([str(tmp_path / "nope.yaml")]) == 2
    assert study_main([str(broken), "--workers", "0"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("error: ") for line in lines)


def test_example_studies_are_valid(pipedream_env):
    from pacopt.infra.errors import PacoptWarning

    studies = sorted((Path(__file__).resolve().parents[1] / "studies").glob("*.yaml"))
    assert len(studies) >= 4
    # scale.yaml plays pac-ml on clusters its fine-tunes were not trained for: loading says so
    with pytest.warns(PacoptWarning, match="was not trained for this cluster"):
        for path in studies:
            assert load_study(path).cells, path


def test_instance_files_as_a_grid(tmp_path):
    data = {"name": "files", "grids": [{"instances": [str(EXAMPLES / "bundled.json")],
                                        "methods": ["para-max", {"name": "para-max",
                                                                 "label": "again"}]}]}
    study = study_from_dict(data, tmp_path)
    assert [c.method for c in study.cells] == ["para-max", "again"]
    assert study.cells[0].params["num_jobs"] == 300
    duplicate = {"name": "dup", "grids": [{"instances": [str(EXAMPLES / "bundled.json")],
                                           "methods": ["para-max", "para-max"]}]}
    with pytest.raises(InputError, match="appears twice"):
        study_from_dict(duplicate, tmp_path)


def test_a_cell_stopped_by_ctrl_c_is_not_recorded(tmp_path, monkeypatch):
    """Ctrl-C makes ``solve`` return early with ``interrupted`` set: that answer is not the
    cell's, so the study stops and the cell runs again on resumption."""
    study = study_from_dict(study_data(), EXAMPLES)
    real = api.solve

    def interrupted_on_random(instance, method, **kwargs):
        solution = real(instance, method, **kwargs)
        solution.interrupted = method == "random"
        return solution
    monkeypatch.setattr(api, "solve", interrupted_on_random)
    with pytest.raises(KeyboardInterrupt):
        run_study(study, tmp_path, workers=1, progress=False, plots=False)
    assert read_table(tmp_path)["method"].tolist() == ["para-max"]


def test_a_line_cut_by_a_killed_run_costs_only_its_cell(tmp_path):
    study = study_from_dict(study_data(seeds=1), EXAMPLES)
    run_study(study, tmp_path, workers=1, progress=False, plots=False)
    journal = tmp_path / "rows.jsonl"
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:40])  # killed mid-write
    rerun: list[dict] = []
    run_study(study, tmp_path, workers=1, progress=False, plots=False, on_row=rerun.append)
    again: list[dict] = []
    table = run_study(study, tmp_path, workers=1, progress=False, plots=False, on_row=again.append)
    assert (len(rerun), len(again), len(table)) == (1, 0, len(study.cells))
