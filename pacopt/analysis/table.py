"""The tidy study table: one row per cell (an instance run by one method), and the optimality gap
of every row against the exact results of the same instance.

Row columns: the cell (``cell``, ``instance``, ``method``, ``method_name``, ``options``,
``run_seed``), its parameters (``grid``, ``distribution``, ``seed``, ``num_jobs``,
``interarrival_ms``, ``preset``, ``cluster``, ``num_servers``, ``horizon_ms``,
``instance_file``), the outcome (``placement``: the online placer or ``offline``, ``status``,
``validated``, ``arrived``, ``accepted``, ``blocking_rate``, ``bound_accepted``, ``solver_gap``,
``blocked_<reason>``), the episode metrics
of :mod:`pacopt.model.episode_stats` (``throughput_jobs_per_hour``, ``demand_throughput_bytes_per_s``,
``worker_utilisation``, ``mean_jct_ms``, ``mean_speedup``, ``mean_degree``), ``solve_seconds``
and ``error`` (the reason of a failed cell).

Gap columns (:func:`add_gaps`), against the exact methods' results on the same instance: the best
incumbent ``opt_incumbent`` and the best bound ``opt_bound`` among them, ``opt_status``
(``proven optimum`` when they meet, else ``bound only``), then for every row
- ``gap_accepted`` = opt_incumbent - accepted, ``gap_accepted_rel`` = that / opt_incumbent,
  ``gap_blocking`` = blocking - the incumbent's blocking;
- ``gap_bound_accepted`` = opt_bound - accepted, ``gap_bound_accepted_rel`` = that / opt_bound,
  ``gap_bound_blocking`` = blocking - the bound's blocking (1 - opt_bound / arrived).
With a proven optimum both sets agree; otherwise the true gap lies between them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pacopt.model.solution import REASONS, Solution

if TYPE_CHECKING:
    from pacopt.analysis.study_spec import Cell

#: Statuses of an exact method's result (online heuristics report ``heuristic``).
EXACT_STATUSES = ("optimal", "feasible")
#: Columns that measure time, not outcome: they differ between two runs of the same study.
TIMING_COLUMNS = ("solve_seconds",)
_METRICS = ("throughput_jobs_per_hour", "demand_throughput_bytes_per_s", "worker_utilisation",
            "mean_jct_ms", "mean_speedup", "mean_degree")


def _cell_columns(cell: Cell) -> dict:
    return {"cell": cell.id, "instance": cell.instance_key, "method": cell.method,
            "method_name": cell.method_name, "options": json.dumps(cell.options, sort_keys=True),
            "run_seed": cell.options.get("seed"), **cell.params}


def solution_row(cell: Cell, solution: Solution) -> dict:
    """The table row of ``cell`` solved as ``solution``."""
    m = solution.metrics
    reasons = m.get("blocked_by_reason", {})
    return {**_cell_columns(cell), "placement": solution.placement,
            "status": solution.status, "validated": solution.validated,
            "arrived": solution.arrived, "accepted": solution.accepted,
            "blocking_rate": solution.blocking_rate,
            "bound_accepted": solution.bound_accepted, "solver_gap": solution.gap,
            **{f"blocked_{r}": reasons.get(r, 0) for r in REASONS},
            **{k: m.get(k) for k in _METRICS},
            "solve_seconds": solution.solve_seconds,
            "error": ("validation: " + "; ".join(m.get("validation_problems", [])[:3])
                      if solution.status == "error" else None)}


def error_row(cell: Cell, reason: str, seconds: float) -> dict:
    """The table row of a cell that failed: status ``error`` and its reason."""
    return {**_cell_columns(cell), "placement": cell.options.get("placement"),
            "status": "error", "validated": False, "arrived": None,
            "accepted": None, "blocking_rate": None, "bound_accepted": None, "solver_gap": None,
            **{f"blocked_{r}": None for r in REASONS}, **{k: None for k in _METRICS},
            "solve_seconds": seconds, "error": reason}


def add_gaps(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the gap columns (module docstring) of every row against the exact results
    of its instance; NaN where the instance has no exact result."""
    table = table.copy()
    exact = table[table["status"].isin(EXACT_STATUSES) & table["bound_accepted"].notna()]
    best = exact.groupby("instance").agg(opt_incumbent=("accepted", "max"),
                                         opt_bound=("bound_accepted", "min"))
    table = table.drop(columns=[c for c in table.columns if c.startswith(("opt_", "gap_"))])
    table = table.join(best, on="instance")
    inc, bound = table["opt_incumbent"], table["opt_bound"]
    table["opt_status"] = np.where(inc.isna(), None,
                                   np.where(inc >= bound, "proven optimum", "bound only"))
    accepted, arrived = table["accepted"].astype(float), table["arrived"].astype(float)
    table["gap_accepted"] = inc - accepted
    table["gap_accepted_rel"] = (inc - accepted) / inc.where(inc > 0)
    table["gap_blocking"] = table["blocking_rate"] - (1 - inc / arrived)
    table["gap_bound_accepted"] = bound - accepted
    table["gap_bound_accepted_rel"] = (bound - accepted) / bound.where(bound > 0)
    table["gap_bound_blocking"] = table["blocking_rate"] - (1 - bound / arrived)
    return table


def assemble(cells: list[Cell], rows: dict[str, dict]) -> pd.DataFrame:
    """The study table: the rows of ``cells`` that have one, in the cells' order, with gaps."""
    table = pd.DataFrame([rows[c.id] for c in cells if c.id in rows])
    if table.empty:
        return table
    for column in ("bound_accepted", "solver_gap", "accepted", "arrived"):
        table[column] = pd.to_numeric(table[column]).astype(float)
    return add_gaps(table)


def comparable(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without its timing columns: what two runs of one study must agree on."""
    return table.drop(columns=[c for c in TIMING_COLUMNS if c in table.columns])
