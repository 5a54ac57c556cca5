"""Plots of studies (matplotlib). Each function takes the tidy table, the jobs frame or a result,
and returns a :class:`matplotlib.figure.Figure` (built without pyplot, so it works headless and in
worker processes; in a notebook, ``%matplotlib inline`` displays it). :func:`study_plots` writes
the ones a study's grids call for as PNGs. matplotlib is the plots extra, imported when a plot is
drawn (:func:`new_figure`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pacopt.analysis.metrics import (
    cluster_at,
    degree_table,
    degree_vs_beta,
    jobs_frame,
    load_solutions,
    summary,
    utilisation_over_time,
)
from pacopt.analysis.table import EXACT_STATUSES
from pacopt.infra.errors import InputError
from pacopt.infra.extras import require
from pacopt.model.jct import JobTable
from pacopt.model.solution import Solution

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_OPT_COLOUR, _BOUND_COLOUR = "0.25", "0.65"
#: Colours of methods, the same in every plot (tab20 without its greys, kept for the optimum).
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
            "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5")
_FIXED = ("min-feasible", "tuned", "pac-ml", "para-max", "para-min", "random", "sequential",
          "lp-online", "cpsat", "milp", "bound", "lp-round")


def new_figure(**kwargs) -> Figure:
    """A matplotlib ``new_figure(**kwargs)`` (without pyplot); without matplotlib, one line naming
    the plots extra (:mod:`pacopt.infra.extras`)."""
    return require("plots", "matplotlib.figure", "plotting").Figure(**kwargs)


def method_colour(method: str) -> str:
    """The colour of ``method`` (a label in the table) in every plot: a fixed one for the
    common methods, else one chosen by a digest of the label (so never by the order in which
    a plot happens to meet its methods)."""
    name = method.partition("(")[0]  # "pac-ml(general-ddls.zip)" is pac-ml
    if name in _FIXED:
        return _PALETTE[_FIXED.index(name)]
    digest = int(hashlib.blake2b(method.encode(), digest_size=4).hexdigest(), 16)
    return _PALETTE[len(_FIXED) + digest % (len(_PALETTE) - len(_FIXED))]


def _exact_rows(table: pd.DataFrame) -> pd.Series:
    return table["status"].isin(EXACT_STATUSES) & table["bound_accepted"].notna()


def plot_blocking_by_distribution(table: pd.DataFrame, title: str | None = None) -> Figure:
    """The paper's main figure: blocking rate per beta distribution per method (mean over seeds,
    with their standard deviation), and the offline optimum as its own bar: solid up to the
    blocking of the best bound (no policy can block less), hatched from there up to the best
    exact incumbent's blocking (the optimum lies in the hatched part; a proven optimum has
    none)."""
    ok = table[table["status"] != "error"]
    online = summary(ok[~_exact_rows(ok)], by=("distribution", "method"), metrics=("blocking_rate",))
    exact = ok[_exact_rows(ok)].assign(
        bound_blocking=lambda t: (t["arrived"] - t["bound_accepted"]) / t["arrived"])
    # the best exact result per instance, then averaged over the instances of a distribution
    best = exact.groupby(["distribution", "instance"]).agg(
        blocking=("blocking_rate", "min"), bound=("bound_blocking", "max")).groupby(
        "distribution").mean()
    dists = list(dict.fromkeys(ok["distribution"]))
    methods = list(dict.fromkeys(online["method"]))
    bars = len(methods) + (1 if len(best) else 0)
    width = 0.8 / max(bars, 1)
    fig = new_figure(figsize=(max(6.0, 1.6 * len(dists) + 0.3 * bars), 4.2), layout="constrained")
    ax = fig.add_subplot()
    x = np.arange(len(dists))
    for i, method in enumerate(methods):
        rows = online[online["method"] == method].set_index("distribution").reindex(dists)
        ax.bar(x + (i - (bars - 1) / 2) * width, rows["blocking_rate"], width,
               yerr=rows["blocking_rate_std"].fillna(0), capsize=2, label=method,
               color=method_colour(method))
    if len(best):
        rows = best.reindex(dists)
        pos = x + (bars - 1 - (bars - 1) / 2) * width
        ax.bar(pos, rows["bound"], width, color=_OPT_COLOUR,
               label="offline optimum: blocking >= bound's")
        ax.bar(pos, rows["blocking"] - rows["bound"], width, bottom=rows["bound"],
               color=_BOUND_COLOUR, hatch="///", edgecolor=_OPT_COLOUR,
               label="... and <= exact incumbent's")
    ax.set_xticks(x, [f"β {d}" for d in dists])
    ax.set_ylabel("blocking rate (lower is better)")
    ax.set_title(title or "Blocking per beta distribution")
    ax.legend(fontsize="small", ncols=min(bars, 4), loc="upper center",
              bbox_to_anchor=(0.5, -0.1))
    ax.grid(axis="y", alpha=0.3)
    return fig


def plot_degree_table(tables: dict[str, JobTable]) -> Figure:
    """Per-degree tables side by side (label -> table, e.g. a graph under both presets): speed-up
    against degree (dotted: ideal, speed-up = degree) and the share of the JCT spent in exposed
    communication."""
    data = degree_table(tables)
    fig = new_figure(figsize=(9.0, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    for label, rows in data.groupby("label", sort=False):
        left.plot(rows["degree"], rows["speedup"], "o-", ms=3, label=label)
        right.plot(rows["degree"], rows["comm_share"], "o-", ms=3, label=label)
    top = data["degree"].max() if len(data) else 1
    left.plot([1, top], [1, top], ":", color="0.5", label="ideal")
    left.set_xlabel("partition degree")
    left.set_ylabel("speed-up over sequential")
    right.set_xlabel("partition degree")
    right.set_ylabel("exposed communication / JCT")
    right.yaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    left.legend(fontsize="small")
    return fig


def plot_blocking_vs_load(table: pd.DataFrame) -> Figure:
    """Blocking rate against load (arrivals per second = 1000 / inter-arrival ms), one line per
    method, one panel per beta distribution; mean over seeds with their spread."""
    ok = table[(table["status"] != "error") & table["interarrival_ms"].notna()]
    data = summary(ok, by=("distribution", "method", "interarrival_ms"), metrics=("blocking_rate",))
    data["load"] = 1000.0 / data["interarrival_ms"]
    dists = list(dict.fromkeys(data["distribution"]))
    fig = new_figure(figsize=(4.2 * len(dists), 3.8), layout="constrained")
    axes = fig.subplots(1, len(dists), sharey=True, squeeze=False)[0]
    for ax, dist in zip(axes, dists):
        for method, rows in data[data["distribution"] == dist].groupby("method", sort=False):
            rows = rows.sort_values("load")
            ax.errorbar(rows["load"], rows["blocking_rate"], yerr=rows["blocking_rate_std"].fillna(0),
                        marker="o", capsize=2, label=method, color=method_colour(method))
        ax.set_title(f"β {dist}")
        ax.set_xlabel("load (job arrivals per second)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("blocking rate")
    axes[-1].legend(fontsize="small")
    return fig


def plot_gap_vs_jobs(table: pd.DataFrame) -> Figure:
    """Relative optimality gap in accepted jobs of each online method against the number of jobs:
    solid to the exact incumbent, dashed to the bound (the true gap lies in between)."""
    ok = table[(table["status"] != "error") & ~_exact_rows(table) & table["opt_bound"].notna()]
    data = summary(ok, by=("method", "num_jobs"),
                   metrics=("gap_accepted_rel", "gap_bound_accepted_rel"))
    fig = new_figure(figsize=(6.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    for method, rows in data.groupby("method", sort=False):
        rows = rows.sort_values("num_jobs")
        colour = method_colour(method)
        ax.plot(rows["num_jobs"], rows["gap_accepted_rel"], "o-", color=colour, label=method)
        ax.plot(rows["num_jobs"], rows["gap_bound_accepted_rel"], "o--", color=colour, alpha=0.6)
    ax.plot([], [], "k-", label="to the incumbent")
    ax.plot([], [], "k--", alpha=0.6, label="to the bound")
    ax.set_xlabel("jobs per instance")
    ax.set_ylabel("gap in accepted jobs (relative)")
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
    ax.set_title("How far each online method is from the offline optimum")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return fig


def plot_degree_vs_beta(jobs: pd.DataFrame, width: float = 0.05) -> Figure:
    """Mean partition degree each method chose against the job's beta (deadline / sequential JCT),
    from the jobs frame; marker size shows how many jobs fell in the bin."""
    data = degree_vs_beta(jobs, by="method", width=width)
    fig = new_figure(figsize=(6.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    for method, rows in data.groupby("method", sort=False):
        ax.plot(np.minimum(rows["beta_bin"] + width / 2, 1.0), rows["mean_degree"], "-",
                alpha=0.8, label=method, color=method_colour(method))
    ax.set_xlabel("β (deadline as a fraction of the sequential JCT)")
    ax.set_ylabel("mean degree chosen")
    ax.set_title("Degree chosen against the deadline")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return fig


def plot_utilisation(solutions: dict[str, Solution], num_servers: int = 32,
                     horizon_ms: float | None = None, windows: int = 100) -> Figure:
    """Worker utilisation over time, one line per labelled result, each point the average over
    one of ``windows`` equal windows of the episode."""
    fig = new_figure(figsize=(7.5, 3.6), layout="constrained")
    ax = fig.add_subplot()
    ends = [j.start_ms + j.jct_ms for s in solutions.values() for j in s.jobs
            if j.start_ms is not None]
    span = horizon_ms or max(ends, default=1.0)
    for label, solution in solutions.items():
        data = utilisation_over_time(solution, num_servers, horizon_ms, window_ms=span / windows)
        ax.plot(data["t_ms"] / 1000, data["utilisation"], label=label, lw=1.0)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("worker utilisation")
    ax.set_ylim(0, 1.02)
    ax.set_title("Worker utilisation over time")
    ax.legend(fontsize="small", loc="lower right")
    ax.grid(alpha=0.3)
    return fig


def plot_cluster(solution: Solution, t_ms: float, shape: tuple[int, int, int] = (4, 4, 2)
                 ) -> Figure:
    """The RAMP cluster at ``t_ms``: one panel per communication group, racks as rows, servers as
    columns; each running job has its own colour and is labelled with its id and degree, so
    fragmentation (free servers scattered between jobs) is visible."""
    grid = cluster_at(solution, t_ms, shape)
    degrees = {j.id: j.degree for j in solution.jobs}
    running = list(dict.fromkeys(j for j in grid.ravel() if j is not None))
    colours = {job: f"C{i % 10}" for i, job in enumerate(running)}
    groups, racks, servers = shape
    from matplotlib.patches import Rectangle  # matplotlib: the plots extra
    fig = new_figure(figsize=(0.8 * groups * servers + 1, 0.7 * racks + 1), layout="constrained")
    axes = fig.subplots(1, groups, squeeze=False)[0]
    for c, ax in enumerate(axes):
        for r in range(racks):
            for s in range(servers):
                job = grid[c, r, s]
                ax.add_patch(Rectangle((s, racks - 1 - r), 1, 1, edgecolor="0.3", lw=0.8,
                                       facecolor=colours.get(job, "white")))
                if job is not None:
                    ax.text(s + 0.5, racks - 0.5 - r, f"{job}\nd={degrees[job]}",
                            ha="center", va="center", fontsize=6.5)
        ax.set_xlim(0, servers)
        ax.set_ylim(0, racks)
        ax.set_xticks(np.arange(servers) + 0.5, [f"s{s}" for s in range(servers)])
        ax.set_yticks(np.arange(racks) + 0.5, [f"r{r}" for r in reversed(range(racks))])
        ax.tick_params(length=0, labelsize=7)
        ax.set_title(f"group {c}", fontsize=9)
        ax.set_aspect("equal")
    free = sum(j is None for j in grid.ravel())
    fig.suptitle(f"{solution.method} at t = {t_ms / 1000:g} s: {len(running)} jobs running, "
                 f"{free} of {grid.size} servers free", fontsize=10)
    return fig


def study_plots(table: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Write the plots each grid of a study calls for into ``out_dir`` and return their paths:
    blocking per distribution (always), blocking vs load (several inter-arrival times), gap vs
    jobs (exact results and several sizes), and from the results of the grid's first instance:
    degree vs beta, utilisation over time and the cluster halfway through."""
    out = Path(out_dir)
    written = []

    def save(fig: Figure, name: str) -> None:
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110)
        written.append(path)

    ok = table[table["status"] != "error"]
    for grid, rows in ok.groupby("grid", sort=False):
        save(plot_blocking_by_distribution(rows, f"Blocking per beta distribution ({grid})"),
             f"{grid}-blocking")
        if rows["interarrival_ms"].nunique() > 1:
            save(plot_blocking_vs_load(rows), f"{grid}-blocking-vs-load")
        if _exact_rows(rows).any() and rows["num_jobs"].nunique() > 1:
            save(plot_gap_vs_jobs(rows), f"{grid}-gap-vs-jobs")
        first = rows[rows["instance"] == rows["instance"].iloc[0]]
        solutions = load_solutions(out, first["cell"])
        if not solutions:
            continue
        save(plot_degree_vs_beta(jobs_frame(first, solutions)), f"{grid}-degree-vs-beta")
        labelled = {r.method: solutions[r.cell] for r in first.itertuples() if r.cell in solutions}
        horizon = first["horizon_ms"].iloc[0]
        horizon = None if pd.isna(horizon) else float(horizon)
        save(plot_utilisation(labelled, int(first["num_servers"].iloc[0]), horizon),
             f"{grid}-utilisation")
        # the cluster under the busiest method, when the job starting nearest mid-episode starts
        busiest = first.loc[first["worker_utilisation"].idxmax()]
        solution = solutions[busiest["cell"]]
        starts = [j.start_ms for j in solution.jobs if j.start_ms is not None]
        if starts:
            middle = (min(starts) + max(starts)) / 2
            shape = tuple(int(v) for v in str(busiest["cluster"]).split("x"))
            save(plot_cluster(solution, min(starts, key=lambda t: abs(t - middle)), shape),
                 f"{grid}-cluster")
    return written


