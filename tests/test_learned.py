"""The learned partitioner: environment contract, masks, seeds, a real learning signal, checkpoints.

Everything here runs on the bundled graphs (no download) and takes seconds."""

import copy
import json
import pickle
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st
from sb3_contrib import MaskablePPO
from stable_baselines3.common.logger import Logger

from pacopt.infra.errors import InputError
from pacopt.learned.agent import LearnedPolicy, load_checkpoint
from pacopt.learned.env import PartitionEnv, WorkloadFamily
from pacopt.learned.features import (
    _BETA_EDGES,
    BETA_BINS,
    MAX_NODES,
    _histogram,
    encode_graph,
)
from pacopt.learned.gnn import DegreePolicy, greedy_degree
from pacopt.learned.train import play
from pacopt.model.instance import instance_from_dict
from pacopt.solvers.api import solve

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def family(num_jobs=120, **kwargs) -> WorkloadFamily:
    data = json.loads((EXAMPLES / "bundled.json").read_text())
    data["workload"]["num_jobs"] = num_jobs
    data["horizon_ms"] = num_jobs * data["workload"]["interarrival_ms"]
    return WorkloadFamily.from_instance_data(data, EXAMPLES, **kwargs)


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny networks: one torch thread each, as training runs them (two threads fighting other
    processes for two cores are many times slower)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def env():
    return PartitionEnv(family())


def test_env_passes_gymnasium_checker(env):
    check_env(env, skip_render_check=True)


def test_reset_seed_reproduces_the_episode(env):
    first, info1 = env.reset(seed=7)
    again, info2 = env.reset(seed=7)
    assert info1 == info2
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])
    other, info3 = env.reset(seed=8)
    assert info3 != info1


def test_options_fix_distribution_and_seed(env):
    _, info = env.reset(options={"distribution": "C", "seed": 10_001})
    assert info == {"distribution": "C", "seed": 10_001}
    instance = env.family.instance("C", 10_001)
    assert [j.max_jct_fraction for j in env.episode.instance.jobs] == \
        [j.max_jct_fraction for j in instance.jobs]


def test_mask_allows_reject_and_only_degrees_that_are_placed_in_time(env):
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    done = False
    while not done:
        mask = env.action_masks()
        assert mask[0]
        decision = env.episode.decision
        options = decision.options()
        for d in np.flatnonzero(mask[1:]) + 1:
            assert options.placeable[d] and options.jct_ms[d] <= decision.deadline_ms
        action = int(rng.choice(np.flatnonzero(mask)))
        _, reward, done, _, info = env.step(action)
        # an allowed degree other than reject is always accepted: the mask is exact
        assert (reward == 1.0) == (action != 0)
        assert info["accepted"] == (action != 0)


def test_graphs_larger_than_the_padding_are_coarsened():
    from pacopt.model.graph import JobGraph, Op

    n = MAX_NODES * 3
    ops = tuple(Op(f"o{i}", 1.0, 2.0, 1e6, 1e3) for i in range(n))
    graph = JobGraph("chain", ops, tuple((i, i + 1) for i in range(n - 1)), n - 1)
    arrays = encode_graph(graph)
    assert arrays.sig[2] == MAX_NODES  # nodes after coarsening
    assert arrays.sig[3] == MAX_NODES - 1  # a chain of segments
    assert (arrays.edge_index[:, :MAX_NODES - 1] >= 0).all()


def _fresh_model(env, seed=0, **kwargs):
    return MaskablePPO(DegreePolicy, env, seed=seed, device="cpu", verbose=0, **kwargs)


def test_masked_degree_is_never_chosen(env):
    model = _fresh_model(env)
    obs, _ = env.reset(seed=11)
    done = False
    while not done:
        mask = env.action_masks()
        action, _ = model.predict(obs, action_masks=mask, deterministic=False)
        assert mask[int(action)]
        obs, _, done, _, _ = env.step(int(action))


