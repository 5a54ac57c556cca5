"""Fuzzing the front door: instances, graphs, result files and flags, generated
malformed in every field (types, signs, NaN/inf, sizes, missing and unknown keys, cycles, broken
references, wrong encodings), through ``solve``, ``pacopt validate`` and ``pacopt profile``.

The property: exit 0 with a validated result, or exit 2 with one line on stderr and no file; for
``pacopt validate`` also exit 1 with the problems listed; never a traceback, never long for a
rejected input. The default run generates :data:`DEFAULT_CASES` cases in process (derandomised,
so CI sees the same ones) plus a sample through real processes; ``-m fuzz`` runs many more, with
fresh randomness.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pacopt.cli import pacopt_main, solve_main
from pacopt.model.input_spec import MAX_JOBS, MAX_SERVERS

# ----- the seeds every case is a mutation of ----------------------------------------------------
GRAPH = {"ops": [{"id": "a", "forward_ms": 1.0, "backward_ms": 2.0, "activation_bytes": 1e6,
                  "parameter_bytes": 1e5, "kind": "Conv2d"},
                 {"id": "b", "forward_ms": 0.5, "backward_ms": 1.0, "activation_bytes": 4e5,
                  "parameter_bytes": 0},
                 {"id": "c", "forward_ms": 0.2, "backward_ms": 0.4, "activation_bytes": 1e5,
                  "parameter_bytes": 10}],
         "deps": [["a", "b"], ["a", "c"], ["b", "c"]], "join": "c", "name": "g"}
INSTANCE = {
    "cluster": {"topology": "ramp", "communication_groups": 2, "racks_per_group": 2,
                "servers_per_rack": 2, "channels": 1, "total_node_bandwidth": 1.6e12,
                "propagation_latency": 5e-8, "worker_io_latency": 1e-7, "worker_memory": 8e10},
    "model": {"preset": "ddls", "max_partitions_per_op": 8, "quantum_ms": 0.01,
              "training_steps": 50},
    "graphs": {"g": GRAPH, "h": {"file": "h.json"}},
    "jobs": [{"id": "j0", "graph": "g", "arrival_ms": 0, "max_jct_fraction": 0.5},
             {"id": "j1", "graph": "h", "arrival_ms": 5, "max_jct_fraction": 0.3}],
    "workload": {"graphs": ["g", "h"], "weights": [1, 2], "num_jobs": 4, "interarrival_ms": 3,
                 "max_jct_fraction": {"uniform": [0.1, 1.0], "decimals": 2}, "seed": 0},
    "horizon_ms": 1e5,
}
PIPEDREAM = ("node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, "
             "activation_size=602112.0, parameter_size=0.000\n"
             "node2 -- Conv2d(3, 64) -- forward_compute_time=1.500, backward_compute_time=3.000, "
             "activation_size=[774400.0; 8.0], parameter_size=92928.000\n"
             "node3 -- ReLU() -- forward_compute_time=0.200, backward_compute_time=0.300, "
             "activation_size=774400.0, parameter_size=0.000\n"
             "\tnode1 -- node2\n\tnode2 -- node3\n")

#: In-process cases per command in the default run (1,150 in all), and in the ``fuzz`` run.
DEFAULT_CASES = {"solve": 450, "validate": 350, "profile": 250, "flags": 100}
CAMPAIGN_FACTOR = 20
SLOW_REJECTION_S = 5.0  # CPU seconds: a rejected input must be turned away faster than this

# Values that are wrong somewhere, or right but at an edge: types, signs, NaN/inf, sizes just past
# pacopt's limits. No value is a valid-but-huge workload (say 500,000 jobs): that is real work.
NUMBERS = [-1, 0, 1, 2, 3, 0.5, -0.5, 1e-9, 1e12, 1e308, -1e308, 2**63, -(2**63), 10**30,
           MAX_JOBS + 1, MAX_SERVERS + 1, math.nan, math.inf, -math.inf]
OTHERS = [None, True, False, "", "x", "1", "nan", "\u00e9\u0000", [], [1], [None, "a"], {},
          {"a": 1}, {"uniform": [0.1]}, {"paper": "E"}, ["a", "a"], ["c", "a"]]
# (copies: a drawn list or object is edited by later mutations and must not be shared)
BAD = (st.sampled_from(NUMBERS + OTHERS).map(copy.deepcopy) | st.floats() | st.integers()
       | st.text(max_size=8))


def _paths(value, prefix=()):
    """Every path (tuple of keys/indices) into a JSON value, the root included."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, prefix + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _paths(child, prefix + (i,))


