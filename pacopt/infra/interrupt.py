"""Ctrl-C as "stop and keep what you have": the one interrupt mechanism every method uses.

Within :func:`stoppable` (``solve()`` wraps every method run in it), the first Ctrl-C does not
raise: it sets a process-wide stop flag (:func:`stop_requested`, polled by Python loops such as
the online simulator's policies) and calls every stop function registered with :func:`on_stop`
(a CP-SAT ``stop_search``, a HiGHS interrupt flag checked by its callbacks), from any thread.
Each method then returns its incumbent, which the caller records as interrupted.

Native solvers run in a helper thread (:func:`run_stoppable`) while the main thread waits in
short slices, free to take signals: Python runs handlers only in the main thread between
bytecodes, so a main thread blocked in ``Highs.run`` would not see Ctrl-C at all. A second
Ctrl-C raises KeyboardInterrupt, but never while a native solver is still running: unwinding the
interpreter under a live C++ thread is what aborted the process ("terminate called without an
active exception", exit 134). Then the second Ctrl-C ends the process at once with exit 130,
without running C++ destructors, and says so.

A command running as its own process (:func:`own_process`, set by
:func:`pacopt.infra.commandline.run_command`) never shows a traceback for a Ctrl-C: the first one
outside :func:`stoppable` (or the second inside) raises KeyboardInterrupt once, which the command
turns into "interrupted" and exit 130 after keeping what is finished; every Ctrl-C after that,
while it unwinds, saves, or shuts the interpreter down, ends the process at once with exit 130
(:func:`quit_now`) instead of raising again inside a ``finally``, a finalizer or
``signal.signal`` itself.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

#: Exit code of a run ended by Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130

_lock = threading.RLock()  # re-entrant: the handler may interrupt its own thread holding it
_flag = threading.Event()
_for_good = threading.Event()  # a pool worker's parent stopped (follow_stop): every later stop
_stops: list[Callable[[], None]] = []
_depth = 0  # nesting of stoppable() blocks; the outermost one owns the handler and the flag
_native = 0  # native solver calls running in helper threads
_own_process = False  # a command's own process (own_process()): interrupts raise at most once
_unwinding = False  # ... and one KeyboardInterrupt is already on its way up


class OutOfTime(Exception):
    """Work stopped at its deadline or at a stop request (Ctrl-C) before it was complete."""


def stop_requested() -> bool:
    """Whether Ctrl-C (or :func:`request_stop`) asked the running method to stop (in a pool
    worker whose parent stopped, :func:`follow_stop`: for good)."""
    return _flag.is_set() or _for_good.is_set()


def request_stop() -> None:
    """Ask the running method to stop and keep its best: set the flag, call every stop."""
    with _lock:
        _flag.set()
        stops = list(_stops)
    for stop in stops:
        stop()


@contextmanager
def on_stop(stop: Callable[[], None]) -> Iterator[None]:
    """Within the block, a stop request calls ``stop()`` (at once if one is already pending).
    Works from any thread; ``stop`` must be quick and thread-safe."""
    with _lock:
        _stops.append(stop)
        pending = stop_requested()
    if pending:
        stop()
    try:
        yield
    finally:
        with _lock:
            _stops.remove(stop)


def _handler(signum, frame) -> None:
    if not _flag.is_set():
        _say("interrupted: stopping, keeping the best so far (Ctrl-C again to quit)")
        request_stop()
    elif _native:  # no interpreter unwinding under a live solver thread
        quit_now("interrupted twice: quitting without a result")
    else:
        raise_once()


def raise_once() -> None:
    """Raise KeyboardInterrupt; in a command's own process only once: when one is already
    unwinding, end the process at once instead (:func:`quit_now`). The check and the mark run
    with no call between them, so no second signal can slip in (CPython runs handlers only at
    calls, function entries and backward jumps)."""
    global _unwinding
    if _own_process and _unwinding:
        quit_now()
    _unwinding = _own_process
    raise KeyboardInterrupt


def quit_now(message: str = "interrupted again: quitting now") -> None:
    """End the process at once with exit 130 (after flushing what was printed), saying
    ``message``. Its multiprocessing children (pool workers, which never see Ctrl-C) are
    terminated first: an orphan would go on with its queued work."""
    _say(message)
    try:
        import multiprocessing

        for child in multiprocessing.active_children():
            child.terminate()
    except Exception:  # noqa: BLE001,S110 -- quitting matters more
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001,S110 -- a re-entrant flush: quitting matters more
            pass
    os._exit(EXIT_INTERRUPTED)


def _own_handler(signum, frame) -> None:
    raise_once()


def own_process() -> None:
    """Mark this process as a command's own (module doc) and install its Ctrl-C handler (unless
    SIGINT is ignored, as under ``nohup``)."""
    global _own_process, _unwinding
    _own_process, _unwinding = True, False
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _own_handler)


def own_process_done() -> None:
    """The command has returned; all that is left is interpreter shutdown, where a
    KeyboardInterrupt would land in a library's finalizer (torch's then aborts in C++,
    "terminate called") and which resets Python's handlers to the default (a Ctrl-C there would
    kill the process by the signal): Ctrl-C is ignored from now on. One landing inside this very
    call finds the command done and ends the process at once (:func:`quit_now`)."""
    global _unwinding
    if _own_process:
        _unwinding = True
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def children_ignore_interrupts() -> Iterator[None]:
    """Processes started within the block never see Ctrl-C: SIGINT is ignored meanwhile, and an
    ignored signal stays ignored in a child, across ``exec`` and Python's start-up (``spawn``
    workers, a ``forkserver`` server, whose children restore what it started with, and ``fork``).
    The parent then stops them itself (closing their pipes, :func:`follow_stop`), so a Ctrl-C
    leaves no traceback of theirs. Wrap only the starts themselves (milliseconds): a Ctrl-C
    pressed within the block is lost. Main thread only; elsewhere it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None
                      else previous)


