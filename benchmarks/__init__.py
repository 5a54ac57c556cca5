"""pacopt's benchmark suite: one module ``bench_NAME.py`` per measurement.

    python -m benchmarks                 # every benchmark: its name and what it measures
    python -m benchmarks NAME [ARGS...]  # run one (``python -m benchmarks NAME --help``)

Run from the repository's root. What the benchmarks share (where the data are, the seed sets,
``--out``) is in :mod:`benchmarks.common`; no benchmark imports another. The scripts that make
the project's artefacts rather than measure are in ``tools/`` (``python -m tools``).
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def scripts(folder: Path, prefix: str = "") -> dict[str, Path]:
    """The runnable modules of ``folder`` by name (file stem without ``prefix``): the
    ``PREFIX*.py`` files, less the package's own (``__init__``, ``__main__``, ``common``...)
    when there is no prefix."""
    found = {}
    for path in sorted(folder.glob(f"{prefix}*.py")):
        if path.stem.startswith("_") or (not prefix and path.stem in SUPPORT):
            continue
        found[path.stem[len(prefix):]] = path
    return found


#: Modules of a suite's folder that are not runnable scripts.
SUPPORT = ("common", "processes")


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, on one line, without its ``code`` marks
    (read, not imported)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.split("\n\n")[0].split()).replace("``", "")
    return (first[:first.index(". ") + 1] if ". " in first else first).rstrip(":")


def run_suite(package: str, folder: Path, prefix: str, argv: list[str] | None = None) -> int:
    """``python -m PACKAGE``: list the scripts; ``python -m PACKAGE NAME ARGS``: run one."""
    argv = sys.argv[1:] if argv is None else argv
    found = scripts(folder, prefix)
    if not argv or argv[0] in ("-h", "--help", "list"):
        width = max(map(len, found), default=0)
        print(f"python -m {package} NAME [--help | ARGS...], NAME one of:\n")
        for name, path in found.items():
            print(f"  {name:<{width}}  {summary(path)}")
        return 0
    name, args = argv[0], argv[1:]
    if name not in found:
        print(f"error: no {package} script '{name}'; python -m {package} lists them",
              file=sys.stderr)
        return 2
    module = importlib.import_module(f"{package}.{found[name].stem}")
    sys.argv = [f"python -m {package} {name}", *args]  # argparse's prog and --help
    code = module.main()
    return code if isinstance(code, int) else 0
