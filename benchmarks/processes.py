"""Commands run as processes of their own, interrupted on cue: what the Ctrl-C benchmark
(``bench_interrupt``) and the fault campaign (``tools/faults.py``) share.

:func:`run` starts a :class:`Scenario`'s command in a new process group, sends SIGINT to the
group at the scenario's moments and SIGKILL when its time is over; :class:`Run` is what came
back, :func:`has_traceback` whether it ended in a Python traceback or a signal.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PY = sys.executable
#: ``solve`` and ``pacopt`` as this interpreter runs them.
SOLVE = [PY, "-c", "import sys; from pacopt.cli import solve_main; sys.exit(solve_main())"]
PACOPT = [PY, "-c", "import sys; from pacopt.cli import pacopt_main; sys.exit(pacopt_main())"]


@dataclass
class Run:
    code: int | None
    out: str
    err: str
    seconds: float  # from the start, or from the first SIGINT when one was sent
    hung: bool = False


@dataclass
class Scenario:
    name: str
    group: str
    argv: list[str]
    check: object  # (Run, Scenario) -> outcome name (or raises AssertionError: lost/wrong)
    setup: object = None
    env: dict = field(default_factory=dict)
    timeout: float = 180.0
    interrupt: tuple[float, ...] = ()  # seconds after start (or after a stdout marker)
    marker: str | None = None  # wait for this on stdout before the interrupts
    concurrent: int = 1


def run(s: Scenario, cwd: Path | str | None = None) -> Run:
    """Run ``s`` (its ``concurrent`` copies) in new process groups in ``cwd``: SIGINT to the
    first one's group at each of ``s.interrupt`` (after ``s.marker`` on its stdout if given),
    SIGKILL when ``s.timeout`` is over (a hang)."""
    env = {**os.environ, **s.env}
    procs = [subprocess.Popen(s.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, start_new_session=True, cwd=cwd,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
             for _ in range(s.concurrent)]
    started = time.monotonic()
    outs: list[list[str]] = [[] for _ in procs]
    errs: list[list[str]] = [[] for _ in procs]
    readers = []
    for proc, out, err in zip(procs, outs, errs):
        for stream, buf in ((proc.stdout, out), (proc.stderr, err)):
            reader = threading.Thread(target=lambda f=stream, b=buf: b.extend(f), daemon=True)
            reader.start()
            readers.append(reader)
    sent = None
    if s.interrupt:
        proc = procs[0]
        if s.marker:
            while time.monotonic() - started < s.timeout and proc.poll() is None:
                if any(s.marker in line for line in outs[0]):
                    break
                time.sleep(0.1)
        base = time.monotonic()
        for at in s.interrupt:
            time.sleep(max(0.0, base + at - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            sent = sent or time.monotonic()
    hung = False
    for proc in procs:
        try:
            proc.wait(timeout=max(1.0, s.timeout - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            hung = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    seconds = time.monotonic() - (sent or started)
    for reader in readers:
        reader.join(5)
    codes = [p.returncode for p in procs]
    return Run(codes[0] if len(codes) == 1 else codes, "".join(outs[0]),
               "\n".join("".join(e) for e in errs), seconds, hung)


def has_traceback(r: Run) -> bool:
    """Whether ``r`` printed a Python traceback or died by a signal."""
    codes = r.code if isinstance(r.code, list) else [r.code]
    return "Traceback" in r.err or any(c is not None and c < 0 for c in codes)
