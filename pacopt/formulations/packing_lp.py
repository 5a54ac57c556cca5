"""The packing LP over the offline problem's options: one column per option, at most one option
per job and per conflict row, solved by HiGHS's simplex.

``lp-round`` (:mod:`pacopt.solvers.lp_round`) rounds its optimum; ``lp-online``
(:mod:`pacopt.online.lp_online`) solves it over the jobs in the cluster and the arriving one. The
objective is 1 per accepted job less a tie-break of at most :data:`EPS_COST` (shorter worker time
first), so its floor bounds the accepted jobs when the LP covers the whole problem.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from itertools import chain

import highspy
import numpy as np

from pacopt.formulations.offline import Option
from pacopt.infra.quiet import c_stdout_silenced

#: Weight of the worker-time tie-break in the LP objective (the bound loses at most this share).
EPS_COST = 1e-4

@dataclass
class LpPoint:
    """An LP optimum: ``x`` per column, objective ``value``, and ``accepted_bound``, the bound
    it gives on accepted jobs (valid only when the LP relaxes the whole problem)."""

    x: np.ndarray
    value: float

    @property
    def accepted_bound(self) -> int:
        return math.floor(self.value / (1.0 - EPS_COST) + 1e-6)


def lp_costs(options: list[Option]) -> np.ndarray:
    """The LP objective per option: 1 less a tie-break of at most :data:`EPS_COST`."""
    worker_ms = np.array([o.worker_ms for o in options], dtype=float)
    top = worker_ms.max() if len(worker_ms) else 1.0
    return 1.0 - EPS_COST * worker_ms / max(top, 1e-12)


def solve_lp(options: list[Option], by_job: list[list[int]], rows: list[list[int]],
             cost: np.ndarray | None = None) -> LpPoint:
    """Maximise ``cost @ x`` over ``0 <= x <= 1`` with at most one option per job (``by_job``)
    and per conflict row (``rows``), by HiGHS's simplex. ``cost`` defaults to :func:`lp_costs`."""
    return solve_packing_lp(lp_costs(options) if cost is None else cost, by_job, rows)


def solve_packing_lp(cost: np.ndarray, by_job: list[list[int]],
                     rows: list[list[int]]) -> LpPoint:
    """:func:`solve_lp` over ``len(cost)`` columns, whatever they stand for."""
    num_columns = len(cost)
    if not num_columns:
        return LpPoint(x=np.zeros(0), value=0.0)
    packing = [ks for ks in by_job if len(ks) > 1] + [row for row in rows if len(row) > 1]
    lengths = [len(row) for row in packing]
    entries = sum(lengths)
    starts = np.zeros(len(packing) + 1, dtype=np.int32)
    np.cumsum(lengths, out=starts[1:])
    highs = _highs()
    highs.clearModel()
    # the arrays straight to HiGHS, row-wise (it transposes them in C++): building a HighsLp
    # attribute by attribute costs a fifth of a small LP's solve
    highs.passModel(num_columns, len(packing), entries, int(highspy.MatrixFormat.kRowwise),
                    int(highspy.ObjSense.kMaximize), 0.0, np.asarray(cost, dtype=float),
                    np.zeros(num_columns), np.ones(num_columns),
                    np.full(len(packing), -highspy.kHighsInf), np.ones(len(packing)), starts,
                    np.fromiter(chain.from_iterable(packing), dtype=np.int32, count=entries),
                    np.ones(entries), np.zeros(num_columns, dtype=np.int32))  # all continuous
    with c_stdout_silenced():
        highs.run()
    if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"HiGHS did not solve the LP: {highs.getModelStatus()}")
    x = np.clip(np.asarray(highs.getSolution().col_value, dtype=float), 0.0, 1.0)
    return LpPoint(x=x, value=float(highs.getObjectiveValue()))


_THREAD = threading.local()


def _highs() -> highspy.Highs:
    """This thread's HiGHS instance, made once (making one costs as much as solving a small
    LP; :func:`solve_lp` clears its model before each use)."""
    if getattr(_THREAD, "highs", None) is None:
        with c_stdout_silenced():
            _THREAD.highs = highspy.Highs()
        _THREAD.highs.setOptionValue("output_flag", False)
    return _THREAD.highs