def start_fork_server() -> None:
    """Start multiprocessing's fork server now, ignoring Ctrl-C (:func:`children_ignore_interrupts`),
    so that every process it forks later (say, stable-baselines3's ``SubprocVecEnv`` workers,
    whose constructor then waits seconds for them) ignores Ctrl-C from its start. Does nothing
    where there is no fork server, or when one is already running."""
    try:
        from multiprocessing import forkserver
    except ImportError:
        return
    with children_ignore_interrupts():
        try:
            forkserver.ensure_running()
        except (OSError, ValueError):  # no fork server here: the workers start another way
            return


#: How often a pool worker looks whether its parent is still there (:func:`follow_stop`).
PARENT_CHECK_SECONDS = 1.0


def follow_stop(event) -> None:
    """A pool worker's initializer (``initargs=(event,)``, a multiprocessing ``Event``): the
    worker ignores Ctrl-C (its parent decides), and once the parent sets ``event``,
    :func:`stop_requested` is true here too, so a task polling it ends early and the pool shuts
    down without killing anyone. The same happens when the parent dies without a word (``kill``,
    SIGTERM): its workers would otherwise go on with their tasks for as long as those take."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def relay() -> None:
        orphaned = False
        while not event.wait(PARENT_CHECK_SECONDS):
            if os.getppid() != parent:  # the parent was killed: nobody wants this work now
                orphaned = True
                break
        _for_good.set()  # stoppable() clears the flag per task; the tasks queued after must not run
        request_stop()
        if orphaned:  # nothing will read its result, nor close its queue: leave
            time.sleep(PARENT_CHECK_SECONDS)  # the task's own stop, at its next decision
            os._exit(EXIT_INTERRUPTED)

    threading.Thread(target=relay, name="follow-stop", daemon=True).start()


def out_of_time(deadline: float | None) -> bool:
    """Whether work with ``deadline`` (a ``time.perf_counter()`` value; None: none) must stop
    now: the deadline has passed or a stop was requested (Ctrl-C). Every stage of a method
    that checks its deadline this way honours Ctrl-C at the same points."""
    return stop_requested() or (deadline is not None and time.perf_counter() >= deadline)


def _say(line: str) -> None:
    """A line on stderr from the signal handler: written to the descriptor directly, since the
    handler may interrupt the main thread inside a write to ``sys.stderr`` (a progress bar),
    and a re-entrant buffered write would raise."""
    try:
        os.write(sys.stderr.fileno(), f"\n{line}\n".encode())
    except (OSError, ValueError):  # no usable stderr: stopping matters more than saying so
        pass


@contextmanager
def stoppable() -> Iterator[None]:
    """Within the block, Ctrl-C asks for a stop instead of raising (module doc).

    The outermost block on the main thread installs the handler and clears the flag on entry and
    on exit (read :func:`stop_requested` inside the block); nested blocks, and blocks on other
    threads, share them. When SIGINT is ignored (``nohup``) no handler is installed:
    :func:`request_stop` still works.
    """
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    installed, previous = False, None
    if _depth == 0:
        _flag.clear()
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            previous, installed = signal.signal(signal.SIGINT, _handler), True
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            if installed:
                # None: the previous handler was not installed from Python; default is the best
                signal.signal(signal.SIGINT, signal.default_int_handler if previous is None
                              else previous)
            _flag.clear()


def run_stoppable(work: Callable[[], T], stop: Callable[[], None]) -> tuple[T, bool]:
    """Run ``work()`` (a native solver call) so that a stop request calls ``stop()``; return its
    result and whether a stop was requested. An exception ``work`` raises is raised here.

    On the main thread ``work`` runs in a helper thread (module doc); elsewhere it runs directly
    and is stopped by a request made from the main thread's handler or any other thread.
    """
    if threading.current_thread() is not threading.main_thread():
        with on_stop(stop), _native_call():
            return work(), stop_requested()
    with stoppable(), on_stop(stop):
        outcome: dict = {}

        def target() -> None:
            try:
                outcome["value"] = work()
            except BaseException as err:  # noqa: BLE001 -- handed to the main thread
                outcome["error"] = err

        helper = threading.Thread(target=target, name="solver", daemon=True)
        with _native_call():
            helper.start()
            while helper.is_alive():
                helper.join(0.1)  # wakes for signals
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"], stop_requested()


@contextmanager
def _native_call() -> Iterator[None]:
    """Count a native solver call as running (see :func:`_handler`)."""
    global _native
    with _lock:
        _native += 1
    try:
        yield
    finally:
        with _lock:
            _native -= 1