def test_the_greedy_degree_is_the_distributions_most_likely_allowed_one(env):
    """The agent's play (the largest allowed logit) is the masked distribution's mode, on
    every state of an episode, under random masks too."""
    from pacopt.learned.gnn import degree_distribution

    policy = _fresh_model(env, seed=3).policy
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=5)
    done = False
    while not done:
        for mask in (env.action_masks(), rng.random(env.action_space.n) < 0.5):
            mask[0] = True
            mode = int(degree_distribution(policy, obs, mask).get_actions(deterministic=True)[0])
            assert greedy_degree(policy, obs, mask) == mode
        obs, _, done, _, _ = env.step(greedy_degree(policy, obs, env.action_masks()))


def test_play_gives_the_networks_own_logits_and_follows_its_weights(env):
    """Play's traced head (``play_logits``) gives the logits of the network's forward pass to
    the bit on every state of an episode, sees a later change of the weights, and leaves
    copies and pickles of the network working."""
    policy = _fresh_model(env, seed=3).policy
    policy.set_training_mode(False)
    extractor = policy.features_extractor

    def forward(obs):
        tensors = {k: torch.from_numpy(v[None]) for k, v in obs.items()}
        return extractor(tensors)[0, :extractor.num_actions]

    obs, _ = env.reset(seed=5)
    done = False
    with torch.no_grad():
        while not done:
            assert torch.equal(extractor.play_logits(obs), forward(obs))
            played = obs
            obs, _, done, _, _ = env.step(greedy_degree(policy, obs, env.action_masks()))
        obs = played  # the last decision's (the final observation stands for no job)
        extractor.scorer[-1].bias.add_(1.0)
        assert torch.equal(extractor.play_logits(obs), forward(obs))
    twin = copy.deepcopy(extractor)
    with torch.no_grad():
        twin.scorer[-1].bias.add_(1.0)  # the copy plays its own weights
        assert torch.allclose(twin.play_logits(obs), extractor.play_logits(obs) + 1.0)
    assert pickle.loads(pickle.dumps(extractor)).num_actions == extractor.num_actions


def test_degree_features_score_any_number_of_degrees(env, tmp_path):
    """With degree features one network scores the degrees of any cluster: a degree's logit
    does not depend on how many more degrees the instance allows, and a checkpoint trained
    on degrees 0..16 plays an instance allowing 32 partitions per op (validated), where a
    checkpoint with the table of 17 degrees is refused with one line."""
    kwargs = {"features_extractor_kwargs": {"spill": True, "degree_features": True}}
    model = _fresh_model(env, seed=4, policy_kwargs=kwargs)
    model.policy.set_training_mode(False)
    extractor = model.policy.features_extractor
    obs, _ = env.reset(seed=6)
    for _ in range(5):
        obs, *_ = env.step(greedy_degree(model.policy, obs, env.action_masks()))
    more = dict(obs, actions=np.concatenate([obs["actions"], obs["actions"][1:]]))
    with torch.no_grad():
        assert len(extractor.play_logits(more)) == 33
        assert torch.allclose(extractor.play_logits(more)[:17], extractor.play_logits(obs))
    model.save(tmp_path / "features.zip")
    _fresh_model(env, seed=4).save(tmp_path / "table.zip")
    data = json.loads((EXAMPLES / "bundled.json").read_text())
    data["workload"]["num_jobs"] = 60
    data["model"] = {**data.get("model", {}), "max_partitions_per_op": 32}
    wide = instance_from_dict(data, EXAMPLES)
    result = solve(wide, "pac-ml", checkpoint=tmp_path / "features.zip")
    assert result.validated and len(result.jobs) == 60
    with pytest.raises(InputError, match="trained for degrees 0..16; this instance allows 0..32"):
        solve(wide, "pac-ml", checkpoint=tmp_path / "table.zip")


def _blocking(policy, env, seeds=(10_000, 10_001), dist="A"):
    return float(np.mean([play(env, lambda e, o, m: greedy_degree(policy, o, m), dist, s)[0]
                          for s in seeds]))


