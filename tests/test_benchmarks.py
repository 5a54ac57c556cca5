"""The benchmark suite: ``python -m benchmarks`` lists every script and runs each one's
``--help``; no benchmark imports another; data are found in one place (``benchmarks.common``)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
TOOLS = ROOT / "tools"
SCRIPTS = sorted(BENCHMARKS.glob("bench_*.py"))
NAMES = [p.stem.removeprefix("bench_") for p in SCRIPTS]
TOOL_SCRIPTS = sorted(p for p in TOOLS.glob("*.py") if not p.stem.startswith("_"))
#: The suite's own modules, which the scripts may import: never another script.
SUPPORT = {"benchmarks", "benchmarks.common", "benchmarks.processes"}


def suite(*args: str, package: str = "benchmarks") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", package, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; ``from . import x`` as ``.x``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


def test_every_file_of_benchmarks_is_a_script_or_the_suite():
    others = {p.name for p in BENCHMARKS.glob("*.py")} - {p.name for p in SCRIPTS}
    assert others == {"__init__.py", "__main__.py", "common.py", "processes.py"}


def test_the_listing_names_every_script_with_a_line_of_its_docstring():
    done = suite()
    assert done.returncode == 0, done.stderr
    listed = dict(re.findall(r"^  (\S+)\s+(.+)$", done.stdout, re.MULTILINE))
    assert sorted(listed) == sorted(NAMES)
    assert all(listed.values())
    tools = suite(package="tools")
    assert tools.returncode == 0, tools.stderr
    assert sorted(re.findall(r"^  (\S+)", tools.stdout, re.MULTILINE)) == \
        sorted(p.stem for p in TOOL_SCRIPTS)


@pytest.mark.parametrize("name", NAMES)
def test_help_of_every_benchmark(name):
    done = suite(name, "--help")
    assert done.returncode == 0, done.stderr
    assert f"python -m benchmarks {name}" in done.stdout


@pytest.mark.parametrize("path", TOOL_SCRIPTS, ids=lambda p: p.stem)
def test_help_of_every_tool(path):
    done = suite(path.stem, "--help", package="tools")
    assert done.returncode == 0, done.stderr


def test_an_unknown_name_is_one_error_line():
    done = suite("no-such-benchmark")
    assert done.returncode == 2
    assert done.stderr.startswith("error: no benchmarks script 'no-such-benchmark'")


@pytest.mark.parametrize("path", SCRIPTS + TOOL_SCRIPTS, ids=lambda p: p.stem)
def test_no_script_imports_another(path):
    scripts = {p.stem for p in SCRIPTS + TOOL_SCRIPTS} | {"heldout", "faults", "tune_baselines"}
    for name in imported(path):
        parts = name.lstrip(".").split(".")
        if name in SUPPORT or name.startswith(("benchmarks.common.", "benchmarks.processes.")):
            continue
        assert not set(parts) & scripts, f"{path.name} imports {name}"
        assert parts[0] not in ("benchmarks", "tools"), f"{path.name} imports {name}"


@pytest.mark.parametrize("path", SCRIPTS + TOOL_SCRIPTS, ids=lambda p: p.stem)
def test_no_script_spells_the_data_path(path):
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"shared[\"']?\s*[/)]\s*[\"']?data", text), path.name
    assert "PACOPT_PIPEDREAM_DIR\", " not in text  # no setdefault of its own


def test_results_file_has_the_docs_format(tmp_path):
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.common import command_line, write_results
    finally:
        sys.path.remove(str(ROOT))
    out = tmp_path / "docs" / "results" / "t.json"
    write_results(out, "A table", ["method", "A"], [["`x`", 0.5], ["y", float("nan")]],
                  notes="a note", command="python -m benchmarks fresh")
    data = json.loads(out.read_text())
    assert set(data) == {"title", "columns", "rows", "command", "measured", "notes"}
    assert data["rows"] == [["`x`", 0.5], ["y", None]]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", data["measured"])
    with pytest.raises(ValueError):
        write_results(out, "bad", ["a", "b"], [["one cell"]])
    assert command_line(["benchmarks/bench_fresh.py", "--seeds", "2", "--out", "x.json"]) == \
        "python -m benchmarks fresh --seeds 2"
    assert command_line(["python -m benchmarks scale", "--out=x.json", "--sizes", "32"]) == \
        "python -m benchmarks scale --sizes 32"


def test_the_scale_benchmark_repeats_in_fresh_folders_and_keeps_the_fastest(monkeypatch):
    """``bench_scale.py --repeat``: each repeat a cold run in a fresh cache folder then a warm
    one in the same; the fastest seconds and the most memory kept; a repeat that accepts other
    jobs is an error, not a faster row."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import bench_scale

    runs = iter([(3.0, 100), (2.0, 90), (2.5, 120), (2.2, 80)])  # (seconds, MB): cold, warm...
    folders = []

    def fake_run(command, env, **_):
        folders.append(env["PACOPT_CACHE_DIR"])
        seconds, mb = next(runs)
        row = {"seconds": seconds, "rss_mb": mb, "accepted": 7, "blocking": 0.3}
        return subprocess.CompletedProcess(command, 0, stdout=json.dumps(row) + "\n", stderr="")

    monkeypatch.setattr(bench_scale.subprocess, "run", fake_run)
    row = bench_scale.measure({"method": "tuned"}, repeat=2)
    assert (row["cold_s"], row["seconds"], row["cold_mb"], row["rss_mb"]) == (2.5, 2.0, 120, 90)
    assert folders[0] == folders[1] != folders[2] == folders[3]

    def flaky_run(command, env, **_):
        flaky_run.calls += 1
        row = {"seconds": 1.0, "rss_mb": 1, "accepted": 7 + (flaky_run.calls > 2),
               "blocking": 0.3}
        return subprocess.CompletedProcess(command, 0, stdout=json.dumps(row) + "\n", stderr="")

    flaky_run.calls = 0
    monkeypatch.setattr(bench_scale.subprocess, "run", flaky_run)
    assert "not reproducible" in bench_scale.measure({"method": "tuned"}, repeat=2)["error"][0]
    flaky_run.calls = 0
    assert "error" not in bench_scale.measure({"method": "cpsat"}, repeat=2)  # run once
    assert flaky_run.calls == 1
