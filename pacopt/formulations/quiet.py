"""Keep solver libraries' own prints off standard output.

HiGHS 1.12 writes some debugging lines straight to the C ``stdout`` even with its log switched
off; they would corrupt ``solve --json`` output. This swaps file descriptor 1 for ``/dev/null``
while a solver runs (process-wide, so our own progress goes to stderr).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_LIBC = ctypes.CDLL(None)


@contextmanager
def c_stdout_silenced() -> Iterator[None]:
    """Within the block, anything written to file descriptor 1 is discarded."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no stdout at all: nothing to protect
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        _LIBC.fflush(None)  # C stdio buffers what the solver wrote: drop it while it is still here
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
