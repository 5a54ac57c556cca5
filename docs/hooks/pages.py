"""MkDocs hook: pages that live outside the nav's hand-written list.

- The tutorial notebooks in ``notebooks/`` become pages of the site, with their outputs. The
  sources are stored without outputs (the tests run them there); ``docs/notebooks/<name>.ipynb``
  is the copy ``docs/hooks/render_notebooks.py`` executed on small settings, outputs kept, with a
  note at its top saying so. mkdocs finds those copies in ``docs/`` itself; for a notebook without
  one, the bare source is added to the site's files as ``notebooks/<name>.ipynb`` (before
  mkdocs-jupyter turns notebooks into pages), so a fresh clone builds as it is. A rendered copy
  whose notebook is gone is a warning (an error under ``--strict``).
- Every ``docs/notes/*.md`` missing from the nav's "Notes" section is appended to it (titled by
  its first heading), so a new note is on the site without an edit to ``mkdocs.yml``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
NOTES = ROOT / "docs" / "notes"
RENDERED = ROOT / "docs" / "notebooks"

log = logging.getLogger("mkdocs.hooks.pages")


def _listed(nav) -> set[str]:
    """Every page path named anywhere in a nav (lists, one-key dicts, bare strings)."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, dict):
        return set().union(*map(_listed, nav.values())) if nav else set()
    if isinstance(nav, list):
        return set().union(*map(_listed, nav)) if nav else set()
    return set()


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem.replace("_", " ").capitalize()


def on_config(config):
    nav = config["nav"]
    if nav is None:
        return config
    listed = _listed(nav)
    extra = [{_title(p): f"notes/{p.name}"} for p in sorted(NOTES.glob("*.md"))
             if f"notes/{p.name}" not in listed]
    if extra:
        section = next((item for item in nav if isinstance(item, dict) and "Notes" in item), None)
        if section is None:
            nav.append({"Notes": extra})
        else:
            section["Notes"].extend(extra)
    return config


@event_priority(100)  # first: mkdocs-jupyter's on_files must see the notebooks
def on_files(files: Files, config) -> Files:
    sources = {path.name for path in NOTEBOOKS.glob("*.ipynb")}
    for path in sorted(RENDERED.glob("*.ipynb")):
        if path.name not in sources:
            log.warning("docs/notebooks/%s is a rendered copy of no notebook in notebooks/",
                        path.name)
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        if files.get_file_from_path(f"notebooks/{path.name}") is not None:
            continue  # its rendered copy, from docs/notebooks/
        # a plain File rooted at the repository (not File.generated: mkdocs-jupyter's wrapper
        # finds the source through src_dir)
        files.append(File(f"notebooks/{path.name}", src_dir=str(ROOT), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    return files