def _at(value, path):
    for part in path:
        value = value[part]
    return value


@st.composite
def mutated(draw, seed, max_mutations=3):
    """``seed`` with 1-3 mutations: a value replaced, a key or list entry removed, an unknown key
    added, a list entry duplicated (duplicate ids, a second edge), a dependency reversed or
    looped (cycles), a reference renamed (broken references)."""
    data = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = list(_paths(data))
        path = draw(st.sampled_from(paths))
        kind = draw(st.sampled_from(["replace", "replace", "tweak", "tweak", "delete", "unknown",
                                     "duplicate", "cycle", "rename"]))
        if kind == "replace" or not path:
            if not path:
                data = draw(BAD)
                continue
            _at(data, path[:-1])[path[-1]] = draw(BAD)
            continue
        parent = _at(data, path[:-1])
        target = _at(data, path)
        if kind == "delete":
            del parent[path[-1]]
        elif kind == "unknown" and isinstance(target, dict):
            target[draw(st.sampled_from(["extra", "Graphs", "num_job", "id", ""]))] = draw(BAD)
        elif kind == "duplicate" and isinstance(target, list) and target:
            target.append(copy.deepcopy(draw(st.sampled_from(target))))
        elif kind == "cycle" and isinstance(data, dict) and isinstance(data.get("deps"), list):
            data["deps"].append(draw(st.sampled_from([["c", "a"], ["a", "a"], ["b", "a"]])))
        elif (kind == "tweak" and isinstance(target, (int, float))
              and not isinstance(target, bool)):
            # a plausible value: keeps most of the instance valid, so the solve path runs too
            factor = draw(st.sampled_from([0, 0.5, 2, 3, 10]))
            parent[path[-1]] = type(target)(target * factor) if factor else 0
        elif kind == "rename" and isinstance(target, str):
            parent[path[-1]] = draw(st.sampled_from(["zz", target + " ", target.upper(), ""]))
    return data


ENCODINGS = st.sampled_from(["utf-8", "utf-8", "utf-8", "utf-16", "latin-1", "truncated",
                             "garbage", "nan-literal", "empty"])


