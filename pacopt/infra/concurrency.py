"""Concurrency helpers every layer may use: the cores this process may run on, a stop request
shared by searches running side by side, and a process-wide setting held while any block is
open."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def available_cores() -> int:
    """The cores this process may run on: the default thread count of the backends and the
    search."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


class Stop:
    """A stop request shared by solver calls running side by side (the portfolio's lanes).

    :meth:`subscribed` registers a way to stop one running search (CP-SAT's ``stop_search``,
    HiGHS's interrupt flag) for the duration of a block; :meth:`set` calls every registered one.
    Unlike Ctrl-C it works from any thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._callbacks: list[Callable[[], None]] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        """Request the stop and ask every subscribed search to end."""
        with self._lock:
            self._set = True
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    @contextmanager
    def subscribed(self, callback: Callable[[], None]) -> Iterator[None]:
        """Within the block, :meth:`set` calls ``callback`` (at once if already set)."""
        with self._lock:
            self._callbacks.append(callback)
            already = self._set
        if already:
            callback()
        try:
            yield
        finally:
            with self._lock:
                self._callbacks.remove(callback)


class HeldWhileOpen:
    """A process-wide setting held while any block is open, in any thread: the first block in
    applies it (``apply()`` returns what ``restore`` needs to undo it), the last one out
    restores it. Blocks nest and overlap across threads (the portfolio's lanes, a solve within
    a solve) without one ending the setting under another."""

    def __init__(self, apply: Callable[[], object], restore: Callable[[object], None]):
        self._apply, self._restore = apply, restore
        self._lock = threading.Lock()
        self._depth = 0
        self._saved: object = None

    @contextmanager
    def held(self) -> Iterator[None]:
        """Within the block, the setting holds."""
        with self._lock:
            if self._depth == 0:
                self._saved = self._apply()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    saved, self._saved = self._saved, None
                    self._restore(saved)
