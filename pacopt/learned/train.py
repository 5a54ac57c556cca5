"""Training the agent: an imitation warm start, then sb3-contrib's MaskablePPO, resumable.

1. **Warm start.** The policy first imitates a teacher (``tuned`` by default; any heuristic; the
   ``rollout`` teacher, rollouts over ``tuned`` on sampled futures, or its hindsight form
   ``lookahead``; trained agents, one per distribution if wanted) on a few training episodes,
   then DAgger rounds label the states the policy itself visits; after each round it is fitted
   again to everything collected: cross-entropy on the teacher's target under the live mask,
   and the critic regresses the discounted returns. A heuristic's or an agent's target is its
   degree. A rollout teacher's is soft, a softmax of each degree's rollout score (jobs accepted
   by its forks, relative to the base policy's degree) at ``teacher_temperature``: a departure
   from ``tuned`` that a few sampled futures favour by a job is noise a student cannot learn
   from a hard label, while a soft one lets similar states average it out. With
   ``regret_weight`` the loss adds the policy's expected regret under those scores, so that the
   rare states where one choice costs several jobs (say, a job spilling onto a server outside
   its block, which tips first-fit into a lasting misaligned packing) weigh as much as they
   matter. PPO then starts at the teacher's level instead of from a uniform policy.
2. **PPO.** MaskablePPO with :class:`~pacopt.learned.gnn.DegreePolicy` on vectorised
   environments (one process per environment by default, so both cores step episodes). Each
   episode is drawn from the workload family's training seeds; PPO goes on from the best
   warm-start round.
3. **Selection.** After each warm-start round and every ``eval_every`` PPO steps the
   deterministic policy plays fixed *validation* episodes (training-range seeds,
   :data:`~pacopt.learned.train_config.VALIDATION_SEEDS`, for each distribution, never the
   held-out evaluation seeds); the best
   one so far is kept as ``best.zip``, so PPO must beat the warm start to replace it.

The output folder holds ``latest.zip`` (saved at every evaluation and at the end; ``resume``
continues from it, step count, curve and best score included), ``best.zip``, ``curve.csv`` (one
row per finished training episode, and one per validation) and ``run.json`` (the settings).
Each checkpoint carries its metadata, ``pacopt.json`` in the zip (format, code version, recipe,
settings, seeds, rounds, steps, validation score, time: :mod:`pacopt.learned.checkpoint_meta`).

The run's settings, which are also the ``pacopt train`` command line, are
:class:`~pacopt.learned.train_config.TrainConfig`; the teacher is :mod:`pacopt.learned.teacher`,
PPO's callbacks and ``curve.csv`` :mod:`pacopt.learned.callbacks`, and the back-ends that play
the warm start's episodes (in turn, on a process pool, on Ray) :mod:`pacopt.infra.executors`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import CallbackList
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

from pacopt.infra.checkpoint import load_checked
from pacopt.infra.collector import fewer_collections
from pacopt.infra.errors import InputError
from pacopt.infra.executors import ProcessPool, in_turn, on_pool, on_ray
from pacopt.infra.interrupt import start_fork_server, stop_requested, stoppable
from pacopt.infra.ray_cluster import ray_address, ray_session
from pacopt.infra.safe_write import prepare_folder, write_atomically
from pacopt.learned.agent import load_checkpoint
from pacopt.learned.callbacks import (
    OnStepGrid,
    PpoStatistics,
    ProgressBar,
    SaveLatest,
    StopAt,
    TrainingCurve,
    Validation,
    weights,
)
from pacopt.learned.checkpoint_meta import (
    AGENT_KIND,
    AGENT_POLICY,
    embed_metadata,
    run_metadata,
)
from pacopt.learned.env import PartitionEnv
from pacopt.learned.gnn import DegreePolicy
from pacopt.learned.label_cache import LabelCache
from pacopt.learned.teacher import allowed_degree, greedy_chooser, make_teacher, one_hot
from pacopt.learned.train_config import TrainConfig, read_run_state
from pacopt.model.paper_workload import TRAIN_SEED_RANGE

#: The warm start's initial learning rate (decayed to 0 over its epochs).
WARM_LEARNING_RATE = 1e-3


def _make_env(config: TrainConfig, rank: int):
    def build():
        torch.set_num_threads(config.torch_threads)
        env = config.env()
        env.reset(seed=config.seed * 1000 + rank)
        return env
    return build


# ----- playing episodes -------------------------------------------------------------------------
def play(env: PartitionEnv, drive, distribution: str, seed: int,
         teacher=None) -> tuple[float, list]:
    """Play one episode; returns its blocking rate and the (observation, target, mask, reward)
    steps. ``drive(env, obs, mask) -> degree`` picks the degrees; ``teacher(env, obs, mask) ->
    target`` (logits over degrees, ``-inf`` = never; :func:`~pacopt.learned.teacher.make_teacher`)
    labels each state (None: a state it leaves unlabelled; it must then not drive). With
    ``drive`` None the teacher drives too (its best degree); without a teacher the target is the
    driven degree."""
    obs, _ = env.reset(options={"distribution": distribution, "seed": seed})
    steps, done, info = [], False, {}
    while not done:
        if stop_requested():  # Ctrl-C: the caller drops this episode
            return math.nan, steps
        mask = env.action_masks()
        target = None if teacher is None else teacher(env, obs, mask)
        action = allowed_degree(drive(env, obs, mask) if drive else np.argmax(target), mask)
        if teacher is None:
            target = one_hot(action, len(mask))
        # a teacher's None: a state it does not label (kept for the returns, not fitted)
        next_obs, reward, done, _, info = env.step(action)
        steps.append((obs, target, mask, reward))
        obs = next_obs
    return info["blocking_rate"], steps


def validate_policy(env: PartitionEnv, policy: DegreePolicy, distributions, seeds) -> float:
    """Mean blocking rate of the deterministic policy over ``distributions`` x ``seeds``."""
    drive = greedy_chooser(policy)
    scores = []
    for d in distributions:
        for s in seeds:
            if stop_requested():  # Ctrl-C: no score (nan) rather than a partial one
                return math.nan
            scores.append(play(env, drive, d, s)[0])
    return float(np.mean(scores))


# ----- the warm start ---------------------------------------------------------------------------
def warm_start(model: MaskablePPO, config: TrainConfig, rng: np.random.Generator,
               log=print, evaluate=None, deadline: float | None = None,
               ray: str | None = None, label_cache: str | Path | None = None) -> None:
    """Imitate the teacher (module doc): ``warm_episodes`` teacher episodes per distribution,
    then ``dagger_rounds`` rounds in which the policy drives and the teacher labels the states
    it visits (so the policy learns to recover from its own mistakes); after each round the
    policy is fitted again, from its initial weights, to everything collected, and
    ``evaluate()`` (if given) scores it. With the ``improve`` teacher the rounds are
    approximate policy iteration instead: each DAgger round's states are labelled by rollouts
    over the policy itself, and the policy is fitted on from its current weights to that
    round's labels and those of the ``improve_keep - 1`` rounds before (0: every round's; by
    default 1, that round's alone, the earlier ones being relative to older policies). The
    episodes of a round are played by ``config.envs`` processes side by side (a rollout teacher
    takes about a minute each), or with ``ray`` (``"local"`` or a cluster address) as Ray tasks
    (:func:`_labeller`); the labels are the same. With ``label_cache`` (a folder) an episode
    labelled there before is read back instead of played, and each one played is kept there
    (:mod:`pacopt.learned.label_cache`).

    The first round always runs; a DAgger round only when, at the pace of the rounds so far, it
    would end before ``deadline`` (a ``time.time()`` value)."""
    rounds: list[list] = []  # each round's labelled steps
    policy = model.policy
    initial = weights(policy)
    # improve: each round labels the current policy's states by rollouts over it, and the
    # policy is fitted on to those labels and the --improve-keep - 1 rounds' before (approximate
    # policy iteration); DAgger keeps every round's
    spec = config.teacher_spec()
    iterate = spec is not None and spec.kind == "improve"
    keep = config.improve_keep if iterate else 0
    started, played = time.time(), 0
    cache = None if label_cache is None else LabelCache(label_cache)
    with _labeller(config, ray) as label:
        for round_ in range(1 + config.dagger_rounds):
            if stop_requested():  # Ctrl-C: no new round
                return
            count = config.warm_episodes if round_ == 0 else config.dagger_episodes
            pace = (time.time() - started) / max(played, 1)  # seconds per episode, fit included
            if round_ and deadline is not None and time.time() + pace * count > deadline:
                log(f"warm start: no time left for DAgger round {round_}")
                break
            played += count
            driver = None if round_ == 0 else weights(policy)
            tasks = [(config, dist, int(rng.integers(*TRAIN_SEED_RANGE)), int(rng.integers(2**31)),
                      driver) for dist in config.labels for _ in range(count)]
            cached = [None if cache is None else cache.get(task) for task in tasks]
            results = _label_all(label, [t for t, c in zip(tasks, cached) if c is None],
                                 None if cache is None else cache.put)
            if results is None:  # Ctrl-C
                return
            fresh = iter(results)
            results = [next(fresh) if c is None else c for c in cached]
            rounds.append([])
            for (_, dist, seed, _, _), (blocking, steps), c in zip(tasks, results, cached):
                rounds[-1] += steps
                who = "teacher" if round_ == 0 else f"policy (DAgger round {round_})"
                log(f"warm start: {who} on {dist} seed {seed}: blocking {blocking:.3f}"
                    + ("" if c is None else " (from the label cache)"))
            if not (iterate and round_):  # DAgger fits everything from scratch
                policy.load_state_dict(initial)
            if keep:  # the older rounds' labels are not fitted again: let them go
                del rounds[:-keep]
            _fit(policy, [step for kept in rounds for step in kept], config, rng, log)
            if evaluate is not None and not stop_requested():
                evaluate()
            if stop_requested():
                return


@contextmanager
def _labeller(config: TrainConfig, ray: str | None = None
              ) -> Iterator[Callable[[list], Iterator[tuple[int, tuple[float, list]]]]]:
    """Where the warm start's episodes are played, for the whole warm start (the one place that
    chooses): the block gets ``label(tasks)``, which yields ``(index, result)``, the task's place
    and :func:`_label_episode` of it, as each finishes, and stops yielding on a stop request
    (Ctrl-C; :mod:`pacopt.infra.executors`). With ``ray`` (``"local"``: a local Ray instance of
    ``config.envs`` CPUs; else a cluster's address) each episode is a Ray task; else, with
    ``config.envs`` > 1 (and ``subprocess``), a pool of ``config.envs`` processes, started once
    (their torch import costs seconds); else this process plays them one after another. The
    same tasks give the same results on each."""
    if ray is not None:
        with ray_session(ray_address(ray), config.envs) as ray_module:
            yield partial(on_ray, ray_module, _label_episode)
        return
    if config.envs <= 1 or not config.subprocess:
        yield partial(in_turn, _label_episode)
        return
    with ProcessPool(config.envs, "spawn") as pool:
        yield partial(on_pool, pool, _label_episode)


def _label_all(label, tasks: list, keep=None) -> list | None:
    """:func:`_label_episode` of every task, in task order, through ``label``
    (:func:`_labeller`); None as soon as a stop is requested (Ctrl-C). ``keep(task, result)`` is
    called on each result as it comes (the label cache: what was labelled is kept even if the
    run stops)."""
    if not tasks:
        return []
    results: list = [None] * len(tasks)
    count = 0
    with closing(label(tasks)) as each:  # closed early: what is still running is dropped
        for index, result in each:
            if stop_requested():
                return None
            if keep is not None:
                keep(tasks[index], result)
            results[index] = result
            count += 1
    return None if stop_requested() or count < len(tasks) else results


def _label_episode(task) -> tuple[float, list]:
    """One warm-start episode (a pool task): the teacher drives, or with a ``driver`` (the
    policy's weights: DAgger) the policy drives and the teacher labels; its blocking rate and
    labelled steps."""
    config, dist, seed, teacher_seed, driver = task
    if stop_requested():  # the parent was interrupted (follow_stop): nothing to label
        return math.nan, []
    torch.set_num_threads(config.torch_threads)
    env = config.env()
    drive = policy = None
    if driver is not None:
        policy = MaskablePPO(DegreePolicy, env, device="cpu",
                             policy_kwargs=config.policy_kwargs()).policy
        policy.load_state_dict(driver)
        policy.set_training_mode(False)
        drive = greedy_chooser(policy)
    teacher = make_teacher(config.teacher_spec(), dist, env.family, teacher_seed, student=policy)
    with fewer_collections():  # rollouts' forks allocate as episodes do
        blocking, steps = play(env, drive, dist, seed, teacher)
    return blocking, [step for step in _with_returns(steps, config.gamma) if step[1] is not None]


def _with_returns(steps: list, gamma: float) -> list:
    """(observation, target, mask, discounted return) per step."""
    out, running = [], 0.0
    for obs, target, mask, reward in reversed(steps):
        running = reward + gamma * running
        out.append((obs, target, mask, running))
    return out[::-1]


def _fit(policy: DegreePolicy, data: list, config: TrainConfig, rng: np.random.Generator,
         log) -> None:
    """Cross-entropy against the teachers' targets (under their masks) plus value regression;
    Adam with a cosine learning-rate decay over ``warm_epochs`` (the last epochs settle the
    near-ties of soft targets instead of flipping them)."""
    obs = {k: np.stack([d[0][k] for d in data]) for k in data[0][0]}
    logits = torch.as_tensor(np.stack([d[1] for d in data]))
    targets = torch.softmax(logits, dim=1)
    # what each scored degree costs against the teacher's best, in jobs (0 for a one-hot target)
    scored = torch.isfinite(logits)
    best = logits.max(1, keepdim=True).values
    regrets = torch.where(scored, (best - logits) * config.teacher_temperature, 0.0)
    masks = torch.as_tensor(np.stack([d[2] for d in data]))
    returns = torch.as_tensor(np.array([d[3] for d in data], dtype=np.float32))
    optimiser = torch.optim.Adam(policy.parameters(), lr=WARM_LEARNING_RATE)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, config.warm_epochs)
    policy.set_training_mode(True)
    for epoch in range(config.warm_epochs):
        if stop_requested():  # Ctrl-C: keep the weights of the epochs done
            break
        order = rng.permutation(len(targets))
        losses = []
        for start in range(0, len(order), config.batch_size):
            idx = order[start:start + config.batch_size]
            batch = obs_as_tensor({k: v[idx] for k, v in obs.items()}, policy.device)
            log_probs, values = _log_probs_and_values(policy, batch, masks[idx])
            loss = (-(targets[idx] * log_probs).sum(1).mean()
                    + config.regret_weight * (log_probs.exp() * regrets[idx]).sum(1).mean()
                    + 0.5 * torch.nn.functional.mse_loss(values.flatten(), returns[idx]))
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            optimiser.step()
            losses.append(loss.item())
        schedule.step()
        log(f"warm start: epoch {epoch + 1}/{config.warm_epochs} on {len(data)} states, "
            f"loss {np.mean(losses):.4f}")
    policy.set_training_mode(False)


def _log_probs_and_values(policy: DegreePolicy, obs, masks) -> tuple[torch.Tensor, torch.Tensor]:
    """Every degree's masked log-probability and the state values (one pass of the network,
    as sb3's ``evaluate_actions`` makes it, but for the whole distribution)."""
    latent_pi, latent_vf = policy.mlp_extractor(policy.extract_features(obs))
    distribution = policy._get_action_dist_from_latent(latent_pi)
    distribution.apply_masking(masks)
    return distribution.distribution.logits, policy.value_net(latent_vf)


def save_model(model: MaskablePPO, path: Path, state: dict | None = None) -> None:
    """``model.save(path)``, atomically (:func:`~pacopt.infra.safe_write.write_atomically`: a
    kill or a full disk never leaves half a checkpoint, nor replaces a good one), with the run's
    metadata (``pacopt.json``: :mod:`pacopt.learned.checkpoint_meta`) from ``state`` if given."""
    def write(tmp: Path) -> None:
        model.save(tmp)
        if state is not None:
            embed_metadata(tmp, run_metadata(state, model.num_timesteps))

    write_atomically(path, write, what="training output")


def save_state(model: MaskablePPO, out: Path, state: dict) -> None:
    """Write ``latest.zip`` and the run state ``run.json`` (each atomically, the checkpoint
    first: a ``run.json`` never describes a checkpoint that is not there)."""
    save_model(model, out / "latest.zip", state)
    now = time.time()
    state["seconds"] += now - state["started"]
    state["started"] = now
    state["steps"] = int(model.num_timesteps)
    write_atomically(out / "run.json", json.dumps(state, indent=1), what="training output")


def train(config: TrainConfig, out: str | Path, resume: bool = False, log=print,
          recipe: str | None = None, overrides: dict | None = None,
          ray: str | None = None, label_cache: str | Path | None = None) -> Path:
    """Train (or, with ``resume``, continue) an agent into ``out``; returns the best checkpoint.
    ``recipe`` (the ``--recipe`` that set ``config``, :mod:`pacopt.learned.recipes`) and
    ``overrides`` (the settings given besides it) are recorded in ``run.json`` and in each
    checkpoint's metadata (:mod:`pacopt.learned.checkpoint_meta`), with the imitation rounds
    fitted so far. ``ray`` (``"local"`` or a cluster's address; not a setting of the run, so
    not recorded) plays the warm start's episodes as Ray tasks (:func:`warm_start`);
    ``label_cache`` (a folder, not recorded either) keeps its labelled episodes and reads back
    those labelled before (:mod:`pacopt.learned.label_cache`).

    ``config.minutes`` bounds this call's wall time (the warm start's first round always runs,
    its DAgger rounds only when they fit); ``max_steps`` the total environment steps.

    Everything handed over is checked before any work (one :class:`InputError` line): ``out``
    (a folder that can be written; without ``resume`` not holding a run already), the workload
    family (its graphs, its trace files), ``--init``'s checkpoint, and with ``resume`` the
    run's ``run.json`` and ``latest.zip`` (:func:`~pacopt.learned.train_config.read_run_state`).
    Ctrl-C (or any stop request) ends the run within seconds: it is saved as it stands
    (``latest.zip`` and ``run.json``, resumable; ``best.zip`` as scored so far), and
    KeyboardInterrupt is raised.
    """
    out = Path(out)
    started = time.time()
    deadline = started + 60 * config.minutes
    config.family()  # its graphs and trace files checked here: in a worker they are a traceback
    ray_address(ray)  # a --ray address with nothing there: one line now, not after the set-up
    if config.init and not resume:  # the network takes the shape of the one it starts from
        initial = load_checkpoint(str(Path(config.init).resolve()))
        extractor = initial.features_extractor
        config = replace(config, spill=extractor.spill, degree_features=extractor.degree_features)
    created = False
    if resume:
        state = read_run_state(out)
    else:
        if (out / "latest.zip").exists():
            raise InputError(f"'{out}' already holds a training run; use --resume or another --out")
        created = prepare_folder(out, "--out")
        state = {"config": asdict(config), "seconds": 0.0, "best_score": None, "rounds": 0,
                 "recipe": recipe, "recipe_overrides": overrides or {}}
    state["started"] = started
    torch.set_num_threads(config.torch_threads)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    vec_cls = SubprocVecEnv if config.subprocess and config.envs > 1 else DummyVecEnv
    model = envs = None
    with stoppable():
        try:
            if vec_cls is SubprocVecEnv:  # its workers ignore Ctrl-C: the parent stops them
                start_fork_server()
            envs = vec_cls([_make_env(config, i) for i in range(config.envs)])
            if resume:
                model = load_checked(
                    out / "latest.zip",
                    lambda file: MaskablePPO.load(file, env=envs, device="cpu"),
                    "--resume checkpoint", policy=AGENT_POLICY, kind=AGENT_KIND)
            else:
                model = MaskablePPO(
                    DegreePolicy, envs, learning_rate=config.learning_rate,
                    n_steps=config.n_steps, batch_size=config.batch_size,
                    n_epochs=config.n_epochs, gamma=config.gamma, gae_lambda=config.gae_lambda,
                    clip_range=config.clip_range, ent_coef=config.ent_coef, seed=config.seed,
                    device="cpu", verbose=0, policy_kwargs=config.policy_kwargs())
            validation = Validation(out, config, state, score=validate_policy, save=save_model,
                                    after=SaveLatest(out, state, save=save_state))
            callback = CallbackList([ProgressBar(config.max_steps, state),
                                     TrainingCurve(out, state),
                                     OnStepGrid(config.eval_every, validation, state),
                                     StopAt(config.max_steps, deadline)])
            callback.init_callback(model)
            if not resume:  # score the starting point: training must beat it for best.zip
                if config.init:
                    model.policy.load_state_dict(
                        load_checkpoint(str(Path(config.init).resolve())).state_dict())
                    validation.on_step()
                if config.teacher and config.warm_episodes:  # from --init's weights if given
                    def evaluate() -> None:  # after each fitted round (its checkpoints say so)
                        state["rounds"] = state.get("rounds", 0) + 1
                        validation.on_step()
                        if config.improve_from == "best" and validation.best_weights is not None:
                            model.policy.load_state_dict(validation.best_weights)

                    warm_start(model, config, rng, log, evaluate=evaluate, deadline=deadline,
                               ray=ray, label_cache=label_cache)
                    if validation.best_weights is not None:  # PPO goes on from the best
                        model.policy.load_state_dict(validation.best_weights)
                elif not config.init:
                    validation.on_step()
            budget = (config.max_steps - model.num_timesteps if config.max_steps
                      else 10 ** 9)  # the wall-clock budget stops it first
            if budget > 0 and time.time() < deadline and not stop_requested():
                # PPO's statistics go to curve.csv (no sb3 /tmp folder, nothing printed)
                model.set_logger(Logger(folder=None, output_formats=[PpoStatistics(out, state)]))
                model.learn(total_timesteps=budget, callback=callback, reset_num_timesteps=False)
                validation.on_step()
            save_state(model, out, state)
        except KeyboardInterrupt:  # a second Ctrl-C: save the run as it stands (fast), then quit
            if model is not None:
                save_state(model, out, state)
            raise
        finally:
            if envs is not None:
                envs.close()
            if model is None and created and out.is_dir() and not any(out.iterdir()):
                out.rmdir()  # nothing was trained: no empty run folder left behind
        interrupted = stop_requested()
    if interrupted:
        if model is not None:
            log(f"interrupted: the run is saved in '{out}'; continue it with "
                f"`pacopt train --resume --out {out}`")
        raise KeyboardInterrupt
    best = out / "best.zip"
    return best if best.exists() else out / "latest.zip"
