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
:class:`~pacopt.learned.train_config.TrainConfig`.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import multiprocessing
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, wait
from contextlib import closing, contextmanager
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import (
    BaseCallback,
    CallbackList,
    EventCallback,
    EveryNTimesteps,
)
from stable_baselines3.common.logger import KVWriter, Logger
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

from pacopt.infra.checkpoint import load_checked
from pacopt.infra.collector import fewer_collections
from pacopt.infra.errors import InputError
from pacopt.infra.interrupt import (
    children_ignore_interrupts,
    follow_stop,
    start_fork_server,
    stop_requested,
    stoppable,
)
from pacopt.infra.progress import tqdm
from pacopt.infra.ray_cluster import ray_address, ray_session
from pacopt.infra.safe_write import prepare_folder, write_atomically
from pacopt.learned.agent import LearnedPolicy, load_checkpoint
from pacopt.learned.checkpoint_meta import (
    AGENT_KIND,
    AGENT_POLICY,
    embed_metadata,
    run_metadata,
)
from pacopt.learned.env import PartitionEnv, WorkloadFamily
from pacopt.learned.gnn import DegreePolicy, greedy_degree
from pacopt.learned.label_cache import LabelCache
from pacopt.learned.train_config import (
    IMPROVE_FUTURES,
    IMPROVE_HORIZON,
    TrainConfig,
    read_run_state,
)
from pacopt.model.paper_workload import TRAIN_SEED_RANGE
from pacopt.model.placers import DEFAULT_PLACER
from pacopt.online.policies import make_policy, tuned_choice
from pacopt.online.rollout import SAMPLED_FUTURES, SAMPLED_HORIZON, Rollout, guarded

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
#: Added to the base policy's entry of a rollout target: ties go to it (scores are multiples of
#: 1 / futures, so this never outweighs a real difference).
TIE_PREFERENCE = 1e-3


def play(env: PartitionEnv, drive, distribution: str, seed: int,
         teacher=None) -> tuple[float, list]:
    """Play one episode; returns its blocking rate and the (observation, target, mask, reward)
    steps. ``drive(env, obs, mask) -> degree`` picks the degrees; ``teacher(env, obs, mask) ->
    target`` (logits over degrees, ``-inf`` = never; see :func:`teacher_chooser`) labels each
    state (None: a state it leaves unlabelled; it must then not drive). With ``drive`` None the teacher drives too (its best degree); without a teacher the
    target is the driven degree."""
    obs, _ = env.reset(options={"distribution": distribution, "seed": seed})
    steps, done, info = [], False, {}
    while not done:
        if stop_requested():  # Ctrl-C: the caller drops this episode
            return math.nan, steps
        mask = env.action_masks()
        target = None if teacher is None else teacher(env, obs, mask)
        action = _allowed(drive(env, obs, mask) if drive else np.argmax(target), mask)
        if teacher is None:
            target = one_hot(action, len(mask))
        # a teacher's None: a state it does not label (kept for the returns, not fitted)
        next_obs, reward, done, _, info = env.step(action)
        steps.append((obs, target, mask, reward))
        obs = next_obs
    return info["blocking_rate"], steps


def _allowed(action, mask) -> int:
    """A degree outside the mask blocks the job, as reject does: record it as reject."""
    action = int(action)
    return action if mask[action] else 0


def one_hot(degree: int, size: int) -> np.ndarray:
    """The target of a teacher that names one degree: logits 0 there, ``-inf`` elsewhere."""
    target = np.full(size, -np.inf, dtype=np.float32)
    target[degree] = 0.0
    return target


def greedy_chooser(policy: DegreePolicy):
    """``drive`` for :func:`play`: the policy's most likely allowed degree."""
    return lambda env, obs, mask: greedy_degree(policy, obs, mask)


