"""A replayed trace over its own clock: per-job outcomes in trace time, and the plots of notebook 6
("a real cluster's week"): arrivals, blocking and utilisation over time per method, and the
degree each method chose against the GPUs the job's user requested.

A trace instance's jobs arrive at ``(submission - first submission) x 1000 / time_compression x
stretch`` simulated ms (:mod:`pacopt.model.trace`); :func:`trace_seconds` inverts that with the
window's statistics, so results are plotted against the trace's own days.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pacopt.analysis.metrics import utilisation_over_time
from pacopt.analysis.plots import new_figure
from pacopt.model.instance import Instance
from pacopt.model.solution import Solution

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DAY_S = 86400.0


def trace_seconds(simulated_ms, stats: Mapping) -> np.ndarray:
    """Trace time (s, the file's clock) of simulated times ``simulated_ms`` of a replayed
    window with statistics ``stats`` (:func:`pacopt.model.trace.expand_trace`)."""
    ms_per_trace_s = 1000.0 / stats["time_compression"] * stats["arrival_stretch"]
    return stats["start_s"] + np.asarray(simulated_ms, dtype=float) / ms_per_trace_s


def trace_jobs_frame(instance: Instance, solutions: Mapping[str, Solution],
                     stats: Mapping) -> pd.DataFrame:
    """One row per job per labelled solution: ``method``, ``job``, ``graph``, ``day`` (trace days
    since the window's first submission), ``requested_degree``, ``degree`` (0 when not placed),
    ``accepted``, ``reason`` and ``workers``."""
    requested = {job.id: job.requested_degree for job in instance.jobs}
    frames = []
    for label, solution in solutions.items():
        jobs = solution.jobs
        seconds = trace_seconds([j.arrival_ms for j in jobs], stats)
        frames.append(pd.DataFrame({
            "method": label, "job": [j.id for j in jobs], "graph": [j.graph for j in jobs],
            "day": (seconds - stats["start_s"]) / DAY_S,
            "requested_degree": [requested.get(j.id) for j in jobs],
            "degree": [j.degree if j.start_ms is not None else 0 for j in jobs],
            "accepted": [j.accepted for j in jobs], "reason": [j.reason for j in jobs],
            "workers": [len(j.workers) for j in jobs]}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def blocking_over_time(frame: pd.DataFrame, bucket_hours: float = 6.0) -> pd.DataFrame:
    """Arrivals and blocking rate per ``bucket_hours`` of trace time, per method: columns
    ``method``, ``day`` (bucket start), ``arrived``, ``blocking_rate``."""
    bucket = bucket_hours / 24.0
    data = frame.assign(day=np.floor(frame["day"] / bucket) * bucket)
    out = data.groupby(["method", "day"], sort=False).agg(
        arrived=("accepted", "size"), accepted=("accepted", "sum")).reset_index()
    out["blocking_rate"] = (out["arrived"] - out["accepted"]) / out["arrived"]
    return out


def plot_arrivals(frame: pd.DataFrame, bucket_hours: float = 6.0) -> Figure:
    """Jobs submitted per ``bucket_hours`` of trace time, stacked by requested degree."""
    one = frame[frame["method"] == frame["method"].iloc[0]]
    bucket = bucket_hours / 24.0
    data = one.assign(day=np.floor(one["day"] / bucket) * bucket)
    table = data.pivot_table(index="day", columns="requested_degree", values="job",
                             aggfunc="count", fill_value=0)
    fig = new_figure(figsize=(7.5, 3.4), layout="constrained")
    ax = fig.add_subplot()
    bottom = np.zeros(len(table))
    for degree in table.columns:
        ax.bar(table.index, table[degree], width=bucket * 0.9, bottom=bottom, align="edge",
               label=f"{degree} GPU" + ("s" if degree > 1 else ""))
        bottom += table[degree].to_numpy()
    ax.set_xlabel("trace day")
    ax.set_ylabel(f"jobs submitted per {bucket_hours:g} h")
    ax.set_title("Arrivals over the week, by requested degree")
    ax.legend(fontsize="small", ncols=min(len(table.columns), 5))
    ax.grid(axis="y", alpha=0.3)
    return fig


def plot_blocking_over_time(frame: pd.DataFrame, bucket_hours: float = 6.0) -> Figure:
    """Blocking rate per ``bucket_hours`` of trace time, one line per method."""
    data = blocking_over_time(frame, bucket_hours)
    fig = new_figure(figsize=(7.5, 3.6), layout="constrained")
    ax = fig.add_subplot()
    for method, rows in data.groupby("method", sort=False):
        ax.step(rows["day"], rows["blocking_rate"], where="post", label=method, lw=1.2)
    _finish_over_days(ax, "blocking rate", f"Blocking over time ({bucket_hours:g} h buckets)")
    return fig


def plot_trace_utilisation(solutions: Mapping[str, Solution], stats: Mapping,
                           bucket_hours: float = 6.0) -> Figure:
    """Worker utilisation averaged over ``bucket_hours`` of trace time, one line per method."""
    ms_per_trace_s = 1000.0 / stats["time_compression"] * stats["arrival_stretch"]
    window_ms = bucket_hours * 3600 * ms_per_trace_s
    fig = new_figure(figsize=(7.5, 3.4), layout="constrained")
    ax = fig.add_subplot()
    for label, solution in solutions.items():
        data = utilisation_over_time(solution, stats["servers"], window_ms=window_ms)
        days = (trace_seconds(data["t_ms"], stats) - stats["start_s"]) / DAY_S
        ax.step(days, data["utilisation"], where="post", label=label, lw=1.2)
    _finish_over_days(ax, "worker utilisation",
                      f"Utilisation over time ({bucket_hours:g} h averages)")
    return fig


def _finish_over_days(ax, ylabel: str, title: str) -> None:
    """The common frame of a rate (0-1) plotted over trace days."""
    ax.set_xlabel("trace day")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)


def degree_vs_requested(frame: pd.DataFrame) -> pd.DataFrame:
    """Accepted jobs per (method, requested degree, chosen degree): columns ``method``,
    ``requested_degree``, ``degree``, ``jobs``."""
    accepted = frame[frame["accepted"]]
    return (accepted.groupby(["method", "requested_degree", "degree"], sort=True)
            .size().rename("jobs").reset_index())


def plot_degree_vs_requested(frame: pd.DataFrame) -> Figure:
    """For each method, the degrees it ran accepted jobs at against the GPUs their users
    requested (circle area: jobs); the diagonal is ``as-requested``."""
    data = degree_vs_requested(frame)
    methods = list(dict.fromkeys(frame["method"]))
    fig = new_figure(figsize=(3.0 * len(methods), 3.3), layout="constrained")
    axes = fig.subplots(1, len(methods), sharex=True, sharey=True, squeeze=False)[0]
    top = max(int(data["requested_degree"].max()), int(data["degree"].max()), 1) if len(data) \
        else 16
    for ax, method in zip(axes, methods):
        rows = data[data["method"] == method]
        ax.plot([1, top], [1, top], color="0.7", lw=0.8)
        ax.scatter(rows["requested_degree"], rows["degree"], s=2.0 * rows["jobs"], alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_title(method, fontsize=9)
        ax.set_xlabel("GPUs requested")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("degree chosen")
    fig.suptitle("Degree chosen against GPUs requested (accepted jobs)", fontsize=10)
    return fig