def plot_training_curve(curve: pd.DataFrame | str | Path, title: str | None = None,
                        reference: dict[str, float] | None = None, window: int = 20) -> Figure:
    """A learned agent's training curve (a checkpoint's ``.curve.csv``, or its frame) against
    environment steps: the blocking of every finished training episode (stochastic policy, light)
    with its rolling mean over ``window`` episodes, the deterministic policy's mean blocking on the
    validation seeds (markers), and a dashed line per ``reference`` entry (label -> blocking, e.g.
    a baseline's on the same seeds). A missing or malformed file is an :class:`InputError`."""
    curve = _read_curve(curve)
    if window < 1:
        raise InputError(f"window must be >= 1 episode, not {window}")
    fig = new_figure(figsize=(7.5, 4.0), layout="constrained")
    ax = fig.add_subplot()
    train = curve[curve["kind"] == "train"].sort_values("steps", kind="stable")
    if len(train):
        ax.plot(train["steps"], train["blocking_rate"], ".", ms=3, color="C0", alpha=0.3,
                label="training episode (stochastic policy)")
        span = min(window, len(train))
        # half a window before the first point: one episode alone is noise, not a trend
        smooth = train["blocking_rate"].rolling(span, min_periods=max(1, span // 2)).mean()
        ax.plot(train["steps"], smooth, "-", color="C0", label=f"rolling mean of {span} episodes")
    valid = curve[curve["kind"] == "validation"].sort_values("steps", kind="stable")
    if len(valid):
        ax.plot(valid["steps"], valid["blocking_rate"], "o-", color="C3", ms=6,
                label="validation (deterministic policy)")
    _curve_axes(ax, reference, "environment steps (one decision per arriving job)",
                title or "Training curve")
    return fig


def plot_rounds(curve: pd.DataFrame | str | Path, title: str | None = None,
                reference: dict[str, float] | None = None, best_so_far: bool = False) -> Figure:
    """The validation blocking after each imitation round of a training run (its
    ``.curve.csv``, or the frame): the ``validation`` rows at PPO step 0, in the order written,
    round 0 being the teacher's (for a run started with ``--init``, the start's own score),
    each marked with the minutes since the start; a dashed line per ``reference`` entry (label
    -> blocking on the same validation episodes); with ``best_so_far``, a step line of the best
    validation up to each round (what a run with ``--improve-from best`` goes on from). What
    policy iteration shows round after round. A missing or malformed file is an
    :class:`InputError`."""
    curve = _read_curve(curve)
    rounds = curve[(curve["kind"] == "validation") & (curve["steps"] == 0)]
    fig = new_figure(figsize=(7.5, 4.0), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(range(len(rounds)), rounds["blocking_rate"], "o-", color="C3", ms=6,
            label="validation after the round (deterministic policy)")
    if best_so_far:
        ax.step(range(len(rounds)), rounds["blocking_rate"].cummin(), where="post", color="C0",
                lw=2, alpha=0.7, label="best validated so far")
    if "seconds" in rounds.columns:
        for i, (blocking, seconds) in enumerate(zip(rounds["blocking_rate"], rounds["seconds"])):
            ax.annotate(f"{seconds / 60:.0f} min", (i, blocking), textcoords="offset points",
                        xytext=(0, 7), ha="center", fontsize="x-small")
    ax.set_xticks(range(len(rounds)))
    _curve_axes(ax, reference, "round (0 = the teacher's)",
                title or "Validation round after round")
    return fig


def _curve_axes(ax, reference: dict[str, float] | None, xlabel: str, title: str) -> None:
    """A training plot's dashed reference lines (label -> blocking), labels, legend and grid."""
    for i, (label, blocking) in enumerate((reference or {}).items()):
        ax.axhline(blocking, ls="--", lw=1.2, color=f"C{(i + 4) % 10}", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("blocking rate (lower is better)")
    ax.set_title(title)
    ax.legend(fontsize="small", ncols=2, loc="upper center", bbox_to_anchor=(0.5, -0.17))
    ax.grid(alpha=0.3)


def _read_curve(curve: pd.DataFrame | str | Path) -> pd.DataFrame:
    """A training curve as a frame, from its CSV or the frame itself, with the columns the
    plots need (one :class:`InputError` line otherwise)."""
    if not isinstance(curve, pd.DataFrame):
        path = Path(curve)
        if not path.is_file():
            raise InputError(f"training curve '{path}' not found")
        try:
            curve = pd.read_csv(path)
        except (ValueError, UnicodeDecodeError) as err:  # pandas' parse errors are ValueErrors
            raise InputError(f"training curve '{path}' is not a CSV: {err}") from None
    missing = {"kind", "steps", "blocking_rate"} - set(curve.columns)
    if missing:
        raise InputError(f"training curve lacks column(s) {', '.join(sorted(missing))}")
    return curve
