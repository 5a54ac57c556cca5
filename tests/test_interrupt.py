"""Ctrl-C in a real ``solve`` process, for every method family.

Each test starts ``solve`` with its stderr on a pseudo-terminal (as a user's shell would), waits
until the method is visibly working (the online progress bar has moved, or the exact methods'
live line shows an incumbent), sends SIGINT, and checks the promise: exit 130, the incumbent
written and validated, ``interrupted: true``. ``bound`` once aborted in native code about half
the time ("terminate called without an active exception", exit 134), so it is repeated, also
with a second Ctrl-C sent while the solver is still stopping.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from pacopt.model.graph_sources import example_instance_data
from pacopt.model.instance import load_instance
from pacopt.model.solution import Solution
from pacopt.solvers.validate import find_problems

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SOLVE = "import sys; from pacopt.cli import solve_main; sys.exit(solve_main())"
#: What stderr shows once a method is at work: the episode's progress bar past job 0 (of 20,000:
#: not the per-graph table bars before it), or the exact methods' live line with an incumbent.
WORKING = {"online": re.compile(r"\|\s*[1-9]\d*/20000"), "exact": re.compile(r"incumbent\s+\d+")}


def bundled(path: Path, num_jobs: int) -> Path:
    """The bundled workload (example graphs, no download needed) with ``num_jobs`` jobs."""
    path.write_text(json.dumps(example_instance_data("bundled", num_jobs)))
    return path


def paper(path: Path, pipedream_dir: Path, num_jobs: int) -> Path:
    """The paper's workload (beta A, seed 0) cut to ``num_jobs`` jobs."""
    path.write_text(json.dumps(example_instance_data("paper_workload", num_jobs, pipedream_dir)))
    return path


def interrupt(instance: Path, method: str, kind: str, *, signals: int = 1,
              timeout: float = 240) -> tuple[int, str, Path]:
    """Run ``solve instance --method method`` with stderr on a terminal, send ``signals`` SIGINTs
    once it is working (:data:`WORKING`), and return (exit code, stderr, result path)."""
    out = instance.with_name(f"{instance.stem}.{method}.json")
    leader, follower = pty.openpty()
    # a terminal of 0 columns (pty's default) would make tqdm draw an empty bar
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-c", SOLVE, str(instance), "--method", method, "--time-limit", "60",
         "--seed", "0", "--out", str(out)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(follower)
    seen, sent, deadline = b"", 0, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if sent < signals and WORKING[kind].search(seen.decode(errors="replace")):
                proc.send_signal(signal.SIGINT)
                sent += 1
                time.sleep(0.05)
            ready, _, _ = select.select([leader], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    text = seen.decode(errors="replace")
    assert sent == signals, f"never saw the method at work, or it ended first:\n{text[-2000:]}"
    return proc.returncode, text, out


def assert_interrupted_result(code: int, stderr: str, out: Path, instance: Path) -> dict:
    """Exit 130, no abort, the incumbent written, marked interrupted and valid."""
    assert "terminate called" not in stderr and "Traceback" not in stderr, stderr[-2000:]
    assert code == 130, (code, stderr[-2000:])
    data = json.loads(out.read_text())
    assert data["interrupted"] is True and data["validated"] is True
    problems = find_problems(load_instance(instance), Solution.load(out))
    assert problems == [], problems
    return data


def test_online_heuristic_on_a_large_episode(tmp_path):
    """20,000 jobs take min-feasible tens of seconds; Ctrl-C ends the episode at once, the jobs
    decided standing and every later one rejected."""
    instance = bundled(tmp_path / "big.json", 20_000)
    code, stderr, out = interrupt(instance, "min-feasible", "online")
    data = assert_interrupted_result(code, stderr, out, instance)
    assert data["arrived"] == 20_000 and 0 < data["accepted"] < 20_000
    decided = [job for job in data["jobs"] if job["reason"] != "rejected"]
    assert data["jobs"][-1]["reason"] == "rejected" and len(decided) < 20_000


@pytest.mark.parametrize("method", ["cpsat", "milp"])
def test_exact_backends_keep_their_incumbent(method, tmp_path):
    """60 bundled jobs: incumbents within seconds, no proof within the minute allowed."""
    instance = bundled(tmp_path / "exact.json", 60)
    code, stderr, out = interrupt(instance, method, "exact")
    data = assert_interrupted_result(code, stderr, out, instance)
    assert data["status"] in ("feasible", "optimal")
    assert data["bound_accepted"] >= data["accepted"] >= data["metrics"]["warm_start_accepted"]
    assert data["time_limit"] == 60 and data["threads"] >= 1


@pytest.mark.parametrize("attempt", range(3))
def test_bound_is_interrupted_cleanly(attempt, tmp_path, pipedream_dir):
    """The report's case: 100 paper jobs under --method bound, Ctrl-C once the relaxation runs."""
    instance = paper(tmp_path / "paper.json", pipedream_dir, 100)
    code, stderr, out = interrupt(instance, "bound", "exact")
    data = assert_interrupted_result(code, stderr, out, instance)
    assert data["bound_accepted"] >= data["accepted"] > 0


@pytest.mark.parametrize("attempt", range(2))
def test_bound_survives_a_second_ctrl_c(attempt, tmp_path, pipedream_dir):
    """Two quick Ctrl-Cs: never the native abort; either the incumbent is saved (the solver
    stopped between them) or the process quits at once with 130 and says so."""
    instance = paper(tmp_path / "paper.json", pipedream_dir, 100)
    code, stderr, out = interrupt(instance, "bound", "exact", signals=2)
    assert "terminate called" not in stderr and "Traceback" not in stderr, stderr[-2000:]
    assert code in (130, -signal.SIGINT), (code, stderr[-2000:])
    if out.exists():
        assert json.loads(out.read_text())["interrupted"] is True
    else:
        assert "interrupted" in stderr


ORPHAN_SCRIPT = """
import os, sys, time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing
from pacopt.infra.interrupt import follow_stop, stop_requested

def task():
    print(os.getpid(), flush=True)
    while not stop_requested():  # a long episode, polling the stop as episodes do
        time.sleep(0.05)
    return 'stopped'

if __name__ == '__main__':
    context = multiprocessing.get_context('spawn')
    pool = ProcessPoolExecutor(1, mp_context=context, initializer=follow_stop,
                               initargs=(context.Event(),))
    pool.submit(task)
    time.sleep(600)
"""


def test_a_killed_parents_pool_workers_stop_their_tasks(tmp_path):
    """A training run or study killed with SIGTERM (no Ctrl-C handling) leaves no worker going
    on with its task: the workers notice the parent is gone and stop within seconds."""
    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN_SCRIPT)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    parent.send_signal(signal.SIGTERM)
    parent.wait(10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker outlived its killed parent by 15 s")


def test_a_ctrl_c_as_the_method_returns_keeps_its_result(tmp_path, monkeypatch):
    """A Ctrl-C that comes after the method and its validation, before the result is written
    (the return from solve()), still writes the validated result, then exit 130."""
    from pacopt.cli import solve_main
    from pacopt.solvers import api

    real = api.solve

    def then_ctrl_c(*args, **kwargs):
        solution = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # Python runs the handler between bytecodes, here
        return solution

    monkeypatch.setattr(api, "solve", then_ctrl_c)
    out = tmp_path / "r.json"
    bundled = Path(__file__).resolve().parents[1] / "examples" / "bundled.json"
    assert solve_main([str(bundled), "--out", str(out), "--quiet"]) == 130
    result = json.loads(out.read_text())
    assert result["validated"] and result["arrived"] == 300