def teacher_chooser(name: str, distribution: str, preset: str = "ddls",
                    family: WorkloadFamily | None = None, seed: int = 0,
                    temperature: float = 0.25, student=None, label_every: int = 1,
                    placer: str = DEFAULT_PLACER,
                    improve: tuple[int, int, float, float] = (IMPROVE_FUTURES, IMPROVE_HORIZON,
                                                              0.0, 0.0),
                    rollout: tuple[int, float] = (SAMPLED_FUTURES, 0.0)):
    """``teacher`` for :func:`play`: a heuristic's degree (``tuned`` resolves per distribution);
    ``lookahead``: the hindsight rollout teacher over ``tuned`` (:mod:`pacopt.online.rollout`;
    training episodes only); ``rollout``: the rollout teacher over ``tuned`` on ``rollout[0]``
    job streams sampled from ``family`` (training seeds drawn with ``seed``), every other
    degree's gain lowered by ``rollout[1]`` standard errors, ``rollout:POLICY`` over another
    fixed rule or heuristic (e.g. ``min-feasible`` on traces, where ``tuned`` has no
    distribution); ``agent:PATH``, a trained
    agent's greedy degree, where ``{dist}`` in PATH becomes the distribution (distilling
    per-distribution agents into one); ``improve``: policy improvement of ``student`` (the
    network being trained, :class:`~pacopt.learned.agent.LearnedPolicy` forks it), the rollout
    teacher with the student as its base (``improve``: its futures, horizon, margin and
    significance), which labels every ``label_every``-th state (without a student yet:
    ``rollout``); ``improve:POLICY``,
    policy iteration from ``POLICY``: its first round's rollouts are the same, over ``POLICY``;
    or one of these per distribution, ``A=agent:a.zip,B=tuned,C=...``.

    A rollout teacher's target is soft: each scored degree's rollout score minus the base
    policy's, over ``temperature`` (module doc); the others name one degree (:func:`one_hot`).
    ``tuned``, as a teacher or a rollout's base, is the one tuned for ``preset`` and ``placer``
    (the episodes' placer)."""
    if "=" in name:  # one teacher per distribution: "A=agent:a.zip,B=tuned,..."
        choice = dict(pair.split("=", 1) for pair in name.split(","))
        if distribution not in choice:
            raise InputError(f"teacher '{name}' names no teacher for distribution {distribution}")
        return teacher_chooser(choice[distribution], distribution, preset, family, seed,
                               temperature, student, label_every, placer, improve, rollout)
    sampled = partial(sampled_futures, family, distribution, seed=seed)  # sampled(count)
    if name.split(":")[0] == "improve" and student is not None:
        return RolloutTarget(Rollout(LearnedPolicy(network=student), improve[1],
                                     sampled(improve[0])), temperature, label_every,
                             margin=improve[2], significance=improve[3])
    if name.startswith("improve:"):  # its first round: the same rollouts, over POLICY
        return RolloutTarget(Rollout(make_policy(name[len("improve:"):]), improve[1],
                                     sampled(improve[0])), temperature,
                             margin=improve[2], significance=improve[3])
    name, _, base = name.partition(":") if name.startswith("rollout:") else (name, "", "")
    if name in ("lookahead", "rollout", "improve"):
        futures = None if name == "lookahead" else sampled(rollout[0])
        return RolloutTarget(Rollout(make_policy(base or tuned_choice(distribution, preset, placer)),
                                     SAMPLED_HORIZON if futures else 40, futures), temperature,
                             significance=rollout[1])
    if name.startswith("agent:"):  # a trained agent per distribution: distillation
        policy = load_checkpoint(name[len("agent:"):].format(dist=distribution))
        return lambda env, obs, mask: one_hot(greedy_degree(policy, obs, mask), len(mask))
    policy = make_policy(tuned_choice(distribution, preset, placer) if name == "tuned" else name)
    policy.reset(0)
    return lambda env, obs, mask: one_hot(_allowed(policy.choose(env.episode.decision), mask),
                                          len(mask))


