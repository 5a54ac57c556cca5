"""Ctrl-C as "stop and keep what you have" for solver calls that run inside C++.

Python runs signal handlers only in the main thread, between bytecodes; a main thread blocked in
``Highs.run`` or ``CpSolver.solve`` would not see Ctrl-C until the solver returned, and a
KeyboardInterrupt could not unwind the C++ search anyway. So the solver runs in a helper thread
while the main thread waits in short slices, free to take signals: the first SIGINT asks the
solver to stop (it then returns its best solution and bound), a second one raises
KeyboardInterrupt at once, for a solver slow to reach its next stopping point.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def run_stoppable(work: Callable[[], T], stop: Callable[[], None]) -> tuple[T, bool]:
    """Run ``work()`` so that Ctrl-C calls ``stop()`` (module doc); return its result and
    whether Ctrl-C stopped it. An exception ``work`` raises is raised here.

    The previous SIGINT handler is restored afterwards. Off the main thread Python cannot install
    handlers: ``work`` then runs directly and Ctrl-C keeps its usual meaning.
    """
    if threading.current_thread() is not threading.main_thread():
        return work(), False
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as err:  # noqa: BLE001 -- handed to the main thread
            outcome["error"] = err

    stopping = threading.Event()

    def handler(signum, frame) -> None:
        if stopping.is_set():
            raise KeyboardInterrupt
        stopping.set()
        stop()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        helper = threading.Thread(target=target, name="solver", daemon=True)
        helper.start()
        while helper.is_alive():
            helper.join(0.1)  # wakes for signals
    finally:
        # None: the previous handler was not installed from Python; default is the best guess
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"], stopping.is_set()
