"""Keep solver libraries' own prints off standard output.

HiGHS 1.12 writes some debugging lines straight to the C ``stdout`` even with its log switched
off; they would corrupt ``solve --json`` output. This swaps file descriptor 1 for ``/dev/null``
while a solver runs (process-wide, so our own progress goes to stderr; counted across threads).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from pacopt.infra.concurrency import HeldWhileOpen

_LIBC = ctypes.CDLL(None)


def _swap() -> int | None:
    """File descriptor 1 to ``/dev/null``; the real stdout's duplicate (None: no stdout at all,
    nothing to protect)."""
    try:
        saved = os.dup(1)
    except OSError:
        return None
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    return saved


def _restore(saved: int | None) -> None:
    if saved is not None:
        _LIBC.fflush(None)  # C stdio buffers what the solver wrote: drop it now
        os.dup2(saved, 1)
        os.close(saved)


# blocks open in every thread: the first one swaps the descriptor, the last restores
_SILENCED = HeldWhileOpen(_swap, _restore)


@contextmanager
def c_stdout_silenced() -> Iterator[None]:
    """Within the block, anything written to file descriptor 1 is discarded.

    Safe when solvers run side by side in threads (the portfolio's lanes): the swap is counted,
    so one block ending while another is still open neither restores stdout too early nor saves
    ``/dev/null`` as the descriptor to restore.
    """
    sys.stdout.flush()
    with _SILENCED.held():
        yield
