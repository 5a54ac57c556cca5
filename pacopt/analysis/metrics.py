"""Metrics over sets of results: blocking by graph, beta band and reason, JCT and speed-up
distributions, chosen degrees against beta, utilisation over time, the cluster at a moment, and
a job-by-job comparison of two solutions of one instance.

Most functions take the **jobs frame** (:func:`jobs_frame`): one row per job per result, with the
result's cell parameters (method, distribution, seed, ...) beside the job's own columns (graph,
beta, beta band, accepted, reason, degree, workers, jct_ms, seq_jct_ms, speedup). Throughput and
worker utilisation per result are columns of the study table already (definitions in
:mod:`pacopt.model.episode_stats`); :func:`summary` averages any table columns over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pacopt.model.jct import JobTable
from pacopt.model.solution import REASONS, Solution

#: Edges of the beta bands (deadline as a fraction of the sequential JCT): strict to lenient.
BETA_BANDS = (0.1, 0.25, 0.5, 0.75, 1.0)
#: Cell parameters copied from the study table into the jobs frame.
CELL_COLUMNS = ("cell", "instance", "method", "grid", "distribution", "seed", "num_jobs",
                "interarrival_ms", "preset", "cluster", "status")


def load_solutions(out_dir: str | Path, cells: Iterable[str] | None = None) -> dict[str, Solution]:
    """The result of every finished cell of a study folder (or only of ``cells``), by cell id."""
    folder = Path(out_dir) / "results"
    paths = ([folder / f"{c}.json" for c in cells] if cells is not None
             else sorted(folder.glob("*.json")))
    return {p.stem: Solution.load(p) for p in paths if p.exists()}


def beta_band(beta: Sequence[float] | pd.Series, edges: Sequence[float] = BETA_BANDS) -> pd.Series:
    """The band label (e.g. ``"0.25-0.5"``) of every beta; the first band includes its low edge."""
    labels = [f"{lo:g}-{hi:g}" for lo, hi in zip(edges[:-1], edges[1:])]
    return pd.cut(pd.Series(beta, dtype=float), list(edges), labels=labels, include_lowest=True)


def jobs_frame(table: pd.DataFrame, solutions: Mapping[str, Solution]) -> pd.DataFrame:
    """One row per job of every result in ``solutions`` (cell id -> solution) that ``table`` has,
    with the cell's parameters."""
    frames = []
    for row in table.itertuples(index=False):
        solution = solutions.get(row.cell)
        if solution is None:
            continue
        jobs = pd.DataFrame([{
            "job": j.id, "graph": j.graph, "arrival_ms": j.arrival_ms, "beta": j.max_jct_fraction,
            "accepted": j.accepted, "reason": j.reason, "degree": j.degree,
            "workers": len(j.workers), "start_ms": j.start_ms, "jct_ms": j.jct_ms,
            "seq_jct_ms": j.deadline_ms / j.max_jct_fraction} for j in solution.jobs])
        for column in CELL_COLUMNS:
            jobs[column] = getattr(row, column, None)
        frames.append(jobs)
    if not frames:
        return pd.DataFrame()
    jobs = pd.concat(frames, ignore_index=True)
    jobs["beta_band"] = beta_band(jobs["beta"]).values
    jobs["speedup"] = (jobs["seq_jct_ms"] / jobs["jct_ms"]).where(jobs["accepted"])
    return jobs


def blocking_by(jobs: pd.DataFrame, by: str | Sequence[str] = "method") -> pd.DataFrame:
    """Blocking rate (blocked / arrived) per group of ``by`` columns, e.g. ``["method", "graph"]``
    or ``["method", "beta_band"]``, with the number of arrived jobs."""
    keys = [by] if isinstance(by, str) else list(by)
    out = jobs.groupby(keys, observed=True)["accepted"].agg(["size", "mean"])
    return pd.DataFrame({"arrived": out["size"], "blocking_rate": 1 - out["mean"]}).reset_index()


