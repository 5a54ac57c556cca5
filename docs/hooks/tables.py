"""Result tables rendered from data files, and files included whole.

Each results table lives as one JSON file, ``docs/results/NAME.json``::

    {
      "title": "Blocking rate, fresh seeds 20000-20019",      # str, shown above the table
      "columns": ["method", "A", "B"],                        # [str], the header row
      "rows": [["pac-ml", "0.190 ± 0.009", 0.223], ...],      # [[cell, ...]], one per row
      "command": "python benchmarks/bench_fresh.py ...",      # str, what reproduces the table
      "measured": "2026-12-02",                               # "YYYY-MM-DD", when it was run
      "notes": "..."                                          # str, optional, shown under it
    }

Every row has one cell per column. A cell is a string (Markdown, shown as written), a number
(shown as Python prints it) or null (shown empty). ``measured`` is kept in the file and not
shown on the pages. A benchmark writes such a file with ``--out docs/results/NAME.json``.

Markers:

- ``<!-- table: NAME -->`` on a line of its own, in any page under ``docs/``: replaced at build
  time (this module is an MkDocs hook, ``on_page_markdown``) by :func:`render` of
  ``docs/results/NAME.json``: the title, the table, the notes and the command under it.
- In ``README.md``, which MkDocs does not build, the rendering is kept between
  ``<!-- table: NAME -->`` and ``<!-- /table -->``. ``python docs/hooks/tables.py
  --write-readme`` re-renders every such block from its data file; ``--check-readme`` exits 1
  when a block differs from its rendering (``tests/test_results_tables.py`` checks the same).
  A page under ``docs/`` may hold a block too: the hook replaces the marker and the block.
- ``<!-- include: PATH -->`` on a line of its own: replaced by the text of ``PATH``, relative to
  the repository (``docs/changelog.md`` includes ``CHANGELOG.md`` this way).

``python docs/hooks/tables.py NAME ...`` prints the rendering of the named data files.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
README = ROOT / "README.md"

#: a table marker, with the rendered block and its end marker after it if there is one
TABLE = re.compile(r"^<!-- table: (?P<name>[A-Za-z0-9_.-]+) -->[ \t]*$"
                   r"(?P<block>\n(?:(?!<!-- table: ).*\n)*?<!-- /table -->[ \t]*$)?",
                   re.MULTILINE)
INCLUDE = re.compile(r"^<!-- include: (?P<path>[^ ]+) -->[ \t]*$", re.MULTILINE)
FIELDS = {"title": str, "columns": list, "rows": list, "command": str, "measured": str}


class TableError(ValueError):
    """A data file that is missing or does not follow the format above."""


def data_path(name: str) -> Path:
    return RESULTS / f"{name}.json"


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def check(data: object, source: str = "table") -> dict:
    """``data`` if it follows the format, else :class:`TableError` naming what is wrong."""
    if not isinstance(data, dict):
        raise TableError(f"{source}: not a JSON object")
    for field, kind in FIELDS.items():
        if not isinstance(data.get(field), kind):
            raise TableError(f"{source}: '{field}' missing or not a {kind.__name__}")
    unknown = set(data) - set(FIELDS) - {"notes"}
    if unknown:
        raise TableError(f"{source}: unknown fields {sorted(unknown)}")
    if "notes" in data and not isinstance(data["notes"], str):
        raise TableError(f"{source}: 'notes' is not a str")
    if not data["columns"] or not all(isinstance(c, str) for c in data["columns"]):
        raise TableError(f"{source}: 'columns' must be a non-empty list of strings")
    for i, row in enumerate(data["rows"]):
        if not isinstance(row, list) or len(row) != len(data["columns"]):
            raise TableError(f"{source}: row {i} does not have {len(data['columns'])} cells")
        for cell in row:
            if cell is not None and not isinstance(cell, (str, int, float)):
                raise TableError(f"{source}: row {i} has a cell that is not text or a number")
    try:
        date.fromisoformat(data["measured"])
    except ValueError:
        raise TableError(f"{source}: 'measured' is not a YYYY-MM-DD date") from None
    return data


def load(name: str) -> dict:
    """The checked data file ``docs/results/NAME.json``."""
    path = data_path(name)
    if not path.is_file():
        raise TableError(f"no data file {_shown(path)} for table '{name}'")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise TableError(f"{_shown(path)}: {err}") from None
    return check(data, _shown(path))


def _cell(value: object) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def render(data: dict) -> str:
    """The Markdown of one table: its title, the table, its notes and its command."""
    lines = [f"**{_cell(data['title'])}**", "",
             "| " + " | ".join(_cell(c) for c in data["columns"]) + " |",
             "|" + "---|" * len(data["columns"])]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in data["rows"]]
    if data.get("notes"):
        lines += ["", " ".join(data["notes"].split())]
    lines += ["", f"Reproduce: `{data['command']}`"]
    return "\n".join(lines)


def expand(markdown: str, keep_markers: bool = False) -> str:
    """``markdown`` with every table marker (and its block) replaced by its rendering; with
    ``keep_markers`` the markers stay around it (README's form)."""
    def one(match: re.Match) -> str:
        name = match["name"]
        table = render(load(name))
        if keep_markers:
            return f"<!-- table: {name} -->\n{table}\n<!-- /table -->"
        return table
    return TABLE.sub(one, markdown)


def include(markdown: str) -> str:
    """``markdown`` with every include marker replaced by the named file's text."""
    def one(match: re.Match) -> str:
        path = ROOT / match["path"]
        if not path.is_file():
            raise TableError(f"include: no file {match['path']}")
        return path.read_text(encoding="utf-8").rstrip("\n")
    return INCLUDE.sub(one, markdown)


def markers(markdown: str) -> list[str]:
    """The table names ``markdown``'s markers name, in order."""
    return [m["name"] for m in TABLE.finditer(markdown)]


def readme_blocks(markdown: str) -> dict[str, str]:
    """README's rendered blocks by table name (only markers with a block)."""
    return {m["name"]: m["block"][1:].rsplit("<!-- /table -->", 1)[0].rstrip("\n")
            for m in TABLE.finditer(markdown) if m["block"]}


# --- the MkDocs hook ------------------------------------------------------------------------

def on_page_markdown(markdown: str, page, config, files) -> str:
    from mkdocs.exceptions import PluginError

    try:
        return expand(include(markdown))
    except TableError as err:
        # a page naming a missing or broken data file fails the build, with the page named
        raise PluginError(f"{page.file.src_path}: {err}") from None


# --- the command ----------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render result tables from docs/results/.")
    parser.add_argument("names", nargs="*", help="print the rendering of these tables")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--write-readme", action="store_true",
                      help="re-render README.md's table blocks from their data files")
    what.add_argument("--check-readme", action="store_true",
                      help="exit 1 if a README.md table block differs from its data file")
    args = parser.parse_args(argv)
    try:
        for name in args.names:
            print(render(load(name)) + "\n")
        if args.write_readme or args.check_readme:
            text = README.read_text(encoding="utf-8")
            new = expand(text, keep_markers=True)
            if args.check_readme:
                if new != text:
                    print("README.md: a table block differs from its data file "
                          "(python docs/hooks/tables.py --write-readme)", file=sys.stderr)
                    return 1
            elif new != text:
                README.write_text(new, encoding="utf-8")
                print(f"README.md: {len(markers(text))} table(s) re-rendered")
    except TableError as err:
        print(err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