def sampled_futures(family: WorkloadFamily | None, distribution: str, count: int,
                    seed: int) -> list:
    """``count`` job streams of ``family``'s ``distribution`` from its training seeds, drawn
    with ``seed``: the futures a rollout over sampled streams plays (what an online policy
    may know: the family, not the episode's own arrivals)."""
    if family is None:
        raise InputError("the rollout teachers need the workload family to sample from")
    seeds = np.random.default_rng(seed).integers(*family.seed_range, count)
    return [family.instance(distribution, int(s)).jobs for s in seeds]


class RolloutTarget:
    """A rollout teacher (``teacher`` for :func:`play`): each degree its rollout scores, minus
    the base policy's degree's, over ``temperature``; ``-inf`` for the degrees it does not
    score (see :func:`teacher_chooser`). ``margin`` (jobs) is added to the base's own degree:
    a departure from it must win by more than that (policy iteration's noise guard).
    ``significance`` (z, 0: off) is the other guard, one that grows with the noise: every other
    degree's gain over the base's is lowered by ``significance`` standard errors of its mean
    (:func:`~pacopt.online.rollout.guarded`, as a :class:`Rollout` played as a policy does);
    only a departure that wins by more than its noise keeps a gain."""

    def __init__(self, rollout: Rollout, temperature: float, label_every: int = 1,
                 margin: float = 0.0, significance: float = 0.0):
        self.rollout, self.temperature, self.label_every = rollout, temperature, label_every
        self.margin, self.significance = margin, significance
        self.calls = 0

    def __call__(self, env: PartitionEnv, obs, mask: np.ndarray) -> np.ndarray | None:
        self.calls += 1
        if (self.calls - 1) % self.label_every:  # not labelled; a base with a memory sees it
            if hasattr(self.rollout.base, "fork"):
                self.rollout.base.choose(env.episode.decision)
            return None
        base, streams = self.rollout.stream_scores(env.episode, mask)
        scores = guarded(streams, base, self.significance)
        target = np.full(len(mask), -np.inf, dtype=np.float32)
        for degree, score in scores.items():
            target[degree] = (score - scores[base]) / self.temperature
        target[base] = (TIE_PREFERENCE + self.margin) / self.temperature
        return target


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


def weights(policy: DegreePolicy) -> dict[str, torch.Tensor]:
    """A copy of the policy's weights (a ``state_dict`` that later training leaves alone)."""
    return {k: v.detach().clone() for k, v in policy.state_dict().items()}


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
    iterate = config.teacher.split(":")[0] == "improve"
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


#: Seconds a warm-start worker gets to end its episode after Ctrl-C before it is terminated (a
#: worker still importing torch, about 6 s, cannot look at the stop request before then).
STOP_GRACE_SECONDS = 2.0


def _shut_down(pool: ProcessPoolExecutor) -> None:
    """Shut the warm start's pool down; after a stop request, a worker still busy after
    :data:`STOP_GRACE_SECONDS` is terminated (its episode is not wanted any more)."""
    if stop_requested():
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        until = time.monotonic() + STOP_GRACE_SECONDS
        for process in processes:
            process.join(max(0.0, until - time.monotonic()))
        for process in processes:
            if process.is_alive():
                process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