def _write(path: Path, data, encoding: str) -> None:
    """Write ``data`` as JSON in ``encoding`` (or broken in one of the named ways)."""
    text = json.dumps(data, ensure_ascii=False)  # NaN and Infinity literals stay in
    if encoding == "truncated":
        path.write_bytes(text.encode()[: max(1, len(text) // 2)])
    elif encoding == "garbage":
        path.write_bytes(b"\xff\xfe\x00\x81" + text.encode()[:20])
    elif encoding == "nan-literal":
        path.write_text(text.replace("0.5", "NaN", 1).replace("1e5", "Infinity", 1))
    elif encoding == "empty":
        path.write_bytes(b"")
    elif encoding == "latin-1":
        path.write_bytes(text.replace('"a"', '"\u00e9"').encode("latin-1", "replace"))
    else:
        path.write_text(text, encoding=encoding)


# ----- the property --------------------------------------------------------------------------------
def run(main, argv) -> tuple[int, str, str, float]:
    """``main(argv)`` in process: (exit code, stdout, stderr, CPU seconds). CPU, not wall-clock
    time: the machine may be shared, and a stall is not the input's doing."""
    out, err = io.StringIO(), io.StringIO()
    started = time.process_time()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue(), time.process_time() - started


def check_rejection(code: int, out: str, err: str, seconds: float, folder: Path,
                    before: set) -> None:
    """Exit 2: one ``error:`` line, nothing on stdout, no new file, quickly."""
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert out == ""
    assert set(folder.iterdir()) == before, "a rejected input left a file"
    assert seconds < SLOW_REJECTION_S, f"rejected after {seconds:.1f} s"


def check_no_traceback(code: int, out: str, err: str) -> None:
    assert "Traceback" not in err + out, err
    assert code in (0, 1, 2), (code, err)
    event(f"exit {code}")  # --hypothesis-show-statistics: how often each outcome came up


COUNT = {name: 0 for name in DEFAULT_CASES}


def _settings(command: str, campaign: bool = False):
    cases = DEFAULT_CASES[command] * (CAMPAIGN_FACTOR if campaign else 1)
    return settings(max_examples=cases, deadline=None, derandomize=not campaign, database=None,
                    suppress_health_check=list(HealthCheck))


def fuzz_solve(instance, graph, encoding, method) -> None:
    """One ``solve`` case (module doc)."""
    COUNT["solve"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _write(folder / "i.json", instance, encoding)
        _write(folder / "h.json", graph, "utf-8")
        before = set(folder.iterdir())
        out = folder / "r.json"
        code, stdout, stderr, seconds = run(solve_main, [str(folder / "i.json"), "--out", str(out),
                                                         "--method", method, "--seed", "1",
                                                         "--quiet"])
        check_no_traceback(code, stdout, stderr)
        assert code != 1, f"a method's own solution failed validation: {stderr}"
        if code == 2:
            check_rejection(code, stdout, stderr, seconds, folder, before)
            return
        assert json.loads(out.read_text())["validated"] is True
        assert not (folder / "r.json.tmp").exists()
        # the written file stands on its own: `pacopt validate` accepts it
        code, stdout, stderr, _ = run(pacopt_main, ["validate", str(folder / "i.json"), str(out)])
        assert (code, stdout.strip()) == (0, "valid"), stdout + stderr


def fuzz_validate(result, encoding) -> None:
    """One ``pacopt validate`` case on a mutated result of the seed instance."""
    COUNT["validate"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _write(folder / "i.json", INSTANCE, "utf-8")
        _write(folder / "h.json", GRAPH, "utf-8")
        _write(folder / "r.json", result, encoding)
        before = set(folder.iterdir())
        code, stdout, stderr, seconds = run(pacopt_main, ["validate", str(folder / "i.json"),
                                                          str(folder / "r.json")])
        check_no_traceback(code, stdout, stderr)
        if code == 2:
            check_rejection(code, stdout, stderr, seconds, folder, before)
        elif code == 1:
            lines = stdout.strip().splitlines()
            assert lines[-1] == f"INVALID: {len(lines) - 1} problem(s)", stdout
        else:
            assert stdout.strip() == "valid" and stderr == ""


def fuzz_profile(case, encoding) -> None:
    """One ``pacopt profile`` case: ``(graph, "json")``, an inline-graph file, or ``(text,
    "txt")``, a PipeDream profile."""
    COUNT["profile"] += 1
    graph, form = case
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / f"g.{form}"
        if form == "json":
            _write(path, graph, encoding)
        else:
            path.write_bytes(graph.encode("utf-16" if encoding == "utf-16" else "utf-8",
                                          "surrogatepass"))
        before = set(folder.iterdir())
        code, stdout, stderr, seconds = run(pacopt_main, ["profile", str(path), "--json"])
        check_no_traceback(code, stdout, stderr)
        assert code != 1
        if code == 2:
            check_rejection(code, stdout, stderr, seconds, folder, before)
        else:
            rows = json.loads(stdout)
            assert rows and all(row["degree"] >= 1 for row in rows)


def pipedream_texts():
    """PipeDream profiles with lines dropped, duplicated, cut or spliced with junk."""
    lines = PIPEDREAM.splitlines()
    junk = st.sampled_from(["node9 -- node1", "node1 -- node1", "node3 -- node1", "nodeX -- a -- b",
                            "node4 -- T -- forward_compute_time=nan, backward_compute_time=1, "
                            "activation_size=[a; b], parameter_size=-1",
                            "node4 -- T -- forward_compute_time=1e400, backward_compute_time=1, "
                            "activation_size=[], parameter_size=[1; [2]]",
                            " -- ", "", "\x00\xff", "node1 -- Input0 -- x=1"])
    return st.lists(st.sampled_from(lines) | junk, min_size=0, max_size=8).map("\n".join)


FLAGS = st.lists(st.sampled_from(["--seed", "--time-limit", "--threads", "--method", "--out",
                                  "--json", "--quiet", "-1", "nan", "inf", "0", "1e400", "x",
                                  "random", "fixed:", "min-feasible", "--", "-h", "/", ""]),
                 max_size=5)


def fuzz_flags(flags) -> None:
    """``solve`` with generated flags on the seed instance."""
    COUNT["flags"] += 1
    if "-h" in flags:
        return  # help is exit 0 by argparse's own route, tested in test_cli
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _write(folder / "i.json", INSTANCE, "utf-8")
        _write(folder / "h.json", GRAPH, "utf-8")
        argv = [str(folder / "i.json"), *flags]
        if "--out" not in flags:
            argv += ["--out", str(folder / "r.json")]
        before = set(folder.iterdir())
        with contextlib.chdir(folder):  # a relative --out lands in the case's own folder
            code, stdout, stderr, seconds = run(solve_main, argv + ["--quiet"])
        check_no_traceback(code, stdout, stderr)
        assert code != 1
        if code == 2:
            check_rejection(code, stdout, stderr, seconds, folder, before)


@pytest.fixture(scope="module")
def seed_result() -> dict:
    """A valid ``solve`` result of the seed instance (what the validate cases mutate)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _write(folder / "i.json", INSTANCE, "utf-8")
        _write(folder / "h.json", GRAPH, "utf-8")
        code, _, err, _ = run(solve_main, [str(folder / "i.json"), "--out", str(folder / "r.json"),
                                           "--quiet", "--seed", "0"])
        assert code == 0, err
        result = json.loads((folder / "r.json").read_text())
    assert result["accepted"] >= 1 and result["accepted"] < result["arrived"]
    return result


METHODS = st.sampled_from(["min-feasible", "para-max", "random", "sequential"])
GRAPHS = (mutated(GRAPH).map(lambda graph: (graph, "json"))
          | pipedream_texts().map(lambda text: (text, "txt")))
ONLINE = dict(instance=mutated(INSTANCE), graph=mutated(GRAPH, 1), encoding=ENCODINGS,
              method=METHODS)


# ----- the default run -----------------------------------------------------------------------------
@_settings("solve")
@given(**ONLINE)
def test_solve_fuzz(instance, graph, encoding, method):
    fuzz_solve(instance, graph, encoding, method)


def test_validate_fuzz(seed_result):
    @_settings("validate")
    @given(result=mutated(seed_result), encoding=ENCODINGS)
    def case(result, encoding):
        fuzz_validate(result, encoding)
    case()


@_settings("profile")
@given(case=GRAPHS, encoding=ENCODINGS)
def test_profile_fuzz(case, encoding):
    fuzz_profile(case, encoding)


@_settings("flags")
@given(flags=FLAGS)
def test_flags_fuzz(flags):
    fuzz_flags(flags)


def test_fuzz_case_count():
    """Runs after the fuzz tests above (file order): the default run did its 1,000+ cases."""
    ran = sum(COUNT.values())
    print(f"fuzz cases run: {COUNT} = {ran}")
    if all(COUNT.values()):  # the whole file ran, not a -k selection
        assert ran >= 1000


# ----- a sample through real processes -------------------------------------------------------------
SUBPROCESS_CASES = [
    ("solve", {"workload": {"graphs": ["g"], "num_jobs": 10**12, "interarrival_ms": 1,
                            "max_jct_fraction": 0.5}}, "workload.num_jobs"),
    ("solve", {"cluster": {"communication_groups": 100000, "racks_per_group": 1000,
                           "servers_per_rack": 2}}, "cluster.communication_groups"),
    ("solve", {"horizon_ms": "NaN"}, "horizon_ms"),
    ("solve", {"graphs": {"g": {**GRAPH, "deps": GRAPH["deps"] + [["c", "a"]]}}}, "cycle"),
    ("solve", {"jobs": [{"id": "j0", "graph": "nope", "arrival_ms": 0,
                         "max_jct_fraction": 0.5}]}, "unknown graph 'nope'"),
    ("validate", b"\xff\xfe\x00garbage", "not UTF-8"),
    ("profile", b"node1 -- a -- b\n", "g.txt"),
]


@pytest.mark.parametrize("command, change, fragment", SUBPROCESS_CASES,
                         ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(SUBPROCESS_CASES)])
def test_real_processes_reject_in_one_line(command, change, fragment, tmp_path):
    """Through the console entry points: exit 2, one line, no file, fast and small."""
    _write(tmp_path / "h.json", GRAPH, "utf-8")
    _write(tmp_path / "i.json", {**INSTANCE, **change} if command == "solve" else INSTANCE,
           "utf-8")
    if command == "solve":
        argv = ["solve_main", str(tmp_path / "i.json"), "--out", str(tmp_path / "r.json")]
    elif command == "validate":
        (tmp_path / "r.json").write_bytes(change)
        argv = ["pacopt_main", "validate", str(tmp_path / "i.json"), str(tmp_path / "r.json")]
    else:
        (tmp_path / "g.txt").write_bytes(change)
        argv = ["pacopt_main", "profile", str(tmp_path / "g.txt")]
    before = set(tmp_path.iterdir())
    started = time.perf_counter()
    code, stdout, stderr, peak_mb = _child(argv)
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], stderr
    assert stdout == "" and set(tmp_path.iterdir()) == before
    assert time.perf_counter() - started < 60  # interpreter start and imports, a loaded machine
    assert peak_mb < 400, f"the process peaked at {peak_mb:.0f} MB"


#: A child's entry: run ``pacopt.cli.<argv[0]>`` on ``argv[1:]``, and at exit write its
#: peak resident memory (kB) where ``PACOPT_TEST_PEAK`` says. Measured in the child, after exec:
#: a forked child's rusage starts from the parent's resident size, which says nothing here.
CHILD = """import atexit, os, re, sys
def peak():
    status = open("/proc/self/status").read()
    open(os.environ["PACOPT_TEST_PEAK"], "w").write(re.search(r"VmHWM:\\s+(\\d+)", status)[1])
atexit.register(peak)
from pacopt import cli
sys.exit(getattr(cli, sys.argv[1])(sys.argv[2:]))
"""


def _child(argv: list[str]) -> tuple[int, str, str, float]:
    """``pacopt.cli.<argv[0]>(argv[1:])`` in a child process: (exit code, stdout,
    stderr, its peak resident MB)."""
    with tempfile.TemporaryDirectory() as tmp:
        peak_file = Path(tmp) / "peak"
        done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True,
                              text=True, timeout=300,
                              env={**os.environ, "PACOPT_TEST_PEAK": str(peak_file)})
        return (done.returncode, done.stdout, done.stderr, float(peak_file.read_text()) / 1024)


# ----- the campaign (-m fuzz) ------------------------------------------------------------------------
@pytest.mark.fuzz
@_settings("solve", campaign=True)
@given(**ONLINE)
def test_solve_campaign(instance, graph, encoding, method):
    fuzz_solve(instance, graph, encoding, method)


@pytest.mark.fuzz
def test_validate_campaign(seed_result):
    @_settings("validate", campaign=True)
    @given(result=mutated(seed_result), encoding=ENCODINGS)
    def case(result, encoding):
        fuzz_validate(result, encoding)
    case()


@pytest.mark.fuzz
@_settings("profile", campaign=True)
@given(case=GRAPHS, encoding=ENCODINGS)
def test_profile_campaign(case, encoding):
    fuzz_profile(case, encoding)


@pytest.mark.fuzz
@_settings("flags", campaign=True)
@given(flags=FLAGS)
def test_flags_campaign(flags):
    fuzz_flags(flags)


@pytest.mark.fuzz
def test_campaign_cases_in_real_processes(tmp_path):
    """50 generated instances through a real ``solve`` process each."""
    cases = []

    @settings(max_examples=50, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(instance=mutated(INSTANCE), encoding=ENCODINGS)
    def collect(instance, encoding):
        cases.append((instance, encoding))
    collect()
    for i, (instance, encoding) in enumerate(cases):
        folder = tmp_path / str(i)
        folder.mkdir()
        _write(folder / "i.json", instance, encoding)
        _write(folder / "h.json", GRAPH, "utf-8")
        before = set(folder.iterdir())
        done = subprocess.run([sys.executable, "-c", "import sys; from pacopt.cli import "
                               "solve_main; sys.exit(solve_main())", str(folder / "i.json"),
                               "--out", str(folder / "r.json"), "--quiet"],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONHASHSEED": "0"})
        assert "Traceback" not in done.stderr and done.returncode in (0, 2), done.stderr
        if done.returncode == 2:
            assert len(done.stderr.strip().splitlines()) == 1
            assert set(folder.iterdir()) == before
        else:
            assert json.loads((folder / "r.json").read_text())["validated"] is True
