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
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

#: Exit code of a run ended by Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130

_lock = threading.RLock()  # re-entrant: the handler may interrupt its own thread holding it
_flag = threading.Event()
_stops: list[Callable[[], None]] = []
_depth = 0  # nesting of stoppable() blocks; the outermost one owns the handler and the flag
_native = 0  # native solver calls running in helper threads


def stop_requested() -> bool:
    """Whether Ctrl-C (or :func:`request_stop`) asked the running method to stop."""
    return _flag.is_set()


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
        pending = _flag.is_set()
    if pending:
        stop()
    try:
        yield
    finally:
        with _lock:
            _stops.remove(stop)


def _handler(signum, frame) -> None:
    if not _flag.is_set():
        _say("interrupted: stopping with the best solution so far (Ctrl-C again to quit)")
        request_stop()
    elif _native:
        _say("interrupted twice: quitting without a result")
        os._exit(EXIT_INTERRUPTED)  # no interpreter unwinding under a live solver thread
    else:
        raise KeyboardInterrupt


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
