"""Open every page of the documentation site in a real browser; fail on what a reader sees broken.

    python docs/hooks/browser_check.py [--site DIR] [--no-strict] [--shots DIR] [--only TEXT]

Builds the site (``mkdocs build --strict`` into a temporary folder, or takes ``--site DIR``
already built), serves it on 127.0.0.1 with Python's ``http.server`` in a thread, and opens every
page (every page of the nav, the notebooks among them, and any other page the build made) in
headless Chromium (Debian's ``/usr/bin/chromium``, driven with Playwright's Python package; no
browser of Playwright's own). A page fails on:

- an image that did not load (``naturalWidth == 0`` once the page is loaded);
- a link to the site (every same-site ``href`` on the page) that answers 404 or another error;
- a console error or an uncaught script error;
- a request to the site (a stylesheet, a script, an image) that answers an error.

Requests that leave the site (the theme's web fonts, a CDN script) are answered empty by the
check, so the result does not depend on the network; the table counts them. A link to a missing
``#anchor`` of a page is listed as a warning. A full-page screenshot of each page is saved under
``browser-shots/`` (``--shots``). The table printed has one row per page: images loaded/total,
links checked, errors. The exit status is 1 when a page failed. ``tests/test_browser.py`` (marked
``browser``, deselected by default: ``python -m pytest -m browser``) runs the same check.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self
from urllib.parse import unquote, urldefrag

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1280, "height": 900}

#: Resolves once every <img> of the page has loaded or failed; returns each one's state.
IMAGES_JS = """async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => {
    i.addEventListener('load', r, {once: true}); i.addEventListener('error', r, {once: true});
  })));
  return imgs.map(i => ({src: (i.currentSrc || i.src).slice(0, 120), width: i.naturalWidth}));
}"""
LINKS_JS = "() => Array.from(document.querySelectorAll('a[href]'), a => a.href)"


@dataclass
class PageResult:
    path: str
    images: int = 0
    broken_images: list[str] = field(default_factory=list)
    links: int = 0
    broken_links: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    missing_anchors: list[str] = field(default_factory=list)
    external: int = 0
    seconds: float = 0.0
    shot: str = ""

    @property
    def errors(self) -> list[str]:
        return ([f"image did not load: {s}" for s in self.broken_images]
                + [f"broken link: {s}" for s in self.broken_links]
                + [f"console: {s}" for s in self.console]
                + [f"request failed: {s}" for s in self.failed_requests])


def build(dest: Path, strict: bool = True) -> float:
    """``mkdocs build`` of the repository into ``dest``; raises when it fails."""
    start = time.perf_counter()
    command = [sys.executable, "-m", "mkdocs", "build", "-q", "-d", str(dest),
               "--strict" if strict else "--no-strict"]
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")  # Material's banner about MkDocs 2
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False,
                          env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[2:])} failed:\n{done.stdout}{done.stderr}")
    if done.stderr.strip():
        print(done.stderr.strip(), file=sys.stderr)
    return time.perf_counter() - start


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):  # the server's log of every request: not wanted
        pass


class Server:
    """The built site on ``http://127.0.0.1:<free port>/``, served from a thread."""

    def __init__(self, site: Path):
        handler = functools.partial(_Quiet, directory=str(site))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def site_pages(site: Path) -> list[str]:
    """Every page the build made, as URL paths: the home page first, then in path order."""
    pages = []
    for path in sorted(site.rglob("index.html")):
        rel = path.parent.relative_to(site).as_posix()
        if rel.split("/")[0] in ("assets", "search"):
            continue
        pages.append("" if rel == "." else rel + "/")
    return sorted(pages, key=lambda p: (p != "", p))


class LinkChecker:
    """Status and anchors of same-site URLs, each fetched once."""

    def __init__(self):
        self.status: dict[str, int] = {}
        self.ids: dict[str, set[str]] = {}

    def get(self, url: str) -> int:
        if url not in self.status:
            try:
                with urllib.request.urlopen(url, timeout=10) as answer:
                    self.status[url] = answer.status
                    if "html" in answer.headers.get("Content-Type", ""):
                        text = answer.read().decode("utf-8", "replace")
                        self.ids[url] = set(re.findall(r'\b(?:id|name)="([^"]+)"', text))
            except urllib.error.HTTPError as error:
                self.status[url] = error.code
            except OSError:
                self.status[url] = 0
        return self.status[url]

    def has_anchor(self, url: str, anchor: str) -> bool:
        ids = self.ids.get(url)
        return ids is None or unquote(anchor) in ids  # not HTML (a download): nothing to check


def shot_name(path: str) -> str:
    return (path.strip("/").replace("/", "_") or "index") + ".png"


