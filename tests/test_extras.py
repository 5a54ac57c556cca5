"""The core install and its extras (``pyproject.toml``, :mod:`pacopt.infra.extras`): what runs
without the optional modules, the one line naming the extra where one is missing, and the
shipped agents' exports that let the core play ``pac-ml`` without torch."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pacopt.infra.errors import InputError
from pacopt.infra.extras import EXTRA_OF, MissingExtra, available, require
from pacopt.learned.agent import CHECKPOINT_DIR
from pacopt.learned.player import (
    EXPORT_VERSION,
    SHIPPED_GRAPHS,
    graph_digest,
    read_shipped_export,
    shipped_export_path,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
BUNDLED = str(EXAMPLES / "bundled.json")
#: What the core install lacks: the learned, ray, plots and parquet extras' modules.
BLOCKED = ("torch", "torch_geometric", "stable_baselines3", "sb3_contrib", "ray", "matplotlib",
           "pyarrow")

#: Runs ``solve`` or ``pacopt`` (argv[1]) with the extras' modules made unimportable, as in
#: the core install; prints on stderr which of them got imported anyway.
_RUN = textwrap.dedent(f"""
    import sys

    BLOCKED = {BLOCKED!r}

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Block())
    from pacopt.cli import pacopt_main, solve_main

    main = solve_main if sys.argv[1] == "solve" else pacopt_main
    try:
        code = main(sys.argv[2:])
    finally:
        print("imported:", sorted(m for m in BLOCKED if m in sys.modules), file=sys.stderr)
    sys.exit(code)
""")


def _core(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """``solve ARGS`` or ``pacopt ARGS`` (argv[0]) as the core install runs it, with a cache
    of its own (no export from a run with torch helps)."""
    env = {**os.environ, "PACOPT_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-c", _RUN, *argv], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)


def _error_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if not line.startswith("imported:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def _unknown_graph_instance(tmp_path: Path) -> Path:
    """The bundled example's cnn with its op times 10% longer: a graph no export embeds."""
    graph = json.loads((EXAMPLES / "graphs" / "cnn.json").read_text())
    for op in graph["ops"]:
        op["forward_ms"] *= 1.1
    data = {"graphs": {"cnn-slow": {"ops": graph["ops"], "deps": graph["deps"],
                                    "join": graph["join"]}},
            "jobs": [{"id": f"j{i}", "graph": "cnn-slow", "arrival_ms": 100 * i,
                      "max_jct_fraction": 0.5} for i in range(3)]}
    path = tmp_path / "unknown.json"
    path.write_text(json.dumps(data))
    return path


def test_the_core_solves_plays_pac_ml_and_validates_without_the_extras(tmp_path):
    """``solve --method pac-ml`` (the shipped agents from their shipped exports), ``tuned`` and
    ``cpsat`` on the bundled example, then ``validate``, with none of torch, torch-geometric,
    stable-baselines3, sb3-contrib and ray importable; pac-ml decides as it does with torch."""
    results = {}
    for method, extra in (("pac-ml", []), ("tuned", []), ("cpsat", ["--time-limit", "5"])):
        out = tmp_path / f"{method}.json"
        done = _core(tmp_path, "solve", BUNDLED, "--method", method, "--out", str(out), *extra)
        assert done.returncode == 0, done.stderr
        assert "imported: []" in done.stderr
        results[method] = json.loads(out.read_text())
        assert results[method]["validated"]
        checked = _core(tmp_path, "pacopt", "validate", BUNDLED, str(out))
        assert checked.returncode == 0, checked.stderr
    assert "general-ddls.zip" in results["pac-ml"]["method"]
    from pacopt.model.instance import load_instance
    from pacopt.solvers.api import solve

    with_torch = solve(load_instance(BUNDLED), "pac-ml")
    assert [[job["degree"], job["start_ms"]] for job in results["pac-ml"]["jobs"]] == [
        [job.degree, job.start_ms] for job in with_torch.jobs]


def test_without_the_learned_extra_training_and_an_unknown_graph_are_one_line(tmp_path):
    """``pacopt train`` and ``pac-ml`` on a graph no shipped export embeds: one line naming the
    learned extra, exit 2; ``cpsat`` on that graph leaves the agent out of its warm start."""
    message = "needs the learned extra: pip install 'pacopt[learned]'"
    done = _core(tmp_path, "pacopt", "train", "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert _error_line(done) == f"error: pac-ml training {message}"
    unknown = _unknown_graph_instance(tmp_path)
    done = _core(tmp_path, "solve", str(unknown), "--method", "pac-ml",
                 "--out", str(tmp_path / "u.json"))
    assert done.returncode == 2
    line = _error_line(done)
    assert line.startswith("error: pac-ml on graph 'cnn-slow'") and line.endswith(message)
    done = _core(tmp_path, "solve", str(unknown), "--method", "cpsat", "--time-limit", "5",
                 "--out", str(tmp_path / "c.json"))
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "c.json").read_text())["validated"]


