"""Metrics over results, gaps against exact results, plots and the paper's table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from pacopt.analysis import (
    add_gaps,
    blocking_by,
    blocking_by_reason,
    cluster_at,
    compare_jobs,
    degree_vs_beta,
    distribution,
    jobs_frame,
    load_solutions,
    paper_markdown,
    paper_table,
    plot_blocking_by_distribution,
    plot_blocking_vs_load,
    plot_cluster,
    plot_degree_vs_beta,
    plot_gap_vs_jobs,
    plot_utilisation,
    run_study,
    study_from_dict,
    summary,
    utilisation_over_time,
)
from pacopt.analysis.paper_results import PAPER_BLOCKING

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GRAPHS = {name: {"file": str(EXAMPLES / "graphs" / f"{name}.json")}
          for name in ("cnn", "resnet", "transformer")}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small study run in this process: 2 loads x 2 distributions x 2 seeds x 3 heuristics."""
    out = tmp_path_factory.mktemp("study")
    study = study_from_dict({"name": "m", "grids": [{"name": "g", "workload": {
        "graphs": GRAPHS, "distributions": ["B", "D"], "seeds": 2, "num_jobs": 40,
        "interarrival_ms": [100, 300]}, "methods": ["para-max", "random", "min-feasible"]}]})
    table = run_study(study, out, workers=1, progress=False, plots=False)
    return table, load_solutions(out), out


def test_jobs_frame_agrees_with_the_table(small):
    table, solutions, _ = small
    jobs = jobs_frame(table, solutions)
    assert len(jobs) == table["arrived"].sum()
    overall = blocking_by(jobs, "cell").set_index("cell")["blocking_rate"]
    assert np.allclose(overall[table["cell"]].to_numpy(), table["blocking_rate"].to_numpy())
    # per graph and per beta band partition the jobs: their arrivals add up
    for key in ("graph", "beta_band"):
        per = blocking_by(jobs, ["method", key])
        assert per.groupby("method")["arrived"].sum().equals(jobs.groupby("method").size())
    accepted = jobs[jobs["accepted"]]
    assert np.allclose(accepted["speedup"], accepted["seq_jct_ms"] / accepted["jct_ms"])
    assert jobs["beta_band"].notna().all()


def test_blocking_by_reason_sums_to_blocking(small):
    table, solutions, _ = small
    jobs = jobs_frame(table, solutions)
    reasons = blocking_by_reason(jobs, "cell").set_index("cell")
    total = reasons[["rejected", "no_placement", "deadline", "horizon"]].sum(axis=1)
    assert np.allclose(total[table["cell"]].to_numpy(), table["blocking_rate"].to_numpy())
    counts = table.set_index("cell")["blocked_no_placement"] / table.set_index("cell")["arrived"]
    assert np.allclose(reasons.loc[counts.index, "no_placement"], counts)


def test_utilisation_over_time_integrates_to_the_episode_metric(small):
    table, solutions, _ = small
    for row in table.itertuples():
        solution = solutions[row.cell]
        steps = utilisation_over_time(solution, 32)
        end = solution.metrics["episode_ms"]
        area = float(np.sum(steps["busy_workers"].to_numpy()[:-1] * np.diff(steps["t_ms"])))
        assert area / (32 * end) == pytest.approx(row.worker_utilisation, rel=1e-9)
        windows = utilisation_over_time(solution, 32, window_ms=end / 7)
        assert windows["utilisation"].between(0, 1 + 1e-12).all()
        assert windows["utilisation"].mean() * len(windows) * end / 7 == pytest.approx(
            area / 32, rel=1e-6)


def test_cluster_at_holds_each_running_job_on_its_workers(small):
    table, solutions, _ = small
    solution = solutions[table["cell"].iloc[0]]
    job = next(j for j in solution.jobs if j.accepted and j.degree > 1)
    grid = cluster_at(solution, job.start_ms)
    held = {f"{c}-{r}-{s}" for c, r, s in zip(*np.nonzero(grid == job.id))}
    assert held == set(job.workers)
    assert cluster_at(solution, -1.0).tolist() == np.full((4, 4, 2), None).tolist()


def test_distributions_and_degrees(small):
    table, solutions, _ = small
    jobs = jobs_frame(table, solutions)
    jct = distribution(jobs, "jct_ms")
    assert (jct["p10"] <= jct["p50"]).all() and (jct["p50"] <= jct["p90"]).all()
    degrees = degree_vs_beta(jobs)
    assert set(degrees["method"]) == {"para-max", "random", "min-feasible"}
    # para-max picks the largest degree of the mask: the highest degrees at every beta
    by_method = degrees.groupby("method")["mean_degree"].mean()
    assert by_method.idxmax() == "para-max" and by_method["para-max"] > 2 * by_method["min-feasible"]
    means = summary(table, by=("method",))
    assert (means["runs"] == 8).all()
    assert np.isclose(means.set_index("method").loc["random", "blocking_rate"],
                      table.loc[table["method"] == "random", "blocking_rate"].mean())


def test_compare_jobs_explains_the_difference(small):
    table, solutions, _ = small
    first = table[table["instance"] == table["instance"].iloc[0]].set_index("method")["cell"]
    a, b = solutions[first["para-max"]], solutions[first["min-feasible"]]
    diff = compare_jobs(a, b)
    assert len(diff) == a.arrived
    assert diff["accepted_min-feasible"].sum() - diff["accepted_para-max"].sum() == \
        b.accepted - a.accepted
    assert diff["differs"].sum() == (diff["accepted_para-max"] != diff["accepted_min-feasible"]).sum()
    with pytest.raises(ValueError):
        compare_jobs(a, a)


