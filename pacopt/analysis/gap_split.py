"""The gap to the offline optimum, split into its parts: hindsight, placement and the degree choice.

For one instance, five numbers of accepted jobs, each from a validated solution:

- the offline **bound** and **incumbent** (an exact method: every arrival known, every job on
  any of its candidate footprints);
- **best fit**: the best online rule under the ``best-fit`` placer (the rules: the deterministic
  heuristics and ``fixed:K`` / ``fixed-or-min:K`` at every K, the candidates of ``tuned``,
  :func:`rule_names`);
- **its placer**: the *same* rule under the placer of the method under study (``first-fit``,
  the reference's, for ``pac-ml`` and for most methods);
- the **method** under study (e.g. ``pac-ml`` or ``tuned``).

Its blocking rate is then the sum, each part in blocking-rate units (jobs / arrived):

- ``floor``: 1 - bound / arrived, what no method can go below;
- ``unproven``: bound - incumbent, what the exact search left open (the optimum lies within);
- ``hindsight``: incumbent - best fit, what knowing the future is worth (no online rule can
  have it);
- ``placement``: best fit - its placer, what the method's placer costs the same degree rule
  (0 for a method that runs under best fit);
- ``degree``: its placer - method, what the method's degree choice gains (negative) or loses
  against the best rule under the same placer.

Choosing the best rule per instance is itself a (one-parameter) use of hindsight; the
``hindsight`` part is the rest. :func:`split_gap` computes the parts from solutions,
:func:`gap_split` runs everything for one instance, :func:`gap_split_frame` reads them from a
study table (``studies/placement.yaml``) and :func:`plot_gap_split` draws them as stacked bars
per beta distribution. Measured splits: ``docs/placement.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import pandas as pd

from pacopt.analysis.plots import new_figure
from pacopt.infra.errors import InputError
from pacopt.model.instance import Instance
from pacopt.model.jct import JctModel
from pacopt.model.solution import Solution
from pacopt.online.policies import HEURISTICS
from pacopt.solvers.api import solve
from pacopt.solvers.registry import is_online

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The parts of a method's blocking rate, bottom to top of a bar (module doc).
PARTS = ("floor", "unproven", "hindsight", "placement", "degree")
_COLOURS = {"floor": "0.25", "unproven": "0.7", "hindsight": "C0", "placement": "C1",
            "degree": "C2"}


@dataclass(frozen=True)
class GapSplit:
    """One instance's split (module doc): accepted jobs of each reference point, the rule that
    was best under best fit, and the method's name and ``placer`` (``placed``: that rule's
    accepted jobs under the method's placer)."""

    arrived: int
    bound: int
    incumbent: int
    best_fit: int
    placed: int
    method: int
    rule: str
    method_name: str
    placer: str = "first-fit"

    @property
    def parts(self) -> dict[str, float]:
        """The parts in blocking-rate units; they sum to the method's blocking rate."""
        n = max(self.arrived, 1)
        return {"floor": 1 - self.bound / n, "unproven": (self.bound - self.incumbent) / n,
                "hindsight": (self.incumbent - self.best_fit) / n,
                "placement": (self.best_fit - self.placed) / n,
                "degree": (self.placed - self.method) / n}

    @property
    def method_blocking(self) -> float:
        return 1 - self.method / max(self.arrived, 1)

    def row(self) -> dict:
        """The split as one flat dict (accepted counts, then the parts)."""
        return {**asdict(self), **self.parts, "method_blocking": self.method_blocking}


def rule_names(instance: Instance) -> list[str]:
    """The online rules the best one is chosen from: the deterministic heuristics, then
    ``fixed-or-min:K`` and ``fixed:K`` at every K up to the instance's largest degree (what
    ``tuned`` chooses from, ``random`` aside)."""
    degrees = range(1, instance.model.max_partitions_per_op + 1)
    return [*(name for name in HEURISTICS if name != "random"),
            *(f"fixed-or-min:{k}" for k in degrees), *(f"fixed:{k}" for k in degrees)]


def split_gap(offline: Solution, best_fit: Mapping[str, Solution],
              placed: Mapping[str, Solution], method: Solution) -> GapSplit:
    """The split from solutions of one instance: an exact method's (with its bound), each rule's
    under best fit and under the method's placer (rule name -> solution; the same mapping when
    the method runs under best fit), and the method's. The best rule is the one accepting most
    under best fit (ties: the first given) among those with both."""
    if offline.bound_accepted is None:
        raise ValueError(f"the offline solution ({offline.method}) has no bound")
    rules = [name for name in best_fit if name in placed]
    if not rules:
        raise ValueError("no rule has a solution both under best fit and the method's placer")
    rule = max(rules, key=lambda name: best_fit[name].accepted)
    return GapSplit(arrived=offline.arrived, bound=int(offline.bound_accepted),
                    incumbent=offline.accepted, best_fit=best_fit[rule].accepted,
                    placed=placed[rule].accepted, method=method.accepted, rule=rule,
                    method_name=method.method, placer=method.placement or "first-fit")