@contextmanager
def _labeller(config: TrainConfig, ray: str | None = None
              ) -> Iterator[Callable[[list], Iterator[tuple[float, list]]]]:
    """Where the warm start's episodes are played, for the whole warm start (the one place that
    chooses): the block gets ``label(tasks)``, which yields :func:`_label_episode` of each task
    in task order, and stops yielding on a stop request (Ctrl-C). With ``ray`` (``"local"``: a
    local Ray instance of ``config.envs`` CPUs; else a cluster's address) each episode is a Ray
    task; else, with ``config.envs`` > 1 (and ``subprocess``), a pool of ``config.envs``
    processes; else this process plays them one after another. The same tasks give the same
    results on each."""
    if ray is not None:
        with ray_session(ray_address(ray), config.envs) as ray_module:
            yield lambda tasks: _on_ray(ray_module, tasks)
        return
    if config.envs <= 1 or not config.subprocess:
        yield _in_turn
        return
    context = multiprocessing.get_context("spawn")
    stopped = context.Event()  # set on Ctrl-C: the workers' episodes end early (follow_stop)
    pool = ProcessPoolExecutor(config.envs, mp_context=context, initializer=follow_stop,
                               initargs=(stopped,))
    try:
        yield lambda tasks: _on_pool(pool, stopped, tasks)
    finally:
        _shut_down(pool)


def _label_all(label, tasks: list, keep=None) -> list | None:
    """:func:`_label_episode` of every task, in order, through ``label`` (:func:`_labeller`);
    None as soon as a stop is requested (Ctrl-C). ``keep(task, result)`` is called on each
    result as it comes (the label cache: what was labelled is kept even if the run stops)."""
    if not tasks:
        return []
    results = []
    with closing(label(tasks)) as each:  # closed early: what is still running is dropped
        for task, result in zip(tasks, each):
            if stop_requested():
                return None
            if keep is not None:
                keep(task, result)
            results.append(result)
    return None if stop_requested() or len(results) < len(tasks) else results


def _in_turn(tasks: list) -> Iterator[tuple[float, list]]:
    """The episodes in this process, one after another (an episode ends early on Ctrl-C)."""
    for task in tasks:
        yield _label_episode(task)
        if stop_requested():
            return


def _on_pool(pool: ProcessPoolExecutor, stopped, tasks: list) -> Iterator[tuple[float, list]]:
    """The episodes on ``pool``, yielded in task order. Its workers never see Ctrl-C themselves
    (they start with it ignored, so they print nothing); on a stop request, ``stopped`` (an
    Event they follow, :func:`follow_stop`) ends their episodes at the next decision."""
    with children_ignore_interrupts():  # the workers start at the first submit
        futures = [pool.submit(_label_episode, task) for task in tasks]
    try:
        for future in futures:
            while not wait([future], timeout=0.25).done and not stop_requested():
                pass
            if stop_requested():
                return
            yield future.result()
    finally:
        if stop_requested():
            stopped.set()


def _on_ray(ray, tasks: list) -> Iterator[tuple[float, list]]:
    """The episodes as Ray tasks (one CPU each), yielded in task order; on a stop request, or
    when the caller stops reading, the unfinished ones are cancelled (``ray.cancel``). The
    results are copied out of Ray's object store (its arrays are read-only views that must not
    outlive the session)."""
    task = ray.remote(_label_episode)
    refs = [task.remote(each) for each in tasks]
    done = 0
    try:
        for ref in refs:
            while not ray.wait([ref], timeout=0.25)[0] and not stop_requested():
                pass
            if stop_requested():
                return
            result = copy.deepcopy(ray.get(ref))
            done += 1
            yield result
    finally:
        for ref in refs[done:]:
            ray.cancel(ref)


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
    teacher = teacher_chooser(config.teacher, dist, config.preset, env.family, teacher_seed,
                              config.teacher_temperature, student=policy,
                              label_every=config.label_every if driver is not None else 1,
                              placer=config.placement,
                              improve=(config.improve_futures, config.improve_horizon,
                                       config.improve_margin, config.improve_significance),
                              rollout=(config.rollout_futures, config.rollout_significance))
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


# ----- PPO's callbacks: progress, curve, validation, checkpoints, budget ------------------------
# Composed in :func:`train` with sb3's CallbackList and EveryNTimesteps; sb3's other callbacks do
# not fit: EvalCallback / MaskableEvalCallback score episode returns over whatever episodes the
# environment draws (validation is the blocking rate on fixed distribution x seed episodes), and
# CheckpointCallback keeps one ``PREFIX_STEPS_steps.zip`` per save, written in place (resuming
# wants one ``latest.zip``, replaced atomically, with its ``run.json``).
def _elapsed(state: dict) -> float:
    """Training seconds of the run so far, earlier (resumed) calls included."""
    return state["seconds"] + time.time() - state["started"]


