"""CPython's cyclic garbage collector, run seldom while an episode is played or validated.

An episode allocates millions of short-lived containers (placements, options, partitioned
graphs), nearly all freed by reference counting. The cyclic collector still runs a young
collection every 700 allocations, and each older one walks every object alive, torch's and the
checkpoints' included. :func:`fewer_collections` freezes the objects alive when a run starts
(they are never walked during it: :func:`gc.freeze`) and raises the young generation's threshold;
on leaving, both go back, so whatever cyclic garbage the run made is collected as before.
Exact methods run without it: the models they build and drop hold cycles, and their peak
memory grows with it (``docs/experiments.md``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from pacopt.infra.concurrency import HeldWhileOpen

#: Allocations between young collections during a run (CPython's default is 700).
RUN_THRESHOLD = 100_000


def _apply() -> tuple[tuple[int, ...], bool]:
    """Freeze (unless the caller has frozen objects itself) and raise the threshold; what
    :func:`_restore` needs."""
    saved, froze = gc.get_threshold(), gc.get_freeze_count() == 0
    if froze:
        gc.freeze()
    gc.set_threshold(max(RUN_THRESHOLD, saved[0]), *saved[1:])
    return saved, froze


def _restore(state: tuple[tuple[int, ...], bool]) -> None:
    saved, froze = state
    gc.set_threshold(*saved)
    if froze:
        gc.unfreeze()


_RUN = HeldWhileOpen(_apply, _restore)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the block with the objects alive now frozen and young collections every
    :data:`RUN_THRESHOLD` allocations (module doc). Re-entrant and thread-safe: the outermost
    block freezes and restores, inner ones (a solve within a solve, a second thread) only run
    under it. The collector stays on: cyclic garbage made in the block is still collected. A
    caller that has frozen objects itself (a server before it forks) keeps them frozen: the
    block then only raises the threshold."""
    with _RUN.held():
        yield
