"""What runs while the agent trains: PPO's callbacks (a progress bar, the training curve,
validation and ``best.zip``, ``latest.zip``, the evaluation grid, the budget) and ``curve.csv``.

Composed in :func:`pacopt.learned.train.train` with sb3's CallbackList and EveryNTimesteps;
sb3's other callbacks do not fit: EvalCallback / MaskableEvalCallback score episode returns
over whatever episodes the environment draws (validation is the blocking rate on fixed
distribution x seed episodes), and CheckpointCallback keeps one ``PREFIX_STEPS_steps.zip`` per
save, written in place (resuming wants one ``latest.zip``, replaced atomically, with its
``run.json``). How a policy is scored and how a checkpoint is written are handed in (they are
the fit loop's: :func:`~pacopt.learned.train.validate_policy`,
:func:`~pacopt.learned.train.save_model`, :func:`~pacopt.learned.train.save_state`).
"""

from __future__ import annotations

import csv
import io
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback, EventCallback, EveryNTimesteps
from stable_baselines3.common.logger import KVWriter

from pacopt.infra.interrupt import stop_requested
from pacopt.infra.progress import tqdm
from pacopt.infra.safe_write import write_atomically
from pacopt.learned.env import PartitionEnv
from pacopt.learned.gnn import DegreePolicy
from pacopt.learned.train_config import TrainConfig


def weights(policy: DegreePolicy) -> dict[str, torch.Tensor]:
    """A copy of the policy's weights (a ``state_dict`` that later training leaves alone)."""
    return {k: v.detach().clone() for k, v in policy.state_dict().items()}


def _elapsed(state: dict) -> float:
    """Training seconds of the run so far, earlier (resumed) calls included."""
    return state["seconds"] + time.time() - state["started"]


def _finished_episodes(locals_: dict):
    """The blocking rates of the training episodes that ended in this step."""
    for info, done in zip(locals_["infos"], locals_["dones"]):
        if done and "blocking_rate" in info:
            yield info["blocking_rate"]


class ProgressBar(BaseCallback):
    """A progress bar of environment steps (out of ``max_steps``, if any) with the mean blocking
    rate of the last 20 training episodes and the best validation score. (sb3's
    ProgressBarCallback counts to ``learn``'s ``total_timesteps``, which a wall-clock-bound run
    sets out of reach, and shows no scores.)"""

    def __init__(self, max_steps: int | None, state: dict):
        super().__init__()
        self.max_steps, self.state = max_steps, state
        self.recent: deque[float] = deque(maxlen=20)
        self.bar = None

    def _on_training_start(self) -> None:
        self.bar = tqdm(total=self.max_steps or None, initial=self.num_timesteps, unit="step",
                        desc="PPO", disable=None, dynamic_ncols=True)

    def _on_step(self) -> bool:
        self.bar.update(self.num_timesteps - self.bar.n)
        for blocking in _finished_episodes(self.locals):
            self.recent.append(blocking)
            best = self.state.get("best_score")
            self.bar.set_postfix(blocking=f"{np.mean(self.recent):.3f}",
                                 best="-" if best is None else f"{best:.4f}")
        return True

    def _on_training_end(self) -> None:
        self.bar.close()


class TrainingCurve(BaseCallback):
    """A ``train`` row in ``curve.csv`` for each finished training episode."""

    def __init__(self, out: Path, state: dict):
        super().__init__()
        self.out, self.state = out, state

    def _on_step(self) -> bool:
        for blocking in _finished_episodes(self.locals):
            _append_curve(self.out, {"kind": "train", "steps": self.num_timesteps,
                                     "seconds": _elapsed(self.state), "blocking_rate": blocking})
        return True


class Validation(EventCallback):
    """Each time it is stepped: the deterministic policy plays the validation episodes
    (``score(env, policy, labels, seeds)``, the mean blocking rate over ``config``'s labels and
    validation seeds, on one environment made at the first step), the score goes to
    ``curve.csv``, the policy to ``best.zip`` (``save(model, path, state)``, and
    :attr:`best_weights`) if it is the best so far; then its ``callback`` runs (as
    EvalCallback's ``callback_after_eval``). :func:`~pacopt.learned.train.train` steps it after
    each warm-start round and around PPO, and :class:`OnStepGrid` every ``eval_every`` PPO
    steps."""

    def __init__(self, out: Path, config: TrainConfig, state: dict,
                 score: Callable[..., float], save: Callable, after: BaseCallback):
        super().__init__(after)
        self.out, self.config, self.state = out, config, state
        self.score, self.save = score, save
        self.env: PartitionEnv | None = None
        self.best_weights: dict | None = None  # of the best policy this run has scored

    def _on_step(self) -> bool:
        if self.env is None:
            self.env = self.config.env()
        score = self.score(self.env, self.model.policy, self.config.labels,
                           self.config.validation_seeds)
        if stop_requested():  # Ctrl-C: no score; the run is saved by train
            return True
        _append_curve(self.out, {"kind": "validation", "steps": self.num_timesteps,
                                 "seconds": _elapsed(self.state), "blocking_rate": score})
        if self.state.get("best_score") is None or score < self.state["best_score"]:
            self.state["best_score"] = score  # unrounded: a tie must not replace the first
            self.save(self.model, self.out / "best.zip", self.state)
            self.best_weights = weights(self.model.policy)
        return self._on_event()