def gap_split(instance: Instance, method: str = "tuned", *, placement: str = "first-fit",
              rules: Iterable[str] | None = None, offline: str = "cpsat",
              time_limit: float = 60.0, threads: int | None = None, seed: int = 0,
              model: JctModel | None = None) -> GapSplit:
    """Run everything :func:`split_gap` needs on ``instance`` and split the gap of ``method``
    (an online method, under ``placement``): the exact method ``offline`` for ``time_limit``
    seconds, and every rule of ``rules`` (default :func:`rule_names`) under best fit and under
    ``placement``. Every solution is validated (``solve``); one that fails raises."""
    if not is_online(method):
        raise InputError(f"gap_split: '{method}' is not an online method")
    if is_online(offline):
        raise InputError(f"gap_split: '{offline}' is not an offline method")
    model = model or JctModel(instance.cluster, instance.model)

    def run(name: str, **options) -> Solution:
        solution = solve(instance, name, seed=seed, model=model, **options)
        if not solution.validated:
            problems = solution.metrics.get("validation_problems", [])
            raise RuntimeError(f"{name}: invalid solution: {problems[:2]}")
        return solution

    names = list(rules) if rules is not None else rule_names(instance)
    exact = run(offline, time_limit=time_limit, threads=threads)
    by_placer = {p: {name: run(name, placement=p) for name in names}
                 for p in dict.fromkeys(("best-fit", placement))}
    studied = run(method, placement=placement)
    return split_gap(exact, by_placer["best-fit"], by_placer[placement], studied)


def gap_split_frame(table: pd.DataFrame, method: str) -> pd.DataFrame:
    """The split of every instance of a study table (:mod:`pacopt.analysis.table`) for the rows
    labelled ``method``: one row per instance with the instance's parameters, the accepted
    counts of :class:`GapSplit` and its parts. The offline numbers are the best exact incumbent
    and bound of the instance; the rules are the online rows whose ``method_name`` is one of
    :func:`rule_names`' families (a heuristic, ``fixed:K``, ``fixed-or-min:K``) and that ran
    under best fit and under the method's placer (its row's ``placement``). Instances missing a
    part are left out."""
    ok = table[(table["status"] != "error") & table["accepted"].notna()]
    rows = []
    for key, rows_of in ok.groupby("instance", sort=False):
        exact = rows_of[rows_of["status"].isin(("optimal", "feasible"))
                        & rows_of["bound_accepted"].notna()]
        studied = rows_of[rows_of["method"] == method]
        rules = rows_of[(rows_of["status"] == "heuristic")
                        & rows_of["method_name"].map(_is_rule)]
        if exact.empty or studied.empty:
            continue
        placer = studied["placement"].iloc[0] or "first-fit"
        per_placer = {p: dict(zip(r["method_name"], r["accepted"]))
                      for p, r in rules.groupby("placement")}
        both = [n for n in per_placer.get("best-fit", {}) if n in per_placer.get(placer, {})]
        if not both:
            continue
        rule = max(both, key=lambda n: per_placer["best-fit"][n])
        split = GapSplit(arrived=int(rows_of["arrived"].iloc[0]),
                         bound=int(exact["bound_accepted"].min()),
                         incumbent=int(exact["accepted"].max()),
                         best_fit=int(per_placer["best-fit"][rule]),
                         placed=int(per_placer[placer][rule]),
                         method=int(studied["accepted"].iloc[0]), rule=rule, method_name=method,
                         placer=placer)
        first = rows_of.iloc[0]
        rows.append({"instance": key, "distribution": first.get("distribution"),
                     "seed": first.get("seed"), "num_jobs": first.get("num_jobs"),
                     "preset": first.get("preset"), **split.row()})
    return pd.DataFrame(rows)


def _is_rule(name: str) -> bool:
    family, parametric, k = name.partition(":")
    if parametric:
        return family in ("fixed", "fixed-or-min") and k.isdigit()
    return name in HEURISTICS and name != "random"


def plot_gap_split(frame: pd.DataFrame, title: str | None = None) -> Figure:
    """Stacked bars per beta distribution (mean over the instances of :func:`gap_split_frame`
    or of :meth:`GapSplit.row` dicts): from the floor the bound allows up to the method's
    blocking rate, through the unproven, hindsight, placement and degree-choice parts. A part
    that is negative (the method beats the best rule under first fit) is drawn hatched below
    the top of the bar."""
    frame = pd.DataFrame(frame)
    if frame.empty:
        raise ValueError("plot_gap_split: no split to plot")
    if "distribution" not in frame:
        frame = frame.assign(distribution="-")
    means = frame.groupby("distribution", sort=False)[list(PARTS)].mean()
    fig = new_figure(figsize=(max(5.0, 1.3 * len(means) + 2.5), 4.2), layout="constrained")
    ax = fig.add_subplot()
    x = range(len(means))
    bottom = pd.Series(0.0, index=means.index)
    for part in PARTS:
        height = means[part]
        up = height.clip(lower=0)
        ax.bar(x, up, 0.6, bottom=bottom, color=_COLOURS[part], label=part)
        down = height.clip(upper=0)
        if (down < 0).any():
            ax.bar(x, down, 0.6, bottom=bottom, color="none", edgecolor=_COLOURS[part],
                   hatch="///", label=f"{part} (negative)")
        bottom = bottom + height
    ax.plot(list(x), bottom.to_numpy(), "k_", ms=24, mew=2, label="method's blocking")
    ax.set_xticks(list(x), [f"β {d}" for d in means.index])
    ax.set_ylabel("blocking rate")
    method = frame["method_name"].iloc[0] if "method_name" in frame else "method"
    ax.set_title(title or f"The gap of {method}, split into its parts")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    return fig
