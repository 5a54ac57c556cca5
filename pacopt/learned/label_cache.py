"""The teacher's labelled episodes kept on disk (``pacopt train --label-cache DIR``).

A warm-start episode labelled once is read back by any later run that would label the same
one, so a student's fitting settings (epochs, regret weight, network) can be tried again
without paying the teacher again; the rollout teacher with many streams takes minutes an
episode. A run that finds every episode of its teacher's round in the cache fits at once.

An episode is the same when everything that shapes its labels is: the run's settings except
those that only fit, select or budget (:data:`NOT_LABELS`), the episode's distribution, seed
and teacher seed, the driving policy's weights (a DAgger round) and the checkpoint format (the
observations' layout). The code is not in the key: after changing the teacher, the simulator
or the observations, start a new folder.

Each episode is one file, ``<key>.npz`` (its blocking rate and labelled steps as arrays, read
without pickle), written atomically: an interrupted run loses only the episodes under way, and
a file that cannot be read is labelled again. Not a setting of the run (as ``--ray`` is not):
the labels are the same with or without it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np

from pacopt.infra.safe_write import prepare_folder, write_atomically
from pacopt.learned.checkpoint_meta import CHECKPOINT_FORMAT

#: :class:`~pacopt.learned.train_config.TrainConfig` fields that do not change an episode's
#: labels: how long and how the student is fitted and selected, the budget and the seed of the
#: run (each episode's own seeds are in the key). Any other field is in the key.
NOT_LABELS = frozenset({
    "minutes", "max_steps", "envs", "subprocess", "seed", "init", "warm_episodes",
    "warm_epochs", "dagger_rounds", "dagger_episodes", "improve_keep", "improve_from",
    "regret_weight", "learning_rate", "n_steps", "batch_size", "n_epochs", "gae_lambda",
    "clip_range", "ent_coef", "eval_every", "validation_seeds", "torch_threads"})


class LabelCache:
    """Labelled episodes in ``folder`` (module doc), for the tasks of
    :func:`pacopt.learned.train.warm_start` (``(config, distribution, seed, teacher seed,
    driver weights or None)``)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        prepare_folder(self.folder, "--label-cache")

    def get(self, task) -> tuple[float, list] | None:
        """The episode's blocking rate and labelled steps, if the cache holds them."""
        path = self._path(task)
        try:
            with np.load(path, allow_pickle=False) as data:
                return _unpacked(data)
        except (OSError, ValueError, KeyError):  # absent, cut short or not ours: label it
            return None

    def put(self, task, episode: tuple[float, list]) -> None:
        """Keep a finished episode (one cut short by Ctrl-C, blocking NaN, is not kept)."""
        if math.isnan(episode[0]):
            return
        arrays = _packed(*episode)
        write_atomically(self._path(task), lambda tmp: _save(tmp, arrays), "--label-cache")

    def _path(self, task) -> Path:
        return self.folder / f"{episode_key(task)}.npz"


def episode_key(task) -> str:
    """What identifies a warm-start task's labels (module doc), as a hex digest."""
    config, distribution, seed, teacher_seed, driver = task
    settings = {k: v for k, v in asdict(config).items() if k not in NOT_LABELS}
    digest = hashlib.sha256(json.dumps(
        {"format": CHECKPOINT_FORMAT, "settings": settings, "distribution": distribution,
         "seed": int(seed), "teacher_seed": int(teacher_seed)},
        sort_keys=True).encode())  # a setting JSON cannot hold fails here, not silently
    for name, tensor in sorted((driver or {}).items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().numpy().tobytes())
    return digest.hexdigest()[:40]


def _packed(blocking: float, steps: list) -> dict[str, np.ndarray]:
    """An episode as named arrays: ``obs/KEY`` stacked over the steps, ``target``, ``mask``,
    ``return`` and ``blocking``."""
    arrays = {"blocking": np.array(blocking), "count": np.array(len(steps))}
    if steps:
        for key in steps[0][0]:
            arrays[f"obs/{key}"] = np.stack([step[0][key] for step in steps])
        for i, name in ((1, "target"), (2, "mask"), (3, "return")):
            arrays[name] = np.stack([np.asarray(step[i]) for step in steps])
    return arrays


def _unpacked(data) -> tuple[float, list]:
    count = int(data["count"])
    if not count:
        return float(data["blocking"]), []
    keys = [name[len("obs/"):] for name in data.files if name.startswith("obs/")]
    obs = {key: data[f"obs/{key}"] for key in keys}
    target, mask, returns = data["target"], data["mask"], data["return"]
    steps = [({key: obs[key][i] for key in keys}, target[i], mask[i], returns[i].item())
             for i in range(count)]
    return float(data["blocking"]), steps


def _save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with path.open("wb") as handle:  # a handle: np.savez would add ".npz" to the name
        np.savez_compressed(handle, **arrays)