def gap_table() -> pd.DataFrame:
    """Two instances: one proven optimal (9), one with incumbent 8 and bound 10."""
    rows = [("i1", "para-max", "heuristic", 7, None), ("i1", "cpsat", "optimal", 9, 9),
            ("i2", "para-max", "heuristic", 6, None), ("i2", "cpsat", "feasible", 8, 10),
            ("i2", "milp", "feasible", 7, 11), ("i3", "para-max", "heuristic", 5, None)]
    return pd.DataFrame([{"instance": i, "method": m, "status": s, "accepted": float(a),
                          "arrived": 10.0, "blocking_rate": 1 - a / 10, "bound_accepted": b,
                          "distribution": "A", "num_jobs": 10, "seed": 0}
                         for i, m, s, a, b in rows])


def test_gaps_against_the_best_incumbent_and_bound():
    table = add_gaps(gap_table()).set_index(["instance", "method"])
    first = table.loc[("i1", "para-max")]
    assert first["opt_status"] == "proven optimum"
    assert (first["gap_accepted"], first["gap_bound_accepted"]) == (2, 2)
    assert first["gap_accepted_rel"] == pytest.approx(2 / 9)
    assert first["gap_blocking"] == pytest.approx(0.2)
    second = table.loc[("i2", "para-max")]
    assert second["opt_status"] == "bound only"
    assert (second["opt_incumbent"], second["opt_bound"]) == (8, 10)  # best of cpsat and milp
    assert second["gap_accepted"] == 2 and second["gap_bound_accepted"] == 4
    assert second["gap_bound_blocking"] == pytest.approx(0.4)
    assert second["gap_bound_accepted_rel"] == pytest.approx(0.4)
    assert pd.isna(table.loc[("i3", "para-max"), "opt_incumbent"])
    assert table.loc[("i2", "milp"), "gap_accepted"] == 1


def test_plots_return_figures(small, tmp_path):
    table, solutions, _ = small
    jobs = jobs_frame(table, solutions)
    gaps = gap_table().assign(grid="g", cell=lambda t: t["instance"] + t["method"])
    gaps = add_gaps(pd.concat([gaps, gaps.assign(num_jobs=20, instance=gaps["instance"] + "b")]))
    first = table[table["instance"] == table["instance"].iloc[0]]
    figures = [plot_blocking_by_distribution(table), plot_blocking_by_distribution(gaps),
               plot_blocking_vs_load(table), plot_gap_vs_jobs(gaps), plot_degree_vs_beta(jobs),
               plot_utilisation({r.method: solutions[r.cell] for r in first.itertuples()}),
               plot_cluster(solutions[first["cell"].iloc[0]], 1000.0)]
    for fig in figures:
        assert isinstance(fig, Figure) and fig.axes
        fig.savefig(tmp_path / "f.png")
    # the optimum bar, averaged over instances (i1 proven at blocking 0.1; i2 incumbent 0.2,
    # best bound 10 of 10 = blocking 0): solid up to the bound's 0.05, hatched up to 0.15
    bars = [p for p in figures[1].axes[0].patches if p.get_facecolor()[:3] != (1, 1, 1)]
    hatched = [p for p in bars if p.get_hatch()]
    assert len(hatched) == 1
    assert (hatched[0].get_y(), hatched[0].get_height()) == pytest.approx((0.05, 0.1))
    assert bars[-2].get_height() == pytest.approx(0.05)


def test_paper_table_side_by_side():
    rows = []
    for dist, base in zip("ABCD", (0.26, 0.27, 0.28, 0.29)):
        for seed in range(3):
            for method, offset in (("para-max", 0.0), ("random", 0.2), ("fixed:4", -0.05),
                                   ("fixed:8", -0.02)):
                rows.append({"instance": f"{dist}{seed}", "method": method,
                             "method_name": method, "status": "heuristic", "distribution": dist,
                             "num_jobs": 1001, "blocking_rate": base + offset + 0.01 * seed,
                             "accepted": 1.0, "arrived": 1001.0, "bound_accepted": np.nan})
        rows.append({"instance": f"{dist}x", "method": "cpsat", "method_name": "cpsat",
                     "status": "feasible", "distribution": dist, "num_jobs": 200,
                     "blocking_rate": 0.1, "accepted": 180.0, "arrived": 200.0,
                     "bound_accepted": 190.0})
    long = paper_table(pd.DataFrame(rows)).set_index(["row", "distribution"])
    assert long.loc[("Para_max", "A"), "blocking"] == pytest.approx(0.27)
    assert long.loc[("Para_max", "A"), "paper"] == PAPER_BLOCKING["Para_max"][0]
    assert long.loc[("best fixed degree", "C"), "note"] == "fixed:4"
    assert long.loc[("best fixed degree", "C"), "blocking"] == pytest.approx(0.24)
    assert long.loc[("exact incumbent, 200 jobs", "B"), "blocking"] == pytest.approx(0.1)
    assert long.loc[("exact bound, 200 jobs", "B"), "blocking"] == pytest.approx(0.05)
    assert pd.isna(long.loc[("PAC-ML", "A"), "blocking"])
    text = paper_markdown(long.reset_index())
    assert "| Para_max | 0.270 ± 0.010 | 0.262 |" in text
    assert "200 jobs x 1 seed; 0 of 4 proven optimal" in text
