"""The tutorial notebooks run headless, top to bottom, on small settings.

Each notebook has one cell tagged ``parameters``; the test appends smaller settings to it (fewer
jobs, seeds and seconds, outputs in a temporary folder) and executes the notebook in its own
folder with nbclient. A cell that raises fails the test.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import yaml
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def small_study(source: str, folder: Path, exact_jobs: int = 10) -> Path:
    """``studies/<source>`` shrunk: one seed, few jobs, short exact solves."""
    data = yaml.safe_load((ROOT / "studies" / source).read_text())
    for grid in data["grids"]:
        grid["workload"]["seeds"] = 1
        exact = any(isinstance(m, dict) for m in grid["methods"])
        grid["workload"]["num_jobs"] = exact_jobs if exact else 60
        for method in grid["methods"]:
            if isinstance(method, dict):
                method.update(time_limit=5, threads=1)
        graphs = grid["workload"].get("graphs")
        if isinstance(graphs, dict):  # paths relative to studies/: make them absolute
            for spec in graphs.values():
                spec["file"] = str((ROOT / "studies" / spec["file"]).resolve())
    path = folder / source
    path.write_text(yaml.safe_dump(data))
    return path


def run_notebook(name: str, **params) -> nbformat.NotebookNode:
    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    cell = next(c for c in book.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += "\n" + "\n".join(f"{k} = {v!r}" for k, v in params.items())
    NotebookClient(book, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return book


def outputs(book) -> str:
    return "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                     for c in book.cells if c.cell_type == "code" for o in c.outputs)


def images(book) -> int:
    return sum("image/png" in o.get("data", {}) for c in book.cells if c.cell_type == "code"
               for o in c.outputs)


def test_model_tour():
    book = run_notebook("1_model_tour.ipynb")
    assert "validated True" in outputs(book) and images(book) == 2


def test_heuristics_vs_optimum():
    book = run_notebook("2_heuristics_vs_optimum.ipynb", NUM_JOBS=12, TIME_LIMIT=10)
    assert "optimum" in outputs(book) and images(book) == 3


def small_placement_study(folder: Path) -> Path:
    """``studies/placement.yaml``'s first grid on the bundled graphs (no download): 20 jobs,
    a few rules under both placers, ``tuned`` and a 5 s exact solve."""
    data = yaml.safe_load((ROOT / "studies" / "placement.yaml").read_text())
    gap = yaml.safe_load((ROOT / "studies" / "beta-gap.yaml").read_text())["grids"][0]["workload"]
    grid = data["grids"][0]
    grid["workload"].update(graphs={name: {"file": str((ROOT / "studies" / g["file"]).resolve())}
                                    for name, g in gap["graphs"].items()},
                            distributions=["A", "B"], num_jobs=20, interarrival_ms=150)
    keep = ("min-feasible", "fixed-or-min:4", "fixed-or-min:8", "tuned", "cpsat")
    grid["methods"] = [m for m in grid["methods"]
                       if (m if isinstance(m, str) else m["name"]) in keep]
    for method in grid["methods"]:
        if isinstance(method, dict) and method["name"] == "cpsat":
            method.update(time_limit=5, threads=1)
    data["grids"] = [grid]
    path = folder / "placement.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_gap_study(tmp_path):
    book = run_notebook("3_gap_study.ipynb", STUDY=str(small_study("beta-gap.yaml", tmp_path)),
                        OUT=str(tmp_path / "out"),
                        PLACEMENT_STUDY=str(small_placement_study(tmp_path)),
                        PLACEMENT_OUT=str(tmp_path / "placement"), SPLIT_METHOD="tuned")
    assert "cells" in outputs(book) and images(book) == 3
    assert (tmp_path / "out" / "results.parquet").exists()
    assert "hindsight" in outputs(book)


def test_physical_vs_ddls(tmp_path, pipedream_env):
    book = run_notebook("4_physical_vs_ddls.ipynb", NUM_JOBS=40, SEEDS=1,
                        OUT=str(tmp_path / "out"))
    assert images(book) == 3


def test_paper_table(tmp_path, pipedream_env):
    book = run_notebook("paper_table.ipynb", STUDY=str(small_study("paper.yaml", tmp_path)),
                        OUT=str(tmp_path / "out"))
    text = "\n".join(str(o.get("data", {}).get("text/markdown", ""))
                     for c in book.cells if c.cell_type == "code" for o in c.outputs)
    assert "| Para_max |" in text and "exact bound, 10 jobs" in text
    assert images(book) == 2


def test_learned_agent(pipedream_env):
    book = run_notebook("5_learned_agent.ipynb", NUM_JOBS=60, SEEDS=1, CURVE_JOBS=60,
                        EXACT_JOBS=12, TIME_LIMIT=5)
    text = outputs(book)
    assert "pac-ml accepts" in text and "general-" in text and images(book) == 4  # with the rounds


def test_real_cluster_week(trace_dir, pipedream_env):
    book = run_notebook("6_real_cluster_week.ipynb", NUM_JOBS=120, BUCKET_HOURS=3)
    text = outputs(book)
    assert "replayed at 0.5" in text and "as-requested" in text and images(book) == 4


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")))
def test_every_notebook_is_tested(name):
    tested = {"1_model_tour.ipynb", "2_heuristics_vs_optimum.ipynb", "3_gap_study.ipynb",
              "4_physical_vs_ddls.ipynb", "5_learned_agent.ipynb", "paper_table.ipynb",
              "6_real_cluster_week.ipynb"}
    assert name in tested, f"{name} has no execution test"
