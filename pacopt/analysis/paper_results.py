"""The PAC-ML paper's main table (blocking per beta distribution), reproduced beside its numbers.

:data:`PAPER_BLOCKING` holds the blocking rates the paper reports (arXiv 2301.13799, its main
table; ``docs/paper.md``: PAC-ML at its best epoch, baselines the mean of 3 seeds; 1001-job
episodes, ddls setting). :func:`paper_table` puts a study's results beside them:
- the paper's baselines by their pacopt method (Para_max = ``para-max``, Para_min =
  ``para-min``, Random = ``random``), the learned agent (``pac-ml``) when the study ran it,
  pacopt's ``min-feasible``, ``tuned`` (a degree rule chosen on the tuning seeds) and the best
  ``fixed:K`` degree per distribution (chosen on the study's own seeds: optimistic);
- on the (smaller) instances where exact methods ran: the best online method, the exact
  incumbent's blocking and the bound's (the optimum lies between the last two).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pacopt.analysis.table import EXACT_STATUSES

#: Blocking rates the paper reports per beta distribution (A, B, C, D).
PAPER_BLOCKING = {
    "PAC-ML": (0.2038, 0.2567, 0.1166, 0.0992),
    "Para_max": (0.2624, 0.2631, 0.2674, 0.2631),
    "Para_min": (0.3087, 0.3956, 0.3074, 0.1419),
    "Random": (0.5172, 0.6011, 0.5055, 0.4652),
}
#: pacopt method -> the paper's name for it.
PAPER_NAMES = {"pac-ml": "PAC-ML", "para-max": "Para_max", "para-min": "Para_min",
               "random": "Random"}
_DISTS = ("A", "B", "C", "D")


def paper_table(table: pd.DataFrame) -> pd.DataFrame:
    """Long table: one row per (row label, distribution) with pacopt's mean blocking over seeds
    (``blocking``, ``std``, ``runs``, ``jobs`` per instance, ``note``: the method behind a "best"
    row, ``proven``: instances solved to proven optimality, for exact rows) and the paper's
    number (``paper``, NaN where it reports none). Online rows use the study's largest
    instances."""
    ok = table[(table["status"] != "error") & table["distribution"].isin(_DISTS)]
    exact = ok["status"].isin(EXACT_STATUSES) & ok["bound_accepted"].notna()
    online = ok[~exact]
    rows: list[dict] = []

    def add(label: str, dist: str, values: pd.Series, jobs, note: str = "",
            proven: int | None = None) -> None:
        paper = PAPER_BLOCKING.get(label)
        rows.append({"row": label, "distribution": dist, "blocking": values.mean(),
                     "std": values.std() if len(values) > 1 else np.nan, "runs": len(values),
                     "jobs": jobs, "note": note, "proven": proven,
                     "paper": paper[_DISTS.index(dist)] if paper else np.nan})

    if len(online):
        big = online[online["num_jobs"] == online["num_jobs"].max()]
        jobs = int(big["num_jobs"].iloc[0])
        for dist in _DISTS:
            here = big[big["distribution"] == dist]
            for method, paper_name in PAPER_NAMES.items():
                add(paper_name, dist, here.loc[here["method"] == method, "blocking_rate"], jobs)
            for method in ("min-feasible", "tuned"):
                add(method, dist, here.loc[here["method"] == method, "blocking_rate"], jobs)
            fixed = here[here["method_name"].str.startswith("fixed:")]
            means = fixed.groupby("method")["blocking_rate"].mean()
            best = means.idxmin() if len(means) else None
            add("best fixed degree", dist,
                fixed.loc[fixed["method"] == best, "blocking_rate"], jobs, best or "")
    for jobs, at in ok[exact].groupby("num_jobs"):
        same = ok[ok["instance"].isin(at["instance"])]
        for dist in _DISTS:
            inst = same[same["distribution"] == dist]
            if inst.empty:
                continue
            is_exact = inst["status"].isin(EXACT_STATUSES) & inst["bound_accepted"].notna()
            heur = inst[~is_exact].groupby("method")["blocking_rate"].mean()
            if len(heur):
                best = heur.idxmin()
                add(f"best online, {jobs:.0f} jobs", dist,
                    inst.loc[~is_exact & (inst["method"] == best), "blocking_rate"], int(jobs), best)
            per = inst[is_exact].groupby("instance").agg(
                accepted=("accepted", "max"), bound=("bound_accepted", "min"),
                arrived=("arrived", "first"))
            proven = int((per["accepted"] >= per["bound"]).sum())
            for what, accepted in (("incumbent", per["accepted"]), ("bound", per["bound"])):
                add(f"exact {what}, {jobs:.0f} jobs", dist, 1 - accepted / per["arrived"],
                    int(jobs), proven=proven)
    return pd.DataFrame(rows)


def paper_markdown(long: pd.DataFrame) -> str:
    """The :func:`paper_table` as a Markdown table: per distribution, pacopt's blocking
    (mean ± std over seeds) and the paper's, one line per row label."""
    head = "| | " + " | ".join(f"β_{d} pacopt | β_{d} paper" for d in _DISTS) + " | notes |"
    lines = [head, "|---" * (2 * len(_DISTS) + 2) + "|"]
    for label, rows in long.groupby("row", sort=False):
        cells, notes = [], []
        for dist in _DISTS:
            row = rows[rows["distribution"] == dist]
            if row.empty or pd.isna(row["blocking"].iloc[0]):
                cells += ["n/a", _num(row["paper"].iloc[0]) if len(row) else "-"]
                continue
            r = row.iloc[0]
            std = "" if pd.isna(r["std"]) else f" ± {r['std']:.3f}"
            cells += [f"{r['blocking']:.3f}{std}", _num(r["paper"])]
            if r["note"]:
                notes.append(f"{dist}: {r['note']}")
        runs = int(rows["runs"].max())
        scope = (f"{int(rows['jobs'].iloc[0])} jobs x {runs} seed{'s' if runs > 1 else ''}"
                 if runs else "not in this study")
        if rows["proven"].notna().any():
            scope += (f"; {int(rows['proven'].sum())} of {int(rows['runs'].sum())} proven "
                      "optimal")
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {scope}"
                     + (f"; {', '.join(dict.fromkeys(notes))}" if notes else "") + " |")
    return "\n".join(lines)


def _num(value) -> str:
    return "-" if pd.isna(value) else f"{value:.3f}"
