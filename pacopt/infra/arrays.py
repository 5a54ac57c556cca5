"""Array helpers shared by the model and the formulations."""

from __future__ import annotations

import numpy as np


def concatenated_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of ``range(start, start + length)`` over the pairs (int64): the
    positions of several runs of a flat array, gathered in one pass."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    out = np.ones(total, dtype=np.int64)
    nonempty = lengths > 0
    out[0] = starts[nonempty][0]
    firsts = (ends - lengths)[nonempty][1:]
    # each range starts where the previous one's last value + 1 would have been
    prev_last = (starts + lengths - 1)[nonempty][:-1]
    out[firsts] = starts[nonempty][1:] - prev_last
    return np.cumsum(out)