def _finished_episodes(locals_: dict):
    """The blocking rates of the training episodes that ended in this step."""
    for info, done in zip(locals_["infos"], locals_["dones"]):
        if done and "blocking_rate" in info:
            yield info["blocking_rate"]


class _ProgressBar(BaseCallback):
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


class _TrainingCurve(BaseCallback):
    """A ``train`` row in ``curve.csv`` for each finished training episode."""

    def __init__(self, out: Path, state: dict):
        super().__init__()
        self.out, self.state = out, state

    def _on_step(self) -> bool:
        for blocking in _finished_episodes(self.locals):
            _append_curve(self.out, {"kind": "train", "steps": self.num_timesteps,
                                     "seconds": _elapsed(self.state), "blocking_rate": blocking})
        return True


class _Validation(EventCallback):
    """Each time it is stepped: the deterministic policy plays the validation episodes
    (:func:`validate_policy`), the score goes to ``curve.csv``, the policy to ``best.zip`` (and
    :attr:`best_weights`) if it is the best so far; then its ``callback`` runs (as EvalCallback's
    ``callback_after_eval``). :func:`train` steps it after each warm-start round and around PPO,
    and :class:`_OnStepGrid` every ``eval_every`` PPO steps."""

    def __init__(self, out: Path, config: TrainConfig, state: dict, after: BaseCallback):
        super().__init__(after)
        self.out, self.config, self.state = out, config, state
        self.env: PartitionEnv | None = None
        self.best_weights: dict | None = None  # of the best policy this run has scored

    def _on_step(self) -> bool:
        if self.env is None:
            self.env = self.config.env()
        score = validate_policy(self.env, self.model.policy, self.config.labels,
                                self.config.validation_seeds)
        if stop_requested():  # Ctrl-C: no score; the run is saved by train
            return True
        _append_curve(self.out, {"kind": "validation", "steps": self.num_timesteps,
                                 "seconds": _elapsed(self.state), "blocking_rate": score})
        if self.state.get("best_score") is None or score < self.state["best_score"]:
            self.state["best_score"] = score  # unrounded: a tie must not replace the first
            save_model(self.model, self.out / "best.zip", self.state)
            self.best_weights = weights(self.model.policy)
        return self._on_event()


class _SaveLatest(BaseCallback):
    """Each time it is stepped: ``latest.zip`` and ``run.json`` (:func:`save_state`)."""

    def __init__(self, out: Path, state: dict):
        super().__init__()
        self.out, self.state = out, state

    def _on_step(self) -> bool:
        save_state(self.model, self.out, self.state)
        return True


class _OnStepGrid(EveryNTimesteps):
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


class _StopAt(BaseCallback):
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


class _PpoStatistics(KVWriter):
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
    family (its graphs, its trace files), ``--init``'s checkpoint, and with ``resume`` the run's ``run.json`` and ``latest.zip``
    (:func:`~pacopt.learned.train_config.read_run_state`). Ctrl-C (or any stop request) ends the
    run within seconds: it is saved as it stands (``latest.zip`` and ``run.json``, resumable;
    ``best.zip`` as scored so far), and KeyboardInterrupt is raised.
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
            validation = _Validation(out, config, state, after=_SaveLatest(out, state))
            callback = CallbackList([_ProgressBar(config.max_steps, state),
                                     _TrainingCurve(out, state),
                                     _OnStepGrid(config.eval_every, validation, state),
                                     _StopAt(config.max_steps, deadline)])
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
                model.set_logger(Logger(folder=None, output_formats=[_PpoStatistics(out, state)]))
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
