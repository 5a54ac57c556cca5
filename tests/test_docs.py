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
    assert {"infra", "cluster", "solvers"} <= set(PACKAGES)
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