class SaveLatest(BaseCallback):
    """Each time it is stepped: ``latest.zip`` and ``run.json`` (``save(model, out, state)``:
    :func:`~pacopt.learned.train.save_state`)."""

    def __init__(self, out: Path, state: dict, save: Callable):
        super().__init__()
        self.out, self.state, self.save = out, state, save

    def _on_step(self) -> bool:
        self.save(self.model, self.out, self.state)
        return True


class OnStepGrid(EveryNTimesteps):
    """sb3's EveryNTimesteps on a fixed grid: its callback runs at the first step at or past
    n, 2n, 3n... (a late trigger does not shift the later ones), continuing a resumed run's grid
    from ``state["next_eval"]``, which it keeps."""

    def __init__(self, n_steps: int, callback: BaseCallback, state: dict):
        super().__init__(n_steps, callback)
        self.state = state
        self.last_time_trigger = state.setdefault("next_eval", n_steps) - n_steps

    def _on_step(self) -> bool:
        if self.num_timesteps - self.last_time_trigger < self.n_steps:
            return True
        self.last_time_trigger += self.n_steps
        self.state["next_eval"] = self.last_time_trigger + self.n_steps
        return self._on_event()


class StopAt(BaseCallback):
    """Stops PPO at ``max_steps`` environment steps (at once: ``learn`` itself checks its
    ``total_timesteps`` only between rollouts) or at the wall-clock ``deadline``."""

    def __init__(self, max_steps: int | None, deadline: float):
        super().__init__()
        self.max_steps, self.deadline = max_steps, deadline

    def _on_step(self) -> bool:
        over_steps = self.max_steps is not None and self.num_timesteps >= self.max_steps
        return not (over_steps or time.time() >= self.deadline or stop_requested())


#: ``curve.csv``'s columns: every row has the first four; ``ppo`` rows (one per PPO update)
#: also the update's statistics, as sb3 logs them under ``train/``.
CURVE_COLUMNS = ("kind", "steps", "seconds", "blocking_rate")
PPO_COLUMNS = ("policy_gradient_loss", "value_loss", "entropy_loss", "approx_kl",
               "clip_fraction", "explained_variance", "learning_rate")


def _append_curve(out: Path, row: dict) -> None:
    path = out / "curve.csv"
    columns = [*CURVE_COLUMNS, *PPO_COLUMNS]
    if path.exists():
        with path.open(newline="") as handle:
            header = next(csv.reader(handle), [])
        if header and header != columns:  # a run from before the PPO columns: widen it once
            with path.open(newline="") as handle:
                rows = list(csv.DictReader(handle))
            _write_curve(path, columns, rows)
    new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        if new:
            writer.writeheader()
        writer.writerow(row)


def _write_curve(path: Path, columns: list[str], rows: list[dict]) -> None:
    text = io.StringIO()
    writer = csv.DictWriter(text, columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    write_atomically(path, text.getvalue())


class PpoStatistics(KVWriter):
    """sb3's logger output as ``ppo`` rows of ``curve.csv``: each PPO update's losses, KL,
    entropy, clip fraction and explained variance, so a run shows why PPO does or does not
    improve on its starting policy."""

    def __init__(self, out: Path, state: dict):
        self.out, self.state = out, state

    def write(self, key_values: dict, key_excluded: dict, step: int = 0) -> None:
        stats = {name: key_values[f"train/{name}"] for name in PPO_COLUMNS
                 if f"train/{name}" in key_values}
        if stats:  # the first dump comes before any update
            _append_curve(self.out, {"kind": "ppo", "steps": step,
                                     "seconds": _elapsed(self.state), "blocking_rate": "",
                                     **{k: float(v) for k, v in stats.items()}})

    def close(self) -> None:
        pass
