"""A dict that empties itself when full: the caches on the hot paths (placements, live options,
tile states, footprints, free blocks), bounded so that a long run's memory stays flat."""

from __future__ import annotations


class BoundedCache(dict):
    """A ``dict`` with a size limit: :meth:`put` empties it first when ``limit`` entries are
    held. Look-ups stay ``dict``'s own (``get``, ``in``, ``[]``), at C speed; only a miss
    pays for a method call."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def put(self, key, value):
        """Store ``value`` under ``key``, after emptying the cache if it is full; returns
        ``value``."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value