def blocking_by_reason(jobs: pd.DataFrame, by: str | Sequence[str] = "method") -> pd.DataFrame:
    """Share of arrived jobs blocked for each reason (``rejected``, ``no_placement``,
    ``deadline``, ``horizon``) per group; the row sums to the blocking rate."""
    keys = [by] if isinstance(by, str) else list(by)
    arrived = jobs.groupby(keys, observed=True).size()
    counts = (jobs[~jobs["accepted"]].groupby([*keys, "reason"], observed=True).size()
              .unstack("reason").reindex(columns=list(REASONS)).reindex(arrived.index))
    return counts.fillna(0).div(arrived, axis=0).reset_index()


def distribution(jobs: pd.DataFrame, column: str = "jct_ms", by: str | Sequence[str] = "method",
                 quantiles: Sequence[float] = (0.1, 0.25, 0.5, 0.75, 0.9)) -> pd.DataFrame:
    """Mean and quantiles of ``column`` (``jct_ms``, ``speedup``, ``degree``, ``workers``) over
    the accepted jobs of each group."""
    keys = [by] if isinstance(by, str) else list(by)
    groups = jobs[jobs["accepted"]].groupby(keys, observed=True)[column]
    out = groups.quantile(list(quantiles)).unstack()
    out.columns = [f"p{round(q * 100)}" for q in quantiles]
    out.insert(0, "mean", groups.mean())
    out.insert(0, "jobs", groups.size())
    return out.reset_index()


def degree_vs_beta(jobs: pd.DataFrame, by: str | Sequence[str] = "method",
                   width: float = 0.05) -> pd.DataFrame:
    """Mean chosen degree (jobs given one, accepted or not) and acceptance per beta bin of
    ``width``, per group: what each method does with tight and loose deadlines."""
    keys = [by] if isinstance(by, str) else list(by)
    chosen = jobs[jobs["degree"] > 0].copy()
    chosen["beta_bin"] = (np.floor(chosen["beta"] / width + 1e-9) * width).round(6)
    out = chosen.groupby([*keys, "beta_bin"], observed=True).agg(
        jobs=("degree", "size"), mean_degree=("degree", "mean"),
        acceptance=("accepted", "mean"))
    return out.reset_index()


def summary(table: pd.DataFrame, by: Sequence[str] = ("method", "distribution"),
            metrics: Sequence[str] = ("blocking_rate", "throughput_jobs_per_hour",
                                      "demand_throughput_bytes_per_s", "worker_utilisation",
                                      "mean_jct_ms", "mean_speedup")) -> pd.DataFrame:
    """Mean and standard deviation over seeds of ``metrics`` per group of the study ``table``
    (failed cells left out); columns ``<metric>`` and ``<metric>_std``, plus ``runs``."""
    ok = table[table["status"] != "error"]
    groups = ok.groupby(list(by), sort=False, dropna=False)
    out = groups[list(metrics)].mean()
    std = groups[list(metrics)].std().add_suffix("_std")
    return pd.concat([groups.size().rename("runs"), out, std], axis=1).reset_index()


