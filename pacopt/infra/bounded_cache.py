"""A dict that empties itself when full: the caches on the hot paths (placements, live options,
tile states, footprints, free blocks), bounded so that a long run's memory stays flat."""

from __future__ import annotations

from collections.abc import Callable


class BoundedCache(dict):
    """A ``dict`` with a size limit: :meth:`put` empties it first when ``limit`` entries are
    held, or, given ``cost`` (an entry's size, e.g. its bytes), when the entries put since
    it was last emptied would cost more than ``limit``. Look-ups stay ``dict``'s own (``get``,
    ``in``, ``[]``), at C speed; only a miss pays for a method call."""

    def __init__(self, limit: int, cost: Callable[[object], int] | None = None):
        super().__init__()
        self.limit = limit
        self.cost = cost
        self.used = 0  # with ``cost``: what the entries put since the last emptying cost

    def put(self, key, value):
        """Store ``value`` under ``key``, after emptying the cache if it is full; returns
        ``value``."""
        if self.cost is None:
            if len(self) >= self.limit:
                self.clear()
        else:
            size = self.cost(value)
            if self.used + size > self.limit:
                self.clear()
            self.used += size
        self[key] = value
        return value

    def clear(self) -> None:
        super().clear()
        self.used = 0