def test_a_tiny_training_run_learns(tmp_path):
    """A few thousand PPO steps (no imitation) beat both the untrained network and the paper's
    Random on held-out seeds: a real learning signal."""
    import torch

    torch.manual_seed(0)
    train_env = PartitionEnv(family(distributions=("A",)))
    model = _fresh_model(train_env, n_steps=256, batch_size=64, n_epochs=8, learning_rate=1e-3)
    eval_env = PartitionEnv(family(distributions=("A",)))
    untrained = _blocking(model.policy, eval_env)
    model.set_logger(Logger(folder=None, output_formats=[]))  # else sb3 leaves a /tmp folder
    model.learn(total_timesteps=3000)
    trained = _blocking(model.policy, eval_env)
    random_blocking = np.mean([solve(eval_env.family.instance("A", s), "random", seed=0)
                               .blocking_rate for s in (10_000, 10_001)])
    assert trained < untrained - 0.02
    assert trained < random_blocking
    model.save(tmp_path / "tiny.zip")
    # the saved agent plays the same as the trained one, twice, through solve()
    instance = eval_env.family.instance("A", 10_000)
    a = solve(instance, "pac-ml", checkpoint=tmp_path / "tiny.zip", seed=1)
    b = solve(instance, "pac-ml", checkpoint=tmp_path / "tiny.zip", seed=2)
    assert a.validated and b.validated
    assert [j.degree for j in a.jobs] == [j.degree for j in b.jobs]
    assert a.blocking_rate == pytest.approx(
        play(eval_env, lambda e, o, m: greedy_degree(model.policy, o, m), "A", 10_000)[0])