def utilisation_over_time(solution: Solution, num_servers: int = 32,
                          horizon_ms: float | None = None, window_ms: float | None = None
                          ) -> pd.DataFrame:
    """Busy workers and utilisation over time, jobs cut at ``horizon_ms`` if given: a step
    function with one row per change (``t_ms``, ``busy_workers``, ``utilisation``), or with
    ``window_ms`` the time-average over consecutive windows (``t_ms`` = window start)."""
    events: list[tuple[float, int]] = []
    for job in solution.jobs:
        if job.start_ms is None or job.jct_ms is None:
            continue
        end = job.start_ms + job.jct_ms
        if horizon_ms is not None:
            end = min(end, horizon_ms)
        events += [(job.start_ms, len(job.workers)), (end, -len(job.workers))]
    if not events:
        return pd.DataFrame({"t_ms": [0.0], "busy_workers": [0], "utilisation": [0.0]})
    frame = pd.DataFrame(events, columns=["t_ms", "delta"]).groupby("t_ms")["delta"].sum()
    t, busy = frame.index.to_numpy(dtype=float), frame.cumsum().to_numpy(dtype=float)
    if window_ms is not None:
        # busy worker-time up to each event is piecewise linear: interpolate it at the edges
        area = np.concatenate([[0.0], np.cumsum(busy[:-1] * np.diff(t))])
        edges = np.arange(0.0, t[-1] + window_ms, window_ms)
        busy = np.diff(np.interp(edges, t, area)) / window_ms
        t = edges[:-1]
    return pd.DataFrame({"t_ms": t, "busy_workers": busy, "utilisation": busy / num_servers})


def cluster_at(solution: Solution, t_ms: float, shape: tuple[int, int, int] = (4, 4, 2)
               ) -> np.ndarray:
    """Who holds each server at ``t_ms``: an array of shape (groups, racks, servers) of job ids
    (``None`` = free), from the jobs running then (start <= t < end)."""
    grid = np.full(shape, None, dtype=object)
    for job in solution.jobs:
        if job.start_ms is None or not job.start_ms <= t_ms < job.start_ms + job.jct_ms:
            continue
        for name in job.workers:
            c, r, s = (int(x) for x in name.split("-"))
            grid[c, r, s] = job.id
    return grid


def compare_jobs(a: Solution, b: Solution, labels: tuple[str, str] | None = None
                 ) -> pd.DataFrame:
    """Job by job, two solutions of one instance side by side (columns suffixed with
    ``labels``, default the methods' names), with ``differs`` marking jobs that one accepts and
    the other blocks."""
    def frame(s: Solution) -> pd.DataFrame:
        return pd.DataFrame([{"job": j.id, "graph": j.graph, "arrival_ms": j.arrival_ms,
                              "beta": j.max_jct_fraction, "accepted": j.accepted,
                              "degree": j.degree, "workers": len(j.workers), "jct_ms": j.jct_ms,
                              "deadline_ms": j.deadline_ms, "reason": j.reason}
                             for j in s.jobs]).set_index("job")
    left, right = frame(a), frame(b)
    shared = ["graph", "arrival_ms", "beta", "deadline_ms"]
    own = [c for c in left.columns if c not in shared]
    first, second = labels or (a.method, b.method)
    if first == second:
        raise ValueError(f"compare_jobs: give two distinct labels, not '{first}' twice")
    out = left[shared].join(left[own].add_suffix(f"_{first}")).join(
        right[own].add_suffix(f"_{second}"))
    out["differs"] = out[f"accepted_{first}"] != out[f"accepted_{second}"]
    return out.reset_index()


def degree_table(tables: Mapping[str, JobTable]) -> pd.DataFrame:
    """Per-degree tables (label -> :class:`~pacopt.model.jct.JobTable`, e.g. one graph under
    both presets) as one long frame of the placeable degrees: ``label``, ``graph``, ``preset``,
    ``degree``, ``workers``, ``jct_ms``, ``speedup`` (sequential JCT / JCT) and ``comm_share``
    (exposed communication / JCT)."""
    rows = []
    for label, table in tables.items():
        for row in table.rows():
            if row["placed"]:
                rows.append({"label": label, "graph": table.graph.name, "preset": table.preset,
                             "degree": row["degree"], "workers": row["workers"],
                             "jct_ms": row["jct_ms"],  # zero-time ops: no speed-up (nan)
                             "speedup": _ratio(table.seq_jct_ms, row["jct_ms"]),
                             "comm_share": _ratio(row["comm_overhead_ms"], row["jct_ms"])})
    return pd.DataFrame(rows)


def _ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, NaN when the denominator is 0 (a job of zero-time ops)."""
    return numerator / denominator if denominator else math.nan
