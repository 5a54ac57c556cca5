"""plot_training_curve and plot_rounds: a training run's curve, from its CSV or its frame."""

from __future__ import annotations

import pandas as pd
import pytest

from pacopt.analysis import plot_rounds, plot_training_curve
from pacopt.infra.errors import InputError
from pacopt.learned.agent import CHECKPOINT_DIR

CURVE = pd.DataFrame({
    "kind": ["train"] * 6 + ["validation"] * 2,
    "steps": [100, 200, 300, 400, 500, 600, 300, 600],
    "seconds": range(8),
    "blocking_rate": [0.4, 0.3, 0.35, 0.25, 0.2, 0.22, 0.3, 0.21]})


def lines(fig):
    return {line.get_label(): line for line in fig.axes[0].get_lines()}


def test_curve_lines_and_reference(tmp_path):
    path = tmp_path / "run.curve.csv"
    CURVE.to_csv(path, index=False)
    fig = plot_training_curve(path, title="run", reference={"tuned": 0.18}, window=2)
    drawn = lines(fig)
    episodes = drawn["training episode (stochastic policy)"]
    assert list(episodes.get_xdata()) == [100, 200, 300, 400, 500, 600]
    assert list(drawn["rolling mean of 2 episodes"].get_ydata()) == pytest.approx(
        [0.4, 0.35, 0.325, 0.3, 0.225, 0.21])
    validation = drawn["validation (deterministic policy)"]
    assert list(validation.get_xdata()) == [300, 600]
    assert list(validation.get_ydata()) == [0.3, 0.21]
    assert list(drawn["tuned"].get_ydata()) == [0.18, 0.18]
    assert fig.axes[0].get_title() == "run"
    # the frame itself gives the same figure
    assert set(lines(plot_training_curve(CURVE, reference={"tuned": 0.18}, window=2))) == set(drawn)


def test_shipped_curve_plots():
    shipped = sorted(CHECKPOINT_DIR.glob("*.curve.csv"))
    if not shipped:
        pytest.skip("no shipped training curve")
    for curve in shipped:  # some end at the imitation start: validation rows only
        drawn = lines(plot_training_curve(curve))
        assert "validation (deterministic policy)" in drawn
        trained = (pd.read_csv(curve)["kind"] == "train").sum()
        episodes = drawn.get("training episode (stochastic policy)")
        assert (0 if episodes is None else len(episodes.get_xdata())) == trained


def test_bad_curve_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        plot_training_curve(tmp_path / "missing.csv")
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="kind, steps"):
        plot_training_curve(wrong)
    with pytest.raises(InputError, match="window"):
        plot_training_curve(CURVE, window=0)
    with pytest.raises(InputError, match="blocking_rate"):
        plot_training_curve(CURVE.drop(columns="blocking_rate"))


def test_rounds_are_the_validation_rows_of_the_imitation_rounds(tmp_path):
    curve = pd.DataFrame({"kind": ["validation", "validation", "validation", "validation"],
                          "steps": [0, 0, 0, 64], "seconds": [60, 180, 300, 310],
                          "blocking_rate": [0.27, 0.20, 0.15, 0.15]})
    path = tmp_path / "pi.curve.csv"
    curve.to_csv(path, index=False)
    fig = plot_rounds(path, reference={"tuned": 0.148})
    drawn = lines(fig)
    rounds = drawn["validation after the round (deterministic policy)"]
    assert list(rounds.get_xdata()) == [0, 1, 2]  # PPO's row (steps 64) is no round
    assert list(rounds.get_ydata()) == [0.27, 0.20, 0.15]
    assert [t.get_text() for t in fig.axes[0].texts] == ["1 min", "3 min", "5 min"]
    assert list(drawn["tuned"].get_ydata()) == [0.148, 0.148]
    assert "best validated so far" not in drawn
    curve.loc[2, "blocking_rate"] = 0.22  # a round that validates worse than the one before
    best = lines(plot_rounds(curve, best_so_far=True))["best validated so far"]
    assert list(best.get_ydata()) == [0.27, 0.20, 0.20]
    with pytest.raises(InputError, match="blocking_rate"):
        plot_rounds(curve.drop(columns="blocking_rate"))
