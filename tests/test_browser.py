"""The documentation site in a real browser (``docs/hooks/browser_check.py``).

Marked ``browser`` and deselected by default: ``python -m pytest -m browser tests/test_browser.py``.
Needs Debian's Chromium (``apt-get install chromium``) and Playwright's Python package (the
``test`` extra); skips without them. Builds the site with ``--strict``, opens every page and fails
on an image that did not load, a same-site link that answers an error, a console error or a
failed request to the site; screenshots go to ``browser-shots/``.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.browser


def _load_check():
    spec = importlib.util.spec_from_file_location(
        "browser_check", ROOT / "docs" / "hooks" / "browser_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["browser_check"] = module  # a dataclass needs its module registered
    spec.loader.exec_module(module)
    return module


check = _load_check()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    pytest.importorskip("playwright.sync_api")
    if not shutil.which(check.CHROMIUM):
        pytest.skip(f"no Chromium at {check.CHROMIUM} (apt-get install chromium)")
    site = tmp_path_factory.mktemp("site") / "site"
    check.build(site, strict=True)
    return check.check_site(site, ROOT / "browser-shots")


def test_every_page_opens_without_errors(results):
    print(check.table(results))
    assert results, "the build made no pages"
    assert not [r for r in results if r.errors], check.problems(results)


def test_every_notebook_page_is_checked_and_shows_figures(results):
    rendered = sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))
    by_path = {r.path: r for r in results}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        page = by_path.get(f"/notebooks/{path.stem}/")
        assert page is not None, f"no page for notebooks/{path.name}"
        if any(r.name == path.name for r in rendered):
            assert page.images > 0, f"/notebooks/{path.stem}/ shows no figure"
