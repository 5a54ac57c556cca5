"""Keep solver libraries' own prints off standard output.

HiGHS 1.12 writes some debugging lines straight to the C ``stdout`` even with its log switched
off; they would corrupt ``solve --json`` output. This swaps file descriptor 1 for ``/dev/null``
while a solver runs (process-wide, so our own progress goes to stderr; counted across threads).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LIBC = ctypes.CDLL(None)


_lock = threading.Lock()
_depth = 0  # blocks open, in every thread: the first one swaps the descriptor, the last restores
_saved: int | None = None  # the real stdout while swapped


@contextmanager
def c_stdout_silenced() -> Iterator[None]:
    """Within the block, anything written to file descriptor 1 is discarded.

    Safe when solvers run side by side in threads (the portfolio's lanes): the swap is counted,
    so one block ending while another is still open neither restores stdout too early nor saves
    ``/dev/null`` as the descriptor to restore.
    """
    global _depth, _saved
    sys.stdout.flush()
    with _lock:
        if _depth == 0:
            try:
                saved = os.dup(1)
            except OSError:  # no stdout at all: nothing to protect
                saved = None
            if saved is not None:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.close(devnull)
            _saved = saved
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                _LIBC.fflush(None)  # C stdio buffers what the solver wrote: drop it now
                os.dup2(_saved, 1)
                os.close(_saved)
                _saved = None