def test_the_core_runs_a_study_and_names_the_extras_of_its_plots_and_of_ray(tmp_path):
    """A study on the local pool writes its results and ``results.csv``, warns that its plots
    need the plots extra (no parquet without pyarrow); ``--ray`` is one line naming the ray
    extra, exit 2."""
    study = tmp_path / "s.yaml"
    study.write_text(textwrap.dedent(f"""
        name: s
        grids:
          - name: g
            workload:
              graphs: {{cnn: {{file: {EXAMPLES / 'graphs' / 'cnn.json'}}}}}
              distributions: [A, C]
              seeds: 1
              num_jobs: 20
              interarrival_ms: 150
            methods: [tuned, pac-ml]
    """))
    done = _core(tmp_path, "pacopt", "study", str(study), "--out", str(tmp_path / "o"),
                 "--workers", "1", "--quiet")
    assert done.returncode == 0, done.stderr
    assert _error_line(done) == ("warning: the study's plots need the plots extra: pip install "
                                 "'pacopt[plots]'; this run writes the table only")
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["results", "results.csv",
                                                                  "rows.jsonl"]
    from pacopt.analysis.runner import read_table

    assert len(read_table(tmp_path / "o")) == 4
    done = _core(tmp_path, "pacopt", "study", str(study), "--ray", "--out", str(tmp_path / "r"))
    assert done.returncode == 2
    assert _error_line(done) == ("error: pacopt study --ray needs the ray extra: "
                                 "pip install 'pacopt[ray]'")


def test_require_imports_or_names_the_extra(monkeypatch):
    assert require("learned", "numpy") is np
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    assert not available("pyarrow")
    with pytest.raises(MissingExtra) as caught:
        require("parquet", "pyarrow", "a study's results.parquet")
    assert str(caught.value) == ("a study's results.parquet needs the parquet extra: "
                                 "pip install 'pacopt[parquet]'")
    # a command prints it as one line and exits 2; code that falls back on ImportError may
    assert isinstance(caught.value, InputError) and isinstance(caught.value, ImportError)
    assert caught.value.name == "pyarrow"
    with pytest.raises(ModuleNotFoundError) as other:  # not an extra's module: as it is
        require("learned", "no_such_module_of_pacopt")
    assert not isinstance(other.value, MissingExtra)


def test_the_extras_are_the_ones_pyproject_declares():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert set(EXTRA_OF.values()) <= set(extras)
    core = " ".join(project["dependencies"])
    for module in EXTRA_OF:  # none in the core
        assert module.replace("_", "-") not in core and module not in core
    assert "torch==2.13.0" in extras["learned"]  # never unpinned: a CUDA build of GBs
    test = " ".join(extras["test"])
    assert all(name in test for name in extras if name != "test")  # [test] is everything


def test_every_shipped_checkpoint_has_its_export_made_from_it():
    """Each shipped checkpoint's export beside it records the checkpoint's digest and this
    code's export version (play reads it only then), and embeds every shipped graph."""
    zips = sorted(CHECKPOINT_DIR.glob("*.zip"))
    assert zips
    for path in zips:
        export = shipped_export_path(path)
        assert export.is_file(), f"{export.name} missing: python -m tools export_agents"
        with np.load(export, allow_pickle=False) as data:
            assert str(data["checkpoint_sha256"]) == hashlib.sha256(path.read_bytes()).hexdigest()
            assert int(data["export_version"]) == EXPORT_VERSION
            assert set(json.loads(str(data["graphs"]))) == set(SHIPPED_GRAPHS)
        assert read_shipped_export(str(path)) is not None


def test_the_shipped_exports_are_what_todays_code_makes(pipedream_dir, tmp_path, monkeypatch):
    """The shipped exports hold what ``python -m tools export_agents`` writes today: the
    graphs' digests of today's observations, and (with torch) the same head and embeddings,
    to the bit but for another host's float rounding; so play with and without torch decides
    as the compiled networks do."""
    pytest.importorskip("torch")
    from pacopt.learned.agent import load_checkpoint
    from pacopt.learned.features import encode_graph
    from pacopt.learned.player import write_shipped_export
    from pacopt.model.graph_sources import resolve_graph

    monkeypatch.setenv("PACOPT_PIPEDREAM_DIR", str(pipedream_dir))
    monkeypatch.setenv("PACOPT_CACHE_DIR", str(tmp_path / "cache"))
    graphs = {name: resolve_graph(name) for name in SHIPPED_GRAPHS}
    digests = {}
    for name, graph in graphs.items():
        g = encode_graph(graph)
        digests[name] = graph_digest(g.node_x, g.edge_index, g.edge_x, g.sig)
    for path in sorted(CHECKPOINT_DIR.glob("*.zip")):
        copy = tmp_path / path.name
        copy.write_bytes(path.read_bytes())
        shipped = read_shipped_export(str(path))
        assert json.loads(str(shipped["graphs"])) == digests
        write_shipped_export(str(copy), load_checkpoint, graphs)
        made = read_shipped_export(str(copy))
        assert set(made) == set(shipped)
        for key in made:
            if key == "compiled":
                assert _script(made[key]) == _script(shipped[key]), path.name
            elif made[key].dtype.kind == "f":  # computed by torch's float kernels
                assert _same_but_rounding(made[key], shipped[key]), (path.name, key)
            elif key != "info":
                assert np.array_equal(made[key], shipped[key]), (path.name, key)


def _same_but_rounding(made: np.ndarray, shipped: np.ndarray) -> bool:
    """Equal but for float32 rounding: torch picks its kernels by the CPU's instruction set, so
    another host's sums differ in their last bits (up to 4e-7 of the array's largest value
    between two hosts), where a change of code or weights moves them by far more."""
    scale = max(float(np.abs(shipped).max(initial=0.0)), 1e-30)
    return made.shape == shipped.shape and bool(
        np.all(np.abs(made.astype(np.float64) - shipped) <= 4e-6 * scale))


def _script(compiled: np.ndarray) -> dict[str, bytes]:
    """A compiled network's parameters and buffers (its code's names depend on what else the
    process compiled, its debug tables name temporary files, its serialisation id is random)."""
    import torch

    from pacopt.learned.player import _quietly

    module = _quietly(torch.jit.load, io.BytesIO(compiled.tobytes()), map_location="cpu")
    return {name: value.numpy().tobytes() for name, value in module.state_dict().items()}