def test_missing_or_corrupt_checkpoint_is_one_clear_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_checkpoint(str(tmp_path / "nope.zip"))
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip file at all")
    with pytest.raises(InputError, match="not a pacopt agent checkpoint"):
        LearnedPolicy(checkpoint=bad)
    instance = EXAMPLES / "bundled.json"
    proc = subprocess.run(["solve", str(instance), "--method", "pac-ml", "--checkpoint",
                           str(bad), "--out", str(tmp_path / "r.json")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_the_warm_start_plays_its_episodes_in_parallel_as_in_sequence(pipedream_env):
    """The warm start's episodes (rollout teacher, then a DAgger round) give the same labels and
    the same fitted policy whether one process plays them or a pool of two does."""
    import torch

    from pacopt.learned.train import TrainConfig, warm_start

    runs = []
    for envs in (1, 2):
        config = TrainConfig(distributions=("B", "C"), num_jobs=40, envs=envs, teacher="rollout",
                             warm_episodes=1, dagger_episodes=1, warm_epochs=2)
        torch.manual_seed(0)
        model = _fresh_model(config.env(), policy_kwargs=config.policy_kwargs())
        lines: list[str] = []
        warm_start(model, config, np.random.default_rng(0), log=lines.append)
        runs.append((lines, [p.detach().clone() for p in model.policy.parameters()]))
    (serial, serial_weights), (pooled, pooled_weights) = runs
    assert serial == pooled and sum("DAgger" in line for line in serial) == 2
    assert all(torch.equal(a, b) for a, b in zip(serial_weights, pooled_weights))


def test_dagger_rounds_that_would_overrun_the_deadline_are_skipped(pipedream_env):
    """The teacher's round always runs; a DAgger round that cannot end in time does not."""
    import time

    from pacopt.learned.train import TrainConfig, warm_start

    config = TrainConfig(distributions=("C",), num_jobs=30, envs=1, teacher="tuned",
                         warm_episodes=1, dagger_rounds=1, warm_epochs=1)
    model = _fresh_model(config.env(), policy_kwargs=config.policy_kwargs())
    lines: list[str] = []
    warm_start(model, config, np.random.default_rng(0), log=lines.append, deadline=time.time())
    assert any("teacher on C" in line for line in lines)
    assert not any("policy (DAgger" in line for line in lines)
    assert "warm start: no time left for DAgger round 1" in lines


def test_a_run_initialised_from_an_older_checkpoint_takes_its_network_shape(tmp_path,
                                                                           pipedream_env):
    """--init from a checkpoint built without the spill features trains that network (the
    default would have a wider head and fail to load it)."""
    from pacopt.learned.train import TrainConfig, train

    config = TrainConfig(distributions=("C",), num_jobs=30, envs=1, max_steps=64, n_steps=64,
                         batch_size=32, minutes=1, teacher="", validation_seeds=(9000,))
    old = _fresh_model(config.env(), policy_kwargs={"features_extractor_kwargs": {"spill": False}})
    old.save(tmp_path / "old.zip")
    best = train(replace(config, init=str(tmp_path / "old.zip")), tmp_path / "run",
                 log=lambda _: None)
    assert not load_checkpoint(str(best.resolve())).features_extractor.spill
    assert json.loads((tmp_path / "run" / "run.json").read_text())["config"]["spill"] is False


def test_ppo_updates_are_logged_to_the_curve(tmp_path, pipedream_env):
    """Each PPO update's losses, KL, entropy and explained variance become a ``ppo`` row of
    curve.csv (sb3's logger is not silenced into nothing)."""
    from pacopt.learned.callbacks import PPO_COLUMNS
    from pacopt.learned.train import TrainConfig, train

    config = TrainConfig(distributions=("C",), num_jobs=30, envs=1, max_steps=192, n_steps=64,
                         batch_size=32, minutes=1, teacher="", validation_seeds=(9000,))
    train(config, tmp_path / "run", log=lambda _: None)
    curve = pd.read_csv(tmp_path / "run" / "curve.csv")
    ppo = curve[curve["kind"] == "ppo"]
    assert len(ppo) >= 1 and ppo["steps"].is_monotonic_increasing
    for column in ("approx_kl", "entropy_loss", "value_loss", "explained_variance"):
        assert column in PPO_COLUMNS and ppo[column].notna().all(), column
    assert (ppo["approx_kl"] >= 0).all() and (ppo["entropy_loss"] < 0).all()
    assert curve[curve["kind"] == "validation"]["blocking_rate"].notna().all()


def test_an_older_curve_is_widened_once(tmp_path):
    from pacopt.learned.callbacks import CURVE_COLUMNS, PPO_COLUMNS, _append_curve

    (tmp_path / "curve.csv").write_text("kind,steps,seconds,blocking_rate\ntrain,10,1.0,0.5\n")
    _append_curve(tmp_path, {"kind": "ppo", "steps": 20, "seconds": 2.0, "approx_kl": 0.01})
    curve = pd.read_csv(tmp_path / "curve.csv")
    assert list(curve.columns) == [*CURVE_COLUMNS, *PPO_COLUMNS]
    assert curve["kind"].tolist() == ["train", "ppo"] and curve["blocking_rate"][0] == 0.5


@pytest.mark.parametrize("args, message", [
    (["--minutes", "-1"], "--minutes must be"),
    (["--dagger-rounds", "-1"], "--dagger-rounds and --improve-keep >= 0"),
    (["--warm-epochs", "0"], "--warm-epochs must be >= 1"),
    (["--dagger-episodes", "0"], "--improve-horizon and --warm-epochs must be >= 1"),
    (["--label-every", "0"], "--improve-horizon and --warm-epochs must be >= 1"),
    (["--improve-futures", "0"], "--improve-horizon and --warm-epochs must be >= 1"),
    (["--improve-keep", "-1"], "--dagger-rounds and --improve-keep >= 0"),
    (["--jobs", "0"], "--improve-horizon and --warm-epochs must be >= 1"),
    (["--cluster", "8x8"], "--cluster must be GROUPSxRACKSxSERVERS"),
    (["--teacher-temperature", "0"], "--teacher-temperature must be a finite number > 0"),
    (["--regret-weight", "nan"], "--improve-significance finite numbers >= 0"),
    (["--improve-margin", "-1"], "--improve-significance finite numbers >= 0"),
    (["--improve-significance", "inf"], "--improve-significance finite numbers >= 0"),
    (["--resume"], "no checkpoint to resume"),
])
def test_train_command_bad_input_is_one_line_exit_2(tmp_path, capsys, args, message):
    from pacopt.cli import pacopt_main

    assert pacopt_main(["train", "--out", str(tmp_path / "run"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "run" / "latest.zip").exists()


def test_spill_features_flag_a_footprint_larger_than_on_an_empty_cluster():
    import torch

    from pacopt.learned.features import ACTION_DIM
    from pacopt.learned.gnn import spill_features

    actions = torch.zeros(1, 4, ACTION_DIM)
    actions[0, 1, 3], actions[0, 1, 6] = 4 / 32, 5 / 32  # degree 1 spills onto a fifth server
    actions[0, 2, 3], actions[0, 2, 6] = 8 / 32, 8 / 32  # compact
    actions[0, 3, 3] = 16 / 32  # not placeable now (no live workers)
    assert spill_features(actions)[0].tolist() == [[0, 0], [1, 0.25], [0, 0], [0, 0]]


def test_a_rollout_teachers_soft_target_ranks_degrees_by_their_rollout_scores(pipedream_env):
    """The target's best degree is the rollout's choice (ties go to the base policy), and each
    scored degree's logit is its score gap to the base policy's over the temperature."""
    from pacopt.learned.teacher import TIE_PREFERENCE, TeacherSpec, make_teacher
    from pacopt.learned.train import TrainConfig

    env = TrainConfig(distributions=("C",), num_jobs=30).env()
    teacher = make_teacher(TeacherSpec.parse("rollout", temperature=0.5), "C", env.family, seed=3)
    obs, _ = env.reset(options={"distribution": "C", "seed": 5})
    choices, done = 0, False
    while not done:
        mask = env.action_masks()
        target = teacher(env, obs, mask)
        base, scores = teacher.rollout.scores(env.episode, mask)
        assert int(np.argmax(target)) == teacher.rollout.choose(env.episode, mask)
        for degree, score in scores.items():
            tie = TIE_PREFERENCE if degree == base else 0.0
            assert target[degree] == pytest.approx((score - scores[base] + tie) / 0.5, abs=1e-5)
        assert np.isneginf(np.delete(target, list(scores))).all()
        choices += len(scores) > 1
        obs, _, done, _, _ = env.step(int(np.argmax(target)))
    assert choices > 10


def test_the_rollout_teachers_futures_and_guard_come_from_the_config():
    """``--rollout-futures``, ``--rollout-significance`` and ``--rollout-terminal-weight`` reach
    the rollout teacher (and ``improve``'s first round, which is one); ``lookahead`` plays the
    real future alone, with the terminal weight too."""
    from pacopt.learned.teacher import TeacherSpec, make_teacher
    from pacopt.learned.train import TrainConfig

    config = TrainConfig(rollout_futures=3, rollout_significance=1.5,
                         rollout_terminal_weight=0.2)
    for bad in ({"rollout_futures": 0}, {"rollout_significance": -1.0},
                {"rollout_terminal_weight": -0.1}, {"rollout_terminal_weight": float("nan")}):
        with pytest.raises(InputError):
            TrainConfig(**bad)
    fam = family(30)
    for name in ("rollout", "improve"):
        teacher = make_teacher(replace(config, teacher=name).teacher_spec(), "B", fam, seed=3)
        assert len(teacher.rollout.futures) == 3 and teacher.significance == 1.5
        assert all(len(stream) == 30 for stream in teacher.rollout.futures)
        assert teacher.rollout.terminal_weight == 0.2
    default = make_teacher(TeacherSpec.parse("rollout"), "B", fam, seed=3)
    assert len(default.rollout.futures) == 8 and default.significance == 0.0
    assert default.rollout.terminal_weight == 0.0
    lookahead = make_teacher(replace(config, teacher="lookahead").teacher_spec(), "B", fam,
                             seed=3).rollout
    assert lookahead.futures is None and lookahead.terminal_weight == 0.2


def test_the_significance_guard_lowers_each_departure_by_its_noise():
    """With ``significance`` z every other degree's gain over the base's is lowered by z
    standard errors of its paired mean: a noisy gain falls below the base's degree, one won in
    every stream stays above it."""
    from types import SimpleNamespace

    from pacopt.learned.teacher import TIE_PREFERENCE, RolloutTarget

    accepted = {2: np.array([5.0, 5, 5, 5]),   # the base's degree
                4: np.array([9.0, 2, 9, 2]),   # gains 4, -3, 4, -3: a mean of 0.5, error 2.02
                8: np.array([6.0, 6, 7, 6])}   # gains 1, 1, 2, 1: a mean of 1.25, error 0.25
    streams = SimpleNamespace(stream_scores=lambda episode, allowed: (2, accepted))
    mask, env = np.ones(9, dtype=bool), SimpleNamespace(episode=None)
    plain = RolloutTarget(streams, temperature=0.5)(env, None, mask)
    guarded = RolloutTarget(streams, temperature=0.5, significance=2.0)(env, None, mask)
    error4 = np.array([4.0, -3, 4, -3]).std(ddof=1) / 2
    assert plain[4] == pytest.approx(0.5 / 0.5) and plain[8] == pytest.approx(1.25 / 0.5)
    assert guarded[4] == pytest.approx((0.5 - 2 * error4) / 0.5) and guarded[4] < 0
    assert guarded[8] == pytest.approx((1.25 - 2 * 0.25) / 0.5)
    assert guarded[2] == pytest.approx(TIE_PREFERENCE / 0.5)
    del accepted[8]  # only noise left: the base's degree is the target's best
    assert int(np.argmax(RolloutTarget(streams, 0.5, significance=2.0)(env, None, mask))) == 2
    assert int(np.argmax(RolloutTarget(streams, 0.5)(env, None, mask))) == 4


# ----- policy iteration: rollouts over the learned agent ------------------------------------------
def _agent_and_instance(num_jobs: int, seed: int = 5):
    fam = family(num_jobs)
    network = _fresh_model(PartitionEnv(fam), seed=seed).policy
    network.set_training_mode(False)
    return LearnedPolicy(network=network), fam.instance("B", 20_000 + seed)


def test_rollouts_over_the_agent_keep_its_history_apart():
    """The agent remembers the betas it has seen; each what-if fork plays its own copy
    (``LearnedPolicy.fork``), so scoring forks never changes the agent's later decisions."""
    from pacopt.model.simulator import OnlineEpisode
    from pacopt.online.rollout import Rollout

    scored, instance = _agent_and_instance(30)
    plain = LearnedPolicy(network=scored.player.network)
    rollout = Rollout(scored, horizon=8, futures=[family(30).instance("D", 7).jobs])
    episode, reference = OnlineEpisode(instance), OnlineEpisode(instance)
    while not episode.done:
        rollout.scores(episode)  # forks play D's betas, which the agent must not remember
        degree = scored.choose(episode.decision)
        assert degree == plain.choose(reference.decision)
        episode.decide(degree)
        reference.decide(degree)


def test_a_whole_episode_rollout_never_loses_to_the_agent():
    """One step of policy improvement over a deterministic learned agent (hindsight, the whole
    remaining episode as horizon) accepts at least as many jobs: the step policy iteration
    repeats."""
    from pacopt.model.simulator import simulate
    from pacopt.online.rollout import Rollout, play_rollout

    agent, instance = _agent_and_instance(24)
    improved = play_rollout(instance, Rollout(agent, len(instance.jobs)))
    plain = simulate(instance, LearnedPolicy(network=agent.player.network), seed=0)
    assert sum(j.accepted for j in improved.jobs) >= sum(j.accepted for j in plain.jobs)


def test_the_improve_teacher_labels_every_kth_state_over_the_student():
    """``improve`` with a student: a rollout over that network, labelling every third state;
    the steps it leaves unlabelled are driven (the student's greedy degree) but not fitted."""
    from pacopt.learned.teacher import TeacherSpec, greedy_chooser, make_teacher

    fam = family(30)
    env = PartitionEnv(fam)
    student = _fresh_model(env).policy
    student.set_training_mode(False)
    teacher = make_teacher(TeacherSpec.parse("improve", temperature=0.5, label_every=3), "B",
                           fam, seed=3, student=student)
    assert isinstance(teacher.rollout.base, LearnedPolicy)
    assert teacher.rollout.base.player.network is student
    _, steps = play(env, greedy_chooser(student), "B", 20_001, teacher)
    labelled = [i for i, step in enumerate(steps) if step[1] is not None]
    assert len(steps) == 30 and labelled == list(range(0, 30, 3))


def test_a_short_policy_iteration_run_improves_on_its_starting_policy(pipedream_env):
    """``improve:para-max``: three small rounds (rollouts over para-max, then twice over the
    student fitted to the last) give a policy that blocks less than para-max itself and than
    the untrained network on the validation episodes: a real learning signal, from rollouts
    alone. (The first round's student plays para-max's degrees: imitation picks up the
    teacher's departures from its base only in the rounds after, as in the longer runs of
    ``docs/learned.md``.)"""
    from pacopt.learned.train import TrainConfig, validate_policy, warm_start
    from pacopt.model.simulator import simulate
    from pacopt.online.policies import make_policy

    config = TrainConfig(distributions=("A",), placement="best-fit", num_jobs=100, envs=1,
                         teacher="improve:para-max", warm_episodes=1, dagger_rounds=2,
                         dagger_episodes=1, label_every=4, warm_epochs=64, improve_futures=2,
                         improve_horizon=20, validation_seeds=(9000, 9001))
    env = config.env()
    model = _fresh_model(env, policy_kwargs=config.policy_kwargs())
    untrained = validate_policy(env, model.policy, ("A",), config.validation_seeds)
    scores: list[float] = []
    warm_start(model, config, np.random.default_rng(0), log=lambda _: None,
               evaluate=lambda: scores.append(validate_policy(
                   env, model.policy, ("A",), config.validation_seeds)))
    start = np.mean([simulate(env.family.instance("A", s), make_policy("para-max"),
                              seed=0).blocking_rate for s in config.validation_seeds])
    assert len(scores) == 3 and min(scores) < min(start, untrained)


def test_improve_from_best_goes_on_from_the_best_validated_policy(tmp_path, pipedream_env,
                                                                    monkeypatch):
    """``--improve-from best``: after a round that validates worse than the best so far, the
    next round's rollouts are over (and its fit goes on from) the best policy, not the worse
    one; the rounds before it each went on from the last."""
    import pacopt.learned.train as train_module
    from pacopt.learned.train import TrainConfig, train

    scores = iter([0.5, 0.3, 0.9, 0.8, 0.8])  # round 1 is the best; round 2 is set aside
    monkeypatch.setattr(train_module, "validate_policy", lambda *args: next(scores))
    drivers = []
    label_all = train_module._label_all

    def recorded(label, tasks, keep=None):
        drivers.append(tasks[0][4])  # the weights the round's episodes are played with
        return label_all(label, tasks, keep)

    monkeypatch.setattr(train_module, "_label_all", recorded)
    config = TrainConfig(distributions=("A",), num_jobs=24, envs=1, teacher="improve:para-max",
                         warm_episodes=1, dagger_rounds=3, dagger_episodes=1, label_every=6,
                         warm_epochs=2, improve_futures=1, improve_horizon=4, max_steps=1,
                         improve_from="best", validation_seeds=(9000,))
    train(config, tmp_path / "run", log=lambda _: None)
    assert len(drivers) == 4 and drivers[0] is None  # the teacher's round, then three
    same = [all(torch.equal(a[k], b[k]) for k in a) for a, b in zip(drivers[1:], drivers[2:])]
    assert same == [False, True]  # round 2 went on from round 1; round 3 from round 1 again


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(BETA_BINS), st.floats(-0.5, 1.5)), min_size=1,
                max_size=100))
def test_the_beta_history_counts_as_numpy_histogram_does(betas):
    """The observation's beta histogram is numpy's, edges and values outside included."""
    values = np.asarray(betas)
    expected = np.histogram(values, bins=BETA_BINS)[0]
    got = _histogram(values, _BETA_EDGES)
    assert got.dtype == expected.dtype and got.tolist() == expected.tolist()
