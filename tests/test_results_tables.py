"""The generated results tables (docs/hooks/tables.py): every marker names a data file, every data
file follows the format, README's rendered block is its data file's rendering, and the rendering
itself is the Markdown expected.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "docs" / "hooks" / "tables.py")
tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tables)

PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
DATA = sorted((ROOT / "docs" / "results").glob("*.json"))


def test_every_marker_names_an_existing_data_file():
    named = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for name in tables.markers(text):
            named.setdefault(name, []).append(page.relative_to(ROOT))
        for match in tables.INCLUDE.finditer(text):
            assert (ROOT / match["path"]).is_file(), f"{page}: no file {match['path']}"
    assert "headline-fresh-first-fit" in named
    missing = {n: p for n, p in named.items() if not tables.data_path(n).is_file()}
    assert missing == {}


@pytest.mark.parametrize("path", DATA, ids=lambda p: p.stem)
def test_every_data_file_follows_the_format_and_is_shown(path):
    tables.load(path.stem)  # raises TableError naming what is wrong
    shown = [p for p in PAGES if path.stem in tables.markers(p.read_text(encoding="utf-8"))]
    assert shown, f"{path.name} is on no page"


def test_readme_blocks_are_their_data_files_rendering():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = tables.readme_blocks(text)
    assert set(blocks) == set(tables.markers(text)), "a README marker has no <!-- /table -->"
    assert blocks, "README.md shows no generated table"
    for name, block in blocks.items():
        assert block == tables.render(tables.load(name)), \
            f"README.md's {name} differs: python docs/hooks/tables.py --write-readme"
    assert tables.expand(text, keep_markers=True) == text


SMALL = {"title": "Small", "columns": ["method", "A"],
         "rows": [["`x`", "0.1 ± 0.0"], ["y | z", 2], ["w", None]],
         "command": "python bench.py --seeds 2", "measured": "2026-12-02", "notes": "A note."}


def test_a_small_table_renders_as_expected():
    assert tables.render(SMALL) == (
        "**Small**\n"
        "\n"
        "| method | A |\n"
        "|---|---|\n"
        "| `x` | 0.1 ± 0.0 |\n"
        "| y \\| z | 2 |\n"
        "| w |  |\n"
        "\n"
        "A note.\n"
        "\n"
        "Reproduce: `python bench.py --seeds 2`")


def test_markers_are_replaced_and_blocks_rewritten(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    (tmp_path / "small.json").write_text(json.dumps(SMALL))
    rendered = tables.render(SMALL)
    page = "Before.\n\n<!-- table: small -->\n\nAfter.\n"
    assert tables.expand(page) == f"Before.\n\n{rendered}\n\nAfter.\n"
    stale = "<!-- table: small -->\n| old |\n<!-- /table -->\nAfter.\n"
    assert tables.expand(stale, keep_markers=True) == \
        f"<!-- table: small -->\n{rendered}\n<!-- /table -->\nAfter.\n"
    assert tables.expand(stale) == f"{rendered}\nAfter.\n"


@pytest.mark.parametrize("change, problem", [
    ({"rows": [["only one cell"]]}, "row 0"),
    ({"measured": "2 December"}, "measured"),
    ({"command": None}, "command"),
    ({"extra": 1}, "unknown"),
])
def test_a_bad_data_file_is_refused(change, problem):
    with pytest.raises(tables.TableError, match=problem):
        tables.check({**SMALL, **change})


def test_a_missing_data_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    with pytest.raises(tables.TableError, match="no data file"):
        tables.expand("<!-- table: nothing -->\n")
