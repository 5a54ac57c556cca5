"""CPython's cyclic garbage collector, run seldom while a method runs.

An episode allocates millions of short-lived containers (placements, options, partitioned
graphs), nearly all freed by reference counting. The cyclic collector still runs a young
collection every 700 allocations, and each older one walks every object alive, torch's and the
checkpoints' included. :func:`fewer_collections` freezes the objects alive when a run starts
(they are never walked during it: :func:`gc.freeze`) and raises the young generation's threshold;
on leaving, both go back, so whatever cyclic garbage the run made is collected as before.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Allocations between young collections during a run (CPython's default is 700).
RUN_THRESHOLD = 100_000

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, int, int] | None = None
_froze = False  # whether the outermost block froze (not when the caller had frozen already)


@contextmanager
def fewer_collections(threshold: int = RUN_THRESHOLD) -> Iterator[None]:
    """Run the block with the objects alive now frozen and young collections every
    ``threshold`` allocations (module doc). Re-entrant and thread-safe: the outermost block
    freezes and restores, inner ones (a solve within a solve, a second thread) only run under
    it. The collector stays on: cyclic garbage made in the block is still collected. A caller
    that has frozen objects itself (a server before it forks) keeps them frozen: the block
    then only raises the threshold."""
    global _depth, _saved, _froze
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            _froze = gc.get_freeze_count() == 0
            if _froze:
                gc.freeze()
            gc.set_threshold(max(threshold, _saved[0]), *_saved[1:])
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                if _froze:
                    gc.unfreeze()
                _saved, _froze = None, False
