"""Install size and time: the core and each extra, each into a fresh virtual environment.

For each target (``core`` = ``pip install -e .``, then ``-e ".[EXTRA]"`` for every extra that
``pyproject.toml`` declares) a new venv is made in a temporary folder and the install timed
(``s``: the whole ``pip install``, the C step loop's build included; downloads come from
pip's cache where it holds them, as on a second machine of a team, so the time is a lower
bound for a first install). Printed per target: the packages installed besides pip and
setuptools, the venv's size on disk (``MB``: every file under the venv, as ``du`` counts
it), and the largest three packages. torch is pinned ``==2.13.0`` by the ``learned`` extra;
where a CPU wheel of it is not at hand, pip fetches the CUDA build and the row says so by its
size.

    python -m benchmarks install                      # every target (about 7 minutes)
    python -m benchmarks install --targets core docs  # some
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import REPOSITORY, add_out_argument, write_results  # noqa: E402

#: Not counted as installed packages: what a new venv holds already.
_BASE = {"pip", "setuptools", "wheel"}


def extras() -> list[str]:
    """The extras ``pyproject.toml`` declares, in its order."""
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    return list(project.get("optional-dependencies", {}))


def _size(path: Path) -> int:
    """Bytes of every regular file under ``path`` (links not followed)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            file = Path(root) / name
            if not file.is_symlink():
                total += file.stat().st_size
    return total


def _largest(site: Path, count: int = 3) -> list[tuple[str, int]]:
    """The ``count`` largest top-level folders of ``site`` (site-packages), by size."""
    sizes = [(p.name, _size(p)) for p in site.iterdir()
             if p.is_dir() and not p.name.endswith((".dist-info", "__pycache__"))]
    return sorted(sizes, key=lambda item: -item[1])[:count]


def measure(target: str) -> dict:
    """Install ``target`` (``core`` or an extra's name) into a fresh venv: seconds, packages,
    MB and the largest packages."""
    spec = "." if target == "core" else f".[{target}]"
    with tempfile.TemporaryDirectory(prefix="pacopt-install-") as folder:
        venv = Path(folder) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        started = time.perf_counter()
        done = subprocess.run([python, "-m", "pip", "install", "--quiet", "-e", spec],
                              cwd=REPOSITORY, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        if done.returncode:
            return {"target": target, "error": done.stderr.strip().splitlines()[-1:]}
        listed = subprocess.run([python, "-m", "pip", "list", "--format=json"],
                                capture_output=True, text=True, check=True)
        names = {p["name"].lower() for p in json.loads(listed.stdout)} - _BASE - {"pacopt"}
        site = next((venv / "lib").glob("python*/site-packages"))
        return {"target": target, "seconds": seconds, "packages": len(names),
                "mb": _size(venv) / 2**20,
                "largest": [(name, size / 2**20) for name, size in _largest(site)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", metavar="TARGET",
                        help="core and extras' names (default: core and every extra)")
    add_out_argument(parser)
    args = parser.parse_args()
    known = ["core", *extras()]
    targets = args.targets or known
    unknown = [t for t in targets if t not in known]
    if unknown:
        parser.error(f"unknown target {unknown[0]!r}; known: {', '.join(known)}")
    rows = []
    print(f"{'target':<10} {'s':>6} {'packages':>8} {'MB':>7}  largest")
    for target in targets:
        row = measure(target)
        if "error" in row:
            print(f"{target:<10} failed: {' '.join(row['error'])}", flush=True)
            continue
        largest = ", ".join(f"{name} {mb:.0f}" for name, mb in row["largest"])
        print(f"{target:<10} {row['seconds']:6.1f} {row['packages']:8d} {row['mb']:7.0f}  "
              f"{largest}", flush=True)
        label = "`pip install -e .`" if target == "core" else f'`pip install -e ".[{target}]"`'
        rows.append([label, f"{row['seconds']:.0f} s", row["packages"], round(row["mb"]),
                     ", ".join(f"{name} {mb:.0f}" for name, mb in row["largest"])])
    if args.out and rows:
        write_results(args.out, "Install size and time, each into a fresh venv",
                      ["install", "time", "packages", "MB", "largest three (MB)"], rows,
                      notes="downloads from pip's cache where it held them; torch the local "
                            "CPU wheel of 2.13.0")


if __name__ == "__main__":
    main()
