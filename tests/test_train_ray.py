"""``pacopt train --ray``: the warm start's labelling as Ray tasks (a real local Ray instance, as
``tests/test_study.py`` runs one) gives what the serial path gives; Ctrl-C cancels the tasks; a
bad address is one line, exit 2.

The episodes are tiny paper-workload ones (``TrainConfig`` draws from the paper's family, so
they need the PipeDream profiles; skipped without them), labelled by ``tuned`` (the stop test's
by ``rollout``, whose episodes outlast the stop)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pacopt.infra.interrupt import request_stop, stoppable
from pacopt.model.paper_workload import TRAIN_SEED_RANGE

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _tasks(config, driver, count=2):
    """Round 0's tasks (the teacher drives) and a DAgger round's (``driver`` drives)."""
    rng = np.random.default_rng(0)
    return [(config, dist, int(rng.integers(*TRAIN_SEED_RANGE)), int(rng.integers(2**31)),
             None if i < count else driver)
            for dist in config.labels for i in range(count + 1)]


def test_ray_labels_the_same_steps_and_fits_the_same_policy_as_the_serial_path(pipedream_env):
    import torch
    from sb3_contrib import MaskablePPO

    from pacopt.infra.ray_cluster import ray_session
    from pacopt.learned.callbacks import weights
    from pacopt.learned.gnn import DegreePolicy
    from pacopt.learned.train import TrainConfig, _label_all, _labeller, warm_start

    config = TrainConfig(distributions=("C",), num_jobs=20, envs=2, teacher="tuned",
                         warm_episodes=2, dagger_rounds=1, dagger_episodes=1, warm_epochs=2)

    def fresh_model():
        torch.manual_seed(0)
        return MaskablePPO(DegreePolicy, config.env(), device="cpu", seed=0,
                           policy_kwargs=config.policy_kwargs())

    tasks = _tasks(config, weights(fresh_model().policy))
    with _labeller(replace(config, envs=1)) as label:
        serial = _label_all(label, tasks)
    with _labeller(config, ray="local") as label:  # starts a local Ray of 2 CPUs, shuts it down
        on_ray = _label_all(label, tasks)
    assert serial is not None and on_ray is not None and len(serial) == len(on_ray) == 3
    for (blocking, steps), (ray_blocking, ray_steps) in zip(serial, on_ray):
        assert blocking == ray_blocking and len(steps) == len(ray_steps) > 0
        for (obs, target, mask, ret), (ray_obs, ray_target, ray_mask, ray_ret) in zip(
                steps, ray_steps):
            assert obs.keys() == ray_obs.keys()
            assert all(np.array_equal(obs[k], ray_obs[k]) for k in obs)
            np.testing.assert_array_equal(target, ray_target)
            np.testing.assert_array_equal(mask, ray_mask)
            assert ret == ray_ret
            assert ray_target.flags.writeable  # copied out of Ray's object store

    # the whole warm start (teacher round, DAgger round, fits) on Ray as in this process
    runs = []
    with ray_session(None, 2):  # one Ray for the run below (warm_start uses it as it is)
        for ray in (None, "local"):
            model, lines = fresh_model(), []
            warm_start(model, replace(config, envs=1) if ray is None else config,
                       np.random.default_rng(0), log=lines.append, ray=ray)
            runs.append((lines, [p.detach().clone() for p in model.policy.parameters()]))
    (serial_lines, serial_weights), (ray_lines, ray_weights) = runs
    assert serial_lines == ray_lines and sum("DAgger" in line for line in ray_lines) == 1
    assert all(torch.equal(a, b) for a, b in zip(serial_weights, ray_weights))


def test_a_stop_cancels_the_outstanding_ray_tasks_within_seconds(pipedream_env, monkeypatch):
    import ray

    from pacopt.learned.train import TrainConfig, _label_all, _labeller

    config = TrainConfig(distributions=("C",), num_jobs=200, envs=1, teacher="rollout")
    tasks = _tasks(config, None, count=3)
    cancelled = []
    cancel = ray.cancel
    monkeypatch.setattr(ray, "cancel", lambda ref, **kw: (cancelled.append(ref), cancel(ref, **kw)))
    with stoppable(), _labeller(config, ray="local") as label:
        timer = threading.Timer(1.0, request_stop)
        timer.start()
        started = time.monotonic()
        assert _label_all(label, tasks) is None
        seconds = time.monotonic() - started
        timer.join()
    assert seconds < 1.0 + 2.0
    assert len(cancelled) >= len(tasks) - 1  # a rollout episode of 200 jobs takes longer


@pytest.mark.parametrize("address, message", [("127.0.0.1:1", "cannot reach a Ray cluster"),
                                              ("nohost", "is not an address")])
def test_a_bad_ray_address_is_one_line_exit_2(tmp_path, capsys, address, message):
    from pacopt.cli import pacopt_main

    started = time.monotonic()
    assert pacopt_main(["train", "--out", str(tmp_path / "run"), "--ray", address]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()
    assert time.monotonic() - started < 30


def test_ray_is_no_setting_of_the_run_and_may_change_on_resume(tmp_path, monkeypatch):
    """``--ray`` reaches ``train`` (each step of a recipe too), is not recorded, and a resumed
    recipe run takes the one given now."""
    import pacopt.learned.train as train_module
    from pacopt.cli import pacopt_main

    calls = []

    def fake(config, out, resume=False, log=print, recipe=None, overrides=None, ray=None,
             label_cache=None):
        if Path(out).name == "C-ddls-table" and ray == "local":
            raise KeyboardInterrupt  # the first run stops at its third step
        calls.append((Path(out).name, ray))
        return Path(out) / "best.zip"

    monkeypatch.setattr(train_module, "train", fake)
    assert pacopt_main(["train", "--out", str(tmp_path / "one"), "--ray"]) == 0
    assert calls == [("one", "local")]
    out = tmp_path / "general"
    assert pacopt_main(["train", "--recipe", "general-ddls-distilled", "--out", str(out),
                        "--ray"]) == 130
    assert "ray" not in (out / "recipe.json").read_text()
    assert pacopt_main(["train", "--resume", "--out", str(out), "--ray", "auto"]) == 0
    assert calls[1:] == [("A-ddls-table", "local"), ("B-ddls", "local"),
                         ("C-ddls-table", "auto"), ("D-ddls", "auto"),
                         ("general-ddls-distilled", "auto")]
