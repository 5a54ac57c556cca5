"""The tutorial notebooks run headless, top to bottom, on small settings.

Each notebook has one cell tagged ``parameters``; the test inserts a cell of smaller settings after
it (fewer jobs, seeds and seconds, outputs in a temporary folder) and executes the notebook in its
own folder with nbclient. A cell that raises fails the test. The small settings are
``SMALL`` in ``docs/hooks/render_notebooks.py``, which runs the notebooks on the same settings for
the site and keeps the executed copies in ``docs/notebooks/``; the last tests here check that
those copies match their sources and show the sources' plots.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
RENDERED = ROOT / "docs" / "notebooks"


def _load_render():
    spec = importlib.util.spec_from_file_location(
        "render_notebooks", ROOT / "docs" / "hooks" / "render_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["render_notebooks"] = module
    spec.loader.exec_module(module)
    return module


render = _load_render()


def run_notebook(name: str, folder: Path) -> nbformat.NotebookNode:
    """``notebooks/<name>`` executed on its small settings (``render.SMALL``), scratch in
    ``folder``."""
    return render.execute(name, folder, timeout=300)


def outputs(book) -> str:
    return "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                     for c in book.cells if c.cell_type == "code" for o in c.outputs)


def images(book) -> int:
    return sum("image/png" in o.get("data", {}) for c in book.cells if c.cell_type == "code"
               for o in c.outputs)


def test_model_tour(tmp_path):
    book = run_notebook("1_model_tour.ipynb", tmp_path)
    assert "validated True" in outputs(book) and images(book) == 2


def test_heuristics_vs_optimum(tmp_path):
    book = run_notebook("2_heuristics_vs_optimum.ipynb", tmp_path)
    assert "optimum" in outputs(book) and images(book) == 3


def test_gap_study(tmp_path):
    book = run_notebook("3_gap_study.ipynb", tmp_path)
    assert "cells" in outputs(book) and images(book) == 3
    assert (tmp_path / "out" / "results.parquet").exists()
    assert "hindsight" in outputs(book)


def test_physical_vs_ddls(tmp_path, pipedream_env):
    book = run_notebook("4_physical_vs_ddls.ipynb", tmp_path)
    assert images(book) == 3


def test_paper_table(tmp_path, pipedream_env):
    book = run_notebook("paper_table.ipynb", tmp_path)
    text = "\n".join(str(o.get("data", {}).get("text/markdown", ""))
                     for c in book.cells if c.cell_type == "code" for o in c.outputs)
    assert "| Para_max |" in text and "exact bound, 10 jobs" in text
    assert images(book) == 2


def test_learned_agent(tmp_path, pipedream_env):
    book = run_notebook("5_learned_agent.ipynb", tmp_path)
    text = outputs(book)
    assert "pac-ml accepts" in text and "general-" in text and images(book) == 4  # with the rounds


def test_real_cluster_week(tmp_path, trace_dir, pipedream_env):
    book = run_notebook("6_real_cluster_week.ipynb", tmp_path)
    text = outputs(book)
    assert "replayed at 0.5" in text and "as-requested" in text and images(book) == 4


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")))
def test_every_notebook_is_tested(name):
    tested = {"1_model_tour.ipynb", "2_heuristics_vs_optimum.ipynb", "3_gap_study.ipynb",
              "4_physical_vs_ddls.ipynb", "5_learned_agent.ipynb", "paper_table.ipynb",
              "6_real_cluster_week.ipynb"}
    assert name in tested, f"{name} has no execution test"
    assert name in render.SMALL, f"{name} has no small settings in docs/hooks/render_notebooks.py"


# the rendered copies the site shows (docs/notebooks/, written by docs/hooks/render_notebooks.py)

SOURCES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


def _rendered(name: str) -> nbformat.NotebookNode:
    path = RENDERED / name
    if not path.exists():
        pytest.fail(f"docs/notebooks/{name} is missing: python docs/hooks/render_notebooks.py "
                    f"{Path(name).stem}")
    return nbformat.read(path, as_version=4)


@pytest.mark.parametrize("name", SOURCES)
def test_rendered_copy_matches_its_source(name):
    """A notebook whose code or text changed has to be rendered again before it lands."""
    source, rendered = nbformat.read(NOTEBOOKS / name, as_version=4), _rendered(name)
    again = f"python docs/hooks/render_notebooks.py {Path(name).stem}"
    assert render.code_sources(rendered) == render.code_sources(source), (
        f"docs/notebooks/{name} is stale: {again}")
    assert render.source_cells(rendered) == render.source_cells(source), (
        f"docs/notebooks/{name} has older text: {again.replace('.py', '.py --prose')}")


@pytest.mark.parametrize("name", SOURCES)
def test_rendered_copy_shows_the_plots(name):
    book = _rendered(name)
    source = nbformat.read(NOTEBOOKS / name, as_version=4)
    if render.makes_plots(source):
        assert render.image_count(book) >= 1, f"docs/notebooks/{name} has no figure"
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors, f"docs/notebooks/{name} shows an error"
    assert (RENDERED / name).stat().st_size <= render.MAX_BYTES


def test_no_rendered_copy_without_a_source():
    orphans = sorted({p.name for p in RENDERED.glob("*.ipynb")} - set(SOURCES))
    assert not orphans, f"rendered copies without a notebook: {orphans}"
