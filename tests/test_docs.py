"""The documentation: the site builds cleanly, with every notebook and package on it, and the
README's relative links lead somewhere.

The build is ``mkdocs build --strict`` (any warning fails it: a broken link or anchor, a page
missing from the nav, a docstring mkdocstrings cannot render), run once into a temporary folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: pacopt's packages (each has an API page), and the dispatcher module.
PACKAGES = sorted(p.parent.name for p in (ROOT / "pacopt").glob("*/__init__.py")) + ["cli"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")  # Material's banner about MkDocs 2
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(out)], check=False, cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def test_every_notebook_has_a_page(site):
    assert NOTEBOOKS
    for notebook in NOTEBOOKS:
        page = site / "notebooks" / notebook.stem / "index.html"
        assert page.is_file(), page
        assert 'class="jp-Notebook' in page.read_text(), f"{page} is not a rendered notebook"


def test_every_package_has_an_api_page(site):
    assert {"infra", "model", "online", "solvers"} <= set(PACKAGES)
    for package in PACKAGES:
        page = site / "api" / package / "index.html"
        assert page.is_file(), page
        assert f'id="pacopt.{package}' in page.read_text(), f"{page} has no rendered API"


def test_readme_relative_links_exist():
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'(?:src|href)="([^"]+)"', text)
    relative = [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and
                not t.startswith("#")]
    assert relative, "README.md links nothing in the repository"
    missing = [t for t in relative if not (ROOT / t.split("#")[0]).exists()]
    assert missing == []


def test_model_rules_are_cited_from_docs_model():
    """The model's rules are cited from docs/model.md, which readers have: no file names the
    reference's semantics notes (outside the repository), and every ``model.md#<anchor>`` cited in
    pacopt/ and tests/ is a heading of docs/model.md. Anchors as the toc extension makes them:
    an explicit ``{ #id }``, else the title lowercased, punctuation dropped, spaces to '-'."""
    import unicodedata

    def files(*tops):
        for top in tops:
            for path in sorted((ROOT / top).rglob("*")):
                parts = path.relative_to(ROOT).parts
                if path.is_file() and not any(p == "__pycache__" or p.startswith(".")
                                              for p in parts):
                    yield path

    # the reference notes beside the repository, split so that this file does not name them
    outside = ("ddls-" + "semantics", "pacml-paper-" + "digest")
    naming = [str(p.relative_to(ROOT)) for p in [ROOT / "README.md", *files(
        "pacopt", "tests", "docs", "notebooks")]
        if any(name.encode() in p.read_bytes() for name in outside)]
    assert naming == []

    anchors, fenced = set(), False
    for line in (ROOT / "docs" / "model.md").read_text().splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        heading = None if fenced else re.match(r"#{1,6}\s+(.+?)\s*$", line)
        if heading:
            title = heading.group(1)
            explicit = re.search(r"\{:?\s*#([\w-]+)[^}]*\}$", title)
            if explicit:
                anchors.add(explicit.group(1))
            else:
                text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
                anchors.add(re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower()))
    cited = set()
    for path in files("pacopt", "tests"):
        text = path.read_bytes().decode(errors="ignore")
        cited |= {(str(path.relative_to(ROOT)), m.group(1))
                  for m in re.finditer(r"model\.md#([\w-]+)", text)
                  if text[max(m.start() - 4, 0):m.start()] != "api/"}  # not the API page
    assert cited, "nothing in pacopt/ or tests/ cites docs/model.md#..."
    assert sorted(c for c in cited if c[1] not in anchors) == []
