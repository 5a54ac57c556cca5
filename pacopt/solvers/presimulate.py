"""The validator's step simulations, begun in a helper process while an online episode runs.

The validator re-simulates one training step per placement class of the solution
(:mod:`pacopt.solvers.validate`); on a large cluster these simulations are much of a run, and
they wait until the episode is over. :class:`Presimulation` starts a helper process beside the
episode, sends it each placement as the episode records it, and has it simulate the step of
every new class with the validator's own model (a :class:`~pacopt.model.jct.JctModel` of its
own, without the on-disk cache, on the placement rebuilt from the record's labels by
:func:`~pacopt.solvers.validate.rebuild_placement`). When the episode ends, the helper stops at
once; the validator takes its timings as its own and simulates only the classes the helper
did not reach, rather than wait for it. So the re-timing is as independent as before: the
helper sees the records, as the validator does, and never the method's caches.

It is used (:func:`worth_starting`) for episodes on clusters of :data:`MIN_SERVERS` servers or
more (under ``physical`` one simulation per placement class, under ``ddls`` one per graph and
degree: both many, and long, at that size), from a program's main process with two cores or
more and without Ray loaded: a study's workers (pool processes or Ray tasks) already use every
core. Anything that goes wrong with the helper (it cannot start, dies, is not ready when the
episode ends, or Ctrl-C stops the wait) only leaves the validator to simulate those classes
itself. The helper's memory is its own process's, beside the solver's (``bench_scale.py``
reports both).
"""

from __future__ import annotations

import os
import pickle
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Self

from pacopt.infra.concurrency import available_cores
from pacopt.infra.errors import InputError
from pacopt.infra.interrupt import stop_requested
from pacopt.model.instance import Instance
from pacopt.model.jct import JctModel, StepTiming
from pacopt.model.solution import JobRecord

#: The smallest cluster on which an episode gets the helper: below it the validator's
#: simulations are few and short.
MIN_SERVERS = 256
#: Placements sent to the helper at a time (one message each costs more than the placement).
BATCH = 32


def worth_starting(instance: Instance) -> bool:
    """Whether an online episode of ``instance`` gets a :class:`Presimulation` (module doc)."""
    return (instance.cluster.num_servers >= MIN_SERVERS and not _cores_taken()
            and available_cores() >= 2)


def _cores_taken() -> bool:
    """Whether this process may be one of a study's workers (a multiprocessing child, or a
    process with Ray loaded), whose siblings already use every core."""
    import multiprocessing

    return multiprocessing.parent_process() is not None or "ray" in sys.modules


def start_beside(instance: Instance) -> Presimulation | None:
    """A :class:`Presimulation` for an online episode of ``instance`` where it is worth
    starting, or None (also when the helper cannot be started: the validator simulates
    alone)."""
    if not worth_starting(instance):
        return None
    try:
        return Presimulation(instance)
    except OSError:
        return None


class Presimulation:
    """A helper process simulating the validator's steps for the placements :meth:`note`
    sends it; :meth:`timings` ends it and returns what it simulated; :meth:`close` stops it
    in any case. Use it as a context manager.

    The helper is a fresh interpreter running this module (``python -m``), not a
    multiprocessing child: those import the caller's main script again, and a script without
    a main guard would run twice. Messages are pickles on its standard input, written by a
    thread here, so the episode never waits for the helper to read; the timings come back
    as one pickle on its standard output."""

    def __init__(self, instance: Instance):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env, start_new_session=True)  # no terminal Ctrl-C
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._broken = False
        self._writer = threading.Thread(target=self._write, daemon=True,
                                        name="pacopt-validation-writer")
        self._writer.start()
        self._queue.put(instance)
        self._sent: set[tuple] = set()
        self._batch: list[tuple] = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def note(self, record: JobRecord) -> None:
        """Send the placement of a job that runs (its degree and block labels), once."""
        if not record.blocks or self._broken:
            return
        key = (record.graph, record.degree, tuple(record.blocks))
        if key in self._sent:
            return
        self._sent.add(key)
        self._batch.append(key)
        if len(self._batch) >= BATCH:
            self._queue.put(self._batch)
            self._batch = []

    def timings(self, patience: float = 0.0) -> dict[str, dict[str, StepTiming]]:
        """The step timings the helper has simulated so far (:meth:`JctModel.step_timings`):
        it is told to stop at once (SIGUSR1: the episode is over, and the validator simulates
        whatever is left rather than wait), and answers within one simulation. Empty if it
        failed, was not ready yet, or a stop was requested.

        ``patience`` (seconds) first lets the helper finish every placement sent, for up to
        that long: for a caller that wants its work whatever the episode's speed (a test)."""
        if self._batch:
            self._queue.put(self._batch)
            self._batch = []
        self._queue.put(None)
        out = self._process.stdout
        waited_until = time.monotonic() + patience  # the helper writes once it reads None
        while (time.monotonic() < waited_until and not stop_requested()
               and not select.select([out], [], [], 0.05)[0]):
            pass
        try:
            self._process.send_signal(signal.SIGUSR1)
        except OSError:
            return {}
        try:
            while not stop_requested():
                if select.select([out], [], [], 0.05)[0]:
                    return pickle.load(out)  # written at once, once it begins
                if self._process.poll() is not None:
                    break
        except (EOFError, OSError, pickle.UnpicklingError):
            pass
        return {}

    def close(self) -> None:
        """Stop the helper (at once: its work is only ever a head start)."""
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        self._queue.put(None)  # the writer's last message, if it still waits for one
        for pipe in (self._process.stdin, self._process.stdout):
            try:
                pipe.close()
            except OSError:
                pass

    def _write(self) -> None:
        """The writer thread: each queued message to the helper, until None."""
        pipe = self._process.stdin
        while True:
            message = self._queue.get()
            try:
                pickle.dump(message, pipe, protocol=pickle.HIGHEST_PROTOCOL)
                pipe.flush()
            except (OSError, ValueError):  # the helper is gone: the validator simulates alone
                self._broken = True
                return
            if message is None:
                return


class _Finish(Exception):
    """Raised in the helper by SIGUSR1: stop and write what is simulated."""


def _finish(signum, frame) -> None:
    raise _Finish


def _serve() -> None:
    """The helper: read the instance, then simulate each new placement class sent, until
    None or SIGUSR1; then write the timings. A record the validator will reject (a bad label,
    an unknown graph) is skipped: the validator reports it. Before the handler is installed,
    SIGUSR1 ends the process, and the validator simulates alone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent answers Ctrl-C and ends this
    from pacopt.solvers.validate import rebuild_placement

    source = sys.stdin.buffer
    instance: Instance = pickle.load(source)
    model = JctModel(instance.cluster, instance.model, persist=False)
    signal.signal(signal.SIGUSR1, _finish)
    try:
        while (batch := pickle.load(source)) is not None:
            for name, degree, blocks in batch:
                graph = instance.graphs.get(name)
                if graph is None:
                    continue
                try:
                    placement, counts = rebuild_placement(instance, model, graph, degree,
                                                          blocks)
                except InputError:
                    continue
                model.timing(graph, counts, placement)  # stored only once simulated whole
    except (_Finish, EOFError):
        pass
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    pickle.dump(model.step_timings(), sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    _serve()
