"""``pacopt train --label-cache DIR``: a warm start's labelled episodes are kept and read back
by a later run with the same labelling settings, which then fits the same policy without
playing them; a fitting setting does not change the key, a labelling one does; a damaged file
is labelled again; a bad folder is one line, exit 2 (that it reaches each step of a recipe
and is not recorded: `tests/test_checkpoint_meta.py`).

Tiny paper-workload episodes labelled by ``tuned`` (they need the PipeDream profiles; skipped
without them)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pacopt.model.paper_workload import TRAIN_SEED_RANGE

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _config():
    from pacopt.learned.train_config import TrainConfig

    return TrainConfig(distributions=("C",), num_jobs=20, envs=1, teacher="tuned",
                       warm_episodes=2, dagger_rounds=1, dagger_episodes=1, warm_epochs=2)


def _fresh_model(config):
    import torch
    from sb3_contrib import MaskablePPO

    from pacopt.learned.gnn import DegreePolicy

    torch.manual_seed(0)
    return MaskablePPO(DegreePolicy, config.env(), device="cpu", seed=0,
                       policy_kwargs=config.policy_kwargs())


def _warm_start(config, cache):
    from pacopt.learned.train import warm_start

    model, lines = _fresh_model(config), []
    warm_start(model, config, np.random.default_rng(0), log=lines.append, label_cache=cache)
    return [line for line in lines if "blocking" in line], [
        p.detach().clone() for p in model.policy.parameters()]


def test_a_second_run_reads_every_episode_back_and_fits_the_same_policy(pipedream_env,
                                                                         tmp_path):
    import torch

    config, cache = _config(), tmp_path / "labels"
    played, first = _warm_start(config, cache)
    assert len(played) == 3 and not any("label cache" in line for line in played)
    assert len(list(cache.glob("*.npz"))) == 3  # two teacher episodes and a DAgger one

    read, second = _warm_start(config, cache)
    assert read == [line + " (from the label cache)" for line in played]  # DAgger's too
    assert all(torch.equal(a, b) for a, b in zip(first, second))

    # fitting longer reads the same episodes; another labelling setting labels anew
    more_epochs, _ = _warm_start(replace(config, warm_epochs=3, regret_weight=2.0), cache)
    assert sum("label cache" in line for line in more_epochs) >= 2  # the teacher's round
    other, _ = _warm_start(replace(config, teacher_temperature=0.5), cache)
    assert not any("label cache" in line for line in other)


def test_an_episode_comes_back_as_it_was_labelled_and_a_damaged_one_is_labelled_again(
        pipedream_env, tmp_path):
    from pacopt.learned.callbacks import weights
    from pacopt.learned.label_cache import LabelCache, episode_key
    from pacopt.learned.train import _label_all, _labeller

    config = _config()
    rng = np.random.default_rng(1)
    driver = weights(_fresh_model(config).policy)
    tasks = [(config, "C", int(rng.integers(*TRAIN_SEED_RANGE)), 7, None),
             (config, "C", int(rng.integers(*TRAIN_SEED_RANGE)), 7, driver)]
    assert episode_key(tasks[0]) != episode_key((*tasks[0][:4], driver))
    cache = LabelCache(tmp_path)
    with _labeller(config) as label:
        labelled = _label_all(label, tasks, cache.put)
    assert len(list(tmp_path.glob("*.npz"))) == 2
    for task, (blocking, steps) in zip(tasks, labelled):
        again = cache.get(task)
        assert again is not None and again[0] == blocking and len(again[1]) == len(steps) > 0
        for (obs, target, mask, ret), (obs2, target2, mask2, ret2) in zip(steps, again[1]):
            assert obs.keys() == obs2.keys()
            for key in obs:
                assert obs2[key].dtype == obs[key].dtype
                np.testing.assert_array_equal(obs[key], obs2[key])
            np.testing.assert_array_equal(target, target2)
            np.testing.assert_array_equal(mask, mask2)
            assert ret2 == pytest.approx(ret, abs=0)
    (tmp_path / f"{episode_key(tasks[0])}.npz").write_bytes(b"cut short")
    assert cache.get(tasks[0]) is None and cache.get(tasks[1]) is not None
    cache.put(tasks[0], (float("nan"), labelled[0][1]))  # an interrupted episode: not kept
    assert cache.get(tasks[0]) is None


def test_a_label_cache_that_is_a_file_is_one_line_exit_2(tmp_path, capsys):
    from pacopt.cli import pacopt_main

    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = pacopt_main(["train", "--dist", "C", "--jobs", "20", "--out", str(tmp_path / "run"),
                 "--label-cache", str(blocker)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "--label-cache" in err and "is not a folder" in err

