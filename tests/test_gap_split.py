"""The gap split into hindsight, placement and degree choice (pacopt.analysis.gap_split): the
parts add up to the method's blocking, the function, the study-table form and the plot agree."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pacopt.analysis import (
    GapSplit,
    gap_split,
    gap_split_frame,
    load_study,
    plot_gap_split,
    run_study,
    split_gap,
    study_from_dict,
)
from pacopt.infra.errors import InputError
from pacopt.model.solution import JobRecord, Solution

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "graphs"
GRAPHS = {g: {"file": str(EXAMPLES / f"{g}.json")} for g in ("cnn", "resnet", "transformer")}
RULES = ["min-feasible", "fixed-or-min:4", "fixed-or-min:8", "fixed:4"]


def fake(accepted, arrived=10, method="m", bound=None, status="heuristic"):
    jobs = [JobRecord(id=f"j{i}", graph="g", arrival_ms=i, max_jct_fraction=1.0,
                      deadline_ms=1.0, accepted=i < accepted) for i in range(arrived)]
    return Solution(method=method, preset="ddls", status=status, jobs=jobs,
                    bound_accepted=bound)


def test_the_parts_add_up_to_the_methods_blocking():
    split = split_gap(fake(8, bound=9, status="feasible"),
                      {"a": fake(7), "b": fake(6), "c": fake(7)},
                      {"a": fake(4), "b": fake(5)}, fake(5, method="pac-ml"))
    assert split == GapSplit(arrived=10, bound=9, incumbent=8, best_fit=7, placed=4,
                             method=5, rule="a", method_name="pac-ml")
    parts = split.parts
    assert parts == pytest.approx({"floor": 0.1, "unproven": 0.1, "hindsight": 0.1,
                                   "placement": 0.3, "degree": -0.1})
    assert sum(parts.values()) == pytest.approx(split.method_blocking) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="no bound"):
        split_gap(fake(8), {"a": fake(7)}, {"a": fake(4)}, fake(5))


def test_gap_split_runs_every_part_on_an_instance():
    from test_rollout import contended

    instance = contended(0, num_jobs=25)
    split = gap_split(instance, "tuned", rules=RULES, time_limit=5, threads=1)
    assert split.arrived == 25 and split.rule in RULES and split.placer == "first-fit"
    assert split.bound >= split.incumbent >= split.best_fit
    assert sum(split.parts.values()) == pytest.approx(split.method_blocking)
    with pytest.raises(InputError, match="not an online method"):
        gap_split(instance, "cpsat")


def small_study(tmp_path) -> dict:
    methods = [{"name": r, "placement": p, "label": f"{r} @{p}"} for r in RULES
               for p in ("first-fit", "best-fit")]
    methods += [{"name": "tuned", "label": "tuned"},
                {"name": "tuned", "placement": "best-fit", "label": "tuned @best-fit"},
                {"name": "cpsat", "time_limit": 5, "threads": 1}]
    return {"name": "split", "grids": [{"name": "g", "methods": methods, "workload": {
        "graphs": GRAPHS, "distributions": ["A", "B"], "seeds": 1, "num_jobs": 20,
        "interarrival_ms": 150}}]}


def test_the_split_of_a_study_table_and_its_plot(tmp_path):
    table = run_study(study_from_dict(small_study(tmp_path)), tmp_path / "out", workers=1,
                      progress=False, plots=False)
    assert set(table["placement"].dropna()) == {"first-fit", "best-fit", "offline"}
    frame = gap_split_frame(table, "tuned")
    assert list(frame["distribution"]) == ["A", "B"]
    for row in frame.itertuples():
        parts = sum(getattr(row, p) for p in ("floor", "unproven", "hindsight", "placement",
                                              "degree"))
        assert parts == pytest.approx(row.method_blocking)
        assert row.rule in RULES and row.incumbent >= row.best_fit
    figure = plot_gap_split(frame)
    assert len(figure.axes[0].patches) >= 2 * 5
    assert gap_split_frame(table, "no-such-method").empty
    # a method under best fit: the rule under its own placer, so no placement part
    best = gap_split_frame(table, "tuned @best-fit")
    assert (best["placement"] == 0).all() and (best["placer"] == "best-fit").all()


def test_a_placer_that_does_not_fit_a_grids_preset_is_a_study_error(tmp_path):
    data = small_study(tmp_path)
    data["grids"][0]["methods"] = [{"name": "tuned", "placement": "compact"}]
    with pytest.raises(InputError, match=r"method 'tuned'.*placer 'compact' does not fit"):
        study_from_dict(data)
    data["grids"][0]["methods"] = [{"name": "tuned", "placement": "worst-fit"}]
    with pytest.raises(InputError, match="unknown placer 'worst-fit'"):
        study_from_dict(data)


def test_the_placement_study_file_is_valid(pipedream_env):
    study = load_study(ROOT / "studies" / "placement.yaml")
    labels = {cell.method for cell in study.cells}
    assert {"tuned", "pac-ml", "tuned @best-fit", "fixed-or-min:8 @best-fit",
            "fixed-or-min:8 @first-fit", "cpsat"} <= labels
    assert yaml.safe_load((ROOT / "studies" / "placement.yaml").read_text())["name"] == "placement"