def check_page(page, base: str, path: str, links: LinkChecker, shots: Path | None) -> PageResult:
    result = PageResult(path="/" + path)
    console: list[str] = []
    failed: list[str] = []
    external = [0]

    def on_console(msg):
        if msg.type == "error":
            console.append(msg.text[:300])

    def on_response(response):
        if response.url.startswith(base) and response.status >= 400:
            failed.append(f"{response.status} {response.url[len(base) - 1:]}")

    def on_route(route):
        if route.request.url.startswith(base) or route.request.url.startswith("data:"):
            route.continue_()
        else:  # the network is not part of the site: answer empty, count it
            external[0] += 1
            route.fulfill(status=200, body="")

    page.on("console", on_console)
    page.on("pageerror", lambda error: console.append(f"uncaught: {str(error)[:300]}"))
    page.on("response", on_response)
    page.route("**/*", on_route)
    start = time.perf_counter()
    try:
        page.goto(base + path, wait_until="load", timeout=60_000)
        try:
            page.wait_for_load_state("networkidle", timeout=15_000)
        except Exception:  # noqa: BLE001,S110 -- a page that keeps polling: check what loaded
            pass
        images = page.evaluate(IMAGES_JS)
        result.images = len(images)
        result.broken_images = [i["src"].replace(base, "/", 1) for i in images if not i["width"]]
        hrefs = page.evaluate(LINKS_JS)
        if shots is not None:
            target = shots / shot_name(path)
            page.screenshot(path=str(target), full_page=True)
            result.shot = str(target)
    finally:
        page.unroute("**/*")
        page.remove_listener("console", on_console)
        page.remove_listener("response", on_response)
    same_site = sorted({h for h in hrefs if h.startswith(base)})
    result.links = len(same_site)
    for href in same_site:
        url, anchor = urldefrag(href)
        status = links.get(url)
        if status >= 400 or status == 0:
            result.broken_links.append(f"{status} {href[len(base) - 1:]}")
        elif anchor and not links.has_anchor(url, anchor):
            result.missing_anchors.append(href[len(base) - 1:])
    result.console = console
    result.failed_requests = failed
    result.external = external[0]
    result.seconds = time.perf_counter() - start
    return result


def check_site(site: Path, shots: Path | None, only: str = "",
               chromium: str = CHROMIUM) -> list[PageResult]:
    from playwright.sync_api import sync_playwright

    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
    paths = [p for p in site_pages(site) if only in p]
    results = []
    with Server(site) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=FLAGS)
        try:
            context = browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            links = LinkChecker()
            for path in paths:
                try:
                    results.append(check_page(page, server.url, path, links, shots))
                except Exception as error:  # noqa: BLE001 -- the page did not open: it failed
                    failed = PageResult(path="/" + path)
                    failed.console.append(f"could not open: {str(error)[:300]}")
                    results.append(failed)
        finally:
            browser.close()
    return results


def table(results: list[PageResult]) -> str:
    lines = [f"{'page':52} {'images':>7} {'links':>6} {'external':>8} {'errors':>6} {'s':>5}"]
    for r in results:
        lines.append(f"{r.path:52} {r.images - len(r.broken_images):>3}/{r.images:<3} "
                     f"{r.links:>6} {r.external:>8} {len(r.errors):>6} {r.seconds:5.1f}")
    return "\n".join(lines)


def problems(results: list[PageResult]) -> str:
    lines = []
    for r in results:
        for error in r.errors:
            lines.append(f"FAIL {r.path}: {error}")
        for anchor in r.missing_anchors:
            lines.append(f"warn {r.path}: link to a missing anchor: {anchor}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, help="an already built site (default: build one)")
    parser.add_argument("--no-strict", action="store_true",
                        help="build without --strict (to look at the pages despite warnings)")
    parser.add_argument("--shots", type=Path, default=ROOT / "browser-shots",
                        help="folder of the screenshots (default browser-shots/)")
    parser.add_argument("--only", default="", help="only the pages whose path contains this")
    parser.add_argument("--chromium", default=CHROMIUM, help=f"the browser (default {CHROMIUM})")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pacopt-site-") as tmp:
        site = args.site
        if site is None:
            site = Path(tmp) / "site"
            try:
                seconds = build(site, strict=not args.no_strict)
            except RuntimeError as error:
                print(error, file=sys.stderr)
                return 1
            print(f"built the site in {seconds:.1f} s")
        results = check_site(site, args.shots, args.only, args.chromium)
    print(table(results))
    report = problems(results)
    if report:
        print(report)
    failed = [r for r in results if r.errors]
    print(f"{len(results)} pages, {sum(r.links for r in results)} links, "
          f"{sum(r.images for r in results)} images checked, {len(failed)} failed, "
          f"in {time.perf_counter() - start:.1f} s; screenshots in {args.shots}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
