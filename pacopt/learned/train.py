"""Training the agent: an imitation warm start, then sb3-contrib's MaskablePPO, resumable.

1. **Warm start.** The policy first imitates a teacher (``tuned`` by default; any heuristic; the
   ``rollout`` teacher, rollouts over ``tuned`` on sampled futures, or its hindsight form
   ``lookahead``; trained agents, one per distribution if wanted) on a few
   training episodes, then DAgger rounds label the states the policy itself visits:
   cross-entropy on the teacher's degree under the live mask, and the critic regresses the
   discounted returns. PPO then starts at the teacher's level instead of from a uniform policy.
   (Measured: in budgets under an hour on 2 cores PPO did not improve on this start; the curves
   in ``checkpoints/`` show it, and selection keeps the start when nothing beats it.)
2. **PPO.** MaskablePPO with :class:`~pacopt.learned.gnn.DegreePolicy` on vectorised
   environments (one process per environment by default, so both cores step episodes). Each
   episode is drawn from the workload family's training seeds.
3. **Selection.** Every ``eval_every`` steps the deterministic policy plays fixed *validation*
   episodes (training-range seeds, one per distribution, never the held-out evaluation seeds);
   the best one so far is kept as ``best.zip``.

The output folder holds ``latest.zip`` (saved at every evaluation and at the end; ``resume``
continues from it, step count, curve and best score included), ``best.zip``, ``curve.csv`` (one
row per finished training episode, and one per validation) and ``run.json`` (the settings).
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
from tqdm.auto import tqdm

from pacopt.cluster.errors import InputError
from pacopt.cluster.paper import PAPER_DISTRIBUTIONS, TRAIN_SEED_RANGE
from pacopt.cluster.policies import make_policy, tuned_choice
from pacopt.cluster.rollout import SAMPLED_FUTURES, SAMPLED_HORIZON, Rollout
from pacopt.learned.agent import load_checkpoint
from pacopt.learned.env import PartitionEnv, WorkloadFamily
from pacopt.learned.gnn import DegreePolicy, greedy_degree

#: Training-range seeds the best checkpoint is selected on (never the held-out seeds).
VALIDATION_SEEDS = (9_000, 9_001)


@dataclass
class TrainConfig:
    """Settings of one training run (recorded in ``run.json``)."""

    distributions: tuple[str, ...] = PAPER_DISTRIBUTIONS
    preset: str = "ddls"
    num_jobs: int = 1001
    minutes: float = 60.0
    max_steps: int | None = None
    envs: int = 2
    subprocess: bool = True
    seed: int = 0
    teacher: str = "tuned"
    init: str | None = None  # start from this checkpoint's weights (fine-tuning), no warm start
    warm_episodes: int = 5  # per distribution
    warm_epochs: int = 6
    dagger_rounds: int = 1
    dagger_episodes: int = 2  # per distribution and round
    learning_rate: float = 1e-4
    n_steps: int = 512
    batch_size: int = 256
    n_epochs: int = 4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.1
    ent_coef: float = 0.001
    eval_every: int = 20_000
    validation_seeds: tuple[int, ...] = VALIDATION_SEEDS
    reward: str = "acceptance"
    torch_threads: int = 1  # small networks: one thread each beats threads fighting for 2 cores

    def family(self, **kwargs) -> WorkloadFamily:
        return WorkloadFamily.paper(self.distributions, self.preset, self.num_jobs, **kwargs)

    def env(self) -> PartitionEnv:
        """A training environment (rewards scaled by 1 - gamma: returns of about 1)."""
        return PartitionEnv(self.family(), self.reward, reward_scale=1.0 - self.gamma)


def _make_env(config: TrainConfig, rank: int):
    def build():
        torch.set_num_threads(config.torch_threads)
        env = config.env()
        env.reset(seed=config.seed * 1000 + rank)
        return env
    return build


# ----- playing episodes -------------------------------------------------------------------------
def play(env: PartitionEnv, choose, distribution: str, seed: int,
         label=None) -> tuple[float, list]:
    """Play one episode with ``choose(env, obs, mask) -> degree``; returns its blocking rate and
    the (observation, action, mask, reward) steps. With ``label`` (same signature), the steps
    record ``label``'s degree for each state while ``choose`` drives (DAgger)."""
    obs, _ = env.reset(options={"distribution": distribution, "seed": seed})
    steps, done, info = [], False, {}
    while not done:
        mask = env.action_masks()
        action = _allowed(choose(env, obs, mask), mask)
        recorded = action if label is None else _allowed(label(env, obs, mask), mask)
        next_obs, reward, done, _, info = env.step(action)
        steps.append((obs, recorded, mask, reward))
        obs = next_obs
    return info["blocking_rate"], steps


def _allowed(action, mask) -> int:
    """A degree outside the mask blocks the job, as reject does: record it as reject."""
    action = int(action)
    return action if mask[action] else 0


def greedy_chooser(policy: DegreePolicy):
    """``choose`` for :func:`play`: the policy's most likely allowed degree."""
    return lambda env, obs, mask: greedy_degree(policy, obs, mask)


def teacher_chooser(name: str, distribution: str, preset: str = "ddls",
                    family: WorkloadFamily | None = None, seed: int = 0):
    """``choose`` for :func:`play`: a heuristic's degree (``tuned`` resolves per distribution);
    ``lookahead``: the hindsight rollout teacher over ``tuned`` (:mod:`pacopt.cluster.rollout`;
    training episodes only); ``rollout``: the rollout teacher over ``tuned`` on job streams
    sampled from ``family`` (training seeds drawn with ``seed``); ``agent:PATH``, a trained
    agent's greedy degree, where ``{dist}`` in PATH becomes the distribution (distilling
    per-distribution agents into one); or one of these per distribution,
    ``A=agent:a.zip,B=tuned,C=...``."""
    if "=" in name:  # one teacher per distribution: "A=agent:a.zip,B=tuned,..."
        choice = dict(pair.split("=", 1) for pair in name.split(","))
        if distribution not in choice:
            raise InputError(f"teacher '{name}' names no teacher for distribution {distribution}")
        return teacher_chooser(choice[distribution], distribution, preset, family, seed)
    if name in ("lookahead", "rollout"):
        futures = None
        if name == "rollout":
            if family is None:
                raise InputError("the rollout teacher needs the workload family to sample from")
            seeds = np.random.default_rng(seed).integers(*family.seed_range, SAMPLED_FUTURES)
            futures = [family.instance(distribution, int(s)).jobs for s in seeds]
        teacher = Rollout(make_policy(tuned_choice(distribution, preset)),
                          SAMPLED_HORIZON if futures else 40, futures)
        return lambda env, obs, mask: teacher.choose(env.episode, mask)
    if name.startswith("agent:"):  # a trained agent per distribution: distillation
        return greedy_chooser(load_checkpoint(name[len("agent:"):].format(dist=distribution)))
    policy = make_policy(tuned_choice(distribution, preset) if name == "tuned" else name)
    policy.reset(0)
    return lambda env, obs, mask: policy.choose(env.episode.decision)


def validate_policy(env: PartitionEnv, policy: DegreePolicy, distributions, seeds) -> float:
    """Mean blocking rate of the deterministic policy over ``distributions`` x ``seeds``."""
    choose = greedy_chooser(policy)
    return float(np.mean([play(env, choose, d, s)[0] for d in distributions for s in seeds]))


# ----- the warm start ---------------------------------------------------------------------------
def warm_start(model: MaskablePPO, config: TrainConfig, rng: np.random.Generator,
               log=print) -> None:
    """Imitate the teacher (module doc): ``warm_episodes`` teacher episodes per distribution,
    then ``dagger_rounds`` rounds in which the policy drives and the teacher labels the states
    it visits (so the policy learns to recover from its own mistakes); after each round the
    policy is fitted again to everything collected. The episodes of a round are played by
    ``config.envs`` processes side by side (a rollout teacher takes about a minute each)."""
    data: list = []
    policy = model.policy
    optimiser = torch.optim.Adam(policy.parameters(), lr=1e-3)
    pool = (ProcessPoolExecutor(config.envs, mp_context=multiprocessing.get_context("spawn"))
            if config.envs > 1 and config.subprocess else None)
    try:
        for round_ in range(1 + config.dagger_rounds):
            count = config.warm_episodes if round_ == 0 else config.dagger_episodes
            driver = None if round_ == 0 else {k: v.detach().clone()
                                               for k, v in policy.state_dict().items()}
            tasks = [(config, dist, int(rng.integers(*TRAIN_SEED_RANGE)), int(rng.integers(2**31)),
                      driver) for dist in config.distributions for _ in range(count)]
            results = pool.map(_label_episode, tasks) if pool else map(_label_episode, tasks)
            for (_, dist, seed, _, _), (blocking, steps) in zip(tasks, results):
                data += steps
                who = "teacher" if round_ == 0 else f"policy (DAgger round {round_})"
                log(f"warm start: {who} on {dist} seed {seed}: blocking {blocking:.3f}")
            _fit(policy, optimiser, data, config, rng, log)
    finally:
        if pool:
            pool.shutdown(cancel_futures=True)


def _label_episode(task) -> tuple[float, list]:
    """One warm-start episode (a pool task): the teacher drives, or with a ``driver`` (the
    policy's weights: DAgger) the policy drives and the teacher labels; its blocking rate and
    labelled steps."""
    config, dist, seed, teacher_seed, driver = task
    torch.set_num_threads(config.torch_threads)
    env = config.env()
    teacher = teacher_chooser(config.teacher, dist, config.preset, env.family, teacher_seed)
    if driver is None:
        blocking, steps = play(env, teacher, dist, seed)
    else:
        policy = MaskablePPO(DegreePolicy, env, device="cpu").policy
        policy.load_state_dict(driver)
        policy.set_training_mode(False)
        blocking, steps = play(env, greedy_chooser(policy), dist, seed, label=teacher)
    return blocking, _with_returns(steps, config.gamma)


def _with_returns(steps: list, gamma: float) -> list:
    """(observation, action, mask, discounted return) per step."""
    out, running = [], 0.0
    for obs, action, mask, reward in reversed(steps):
        running = reward + gamma * running
        out.append((obs, action, mask, running))
    return out[::-1]


def _fit(policy: DegreePolicy, optimiser, data: list, config: TrainConfig,
         rng: np.random.Generator, log) -> None:
    """Cross-entropy on the recorded degrees (under their masks) plus value regression."""
    obs = {k: np.stack([d[0][k] for d in data]) for k in data[0][0]}
    actions = torch.as_tensor(np.array([d[1] for d in data]))
    masks = torch.as_tensor(np.stack([d[2] for d in data]))
    returns = torch.as_tensor(np.array([d[3] for d in data], dtype=np.float32))
    policy.set_training_mode(True)
    for epoch in range(config.warm_epochs):
        order = rng.permutation(len(actions))
        losses = []
        for start in range(0, len(order), config.batch_size):
            idx = order[start:start + config.batch_size]
            batch = obs_as_tensor({k: v[idx] for k, v in obs.items()}, policy.device)
            values, log_prob, _ = policy.evaluate_actions(batch, actions[idx], masks[idx])
            loss = (-log_prob.mean()
                    + 0.5 * torch.nn.functional.mse_loss(values.flatten(), returns[idx]))
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            optimiser.step()
            losses.append(loss.item())
        log(f"warm start: epoch {epoch + 1}/{config.warm_epochs} on {len(data)} states, "
            f"loss {np.mean(losses):.4f}")
    policy.set_training_mode(False)


# ----- PPO with a wall-clock budget, a curve and checkpoints ------------------------------------
class _Monitor(BaseCallback):
    """Logs finished episodes to the curve, shows a progress bar, validates and checkpoints, and
    stops at the step or wall-clock budget."""

    def __init__(self, out: Path, config: TrainConfig, state: dict, deadline: float):
        super().__init__()
        self.out, self.config, self.state, self.deadline = out, config, state, deadline
        self.recent: deque[float] = deque(maxlen=20)
        self.bar = None
        self.validation_env = None
        self.next_eval = state.get("next_eval", config.eval_every)

    def _on_training_start(self) -> None:
        total = self.config.max_steps or 0
        self.bar = tqdm(total=total or None, initial=self.num_timesteps, unit="step",
                        desc="PPO", disable=None, dynamic_ncols=True)

    def _on_step(self) -> bool:
        self.bar.update(self.num_timesteps - self.bar.n)
        for info, done in zip(self.locals["infos"], self.locals["dones"]):
            if done and "blocking_rate" in info:
                self.recent.append(info["blocking_rate"])
                _append_curve(self.out, {"kind": "train", "steps": self.num_timesteps,
                                         "seconds": self._seconds(),
                                         "blocking_rate": info["blocking_rate"]})
                best = self.state.get("best_score")
                self.bar.set_postfix(blocking=f"{np.mean(self.recent):.3f}",
                                     best="-" if best is None else f"{best:.4f}")
        if self.num_timesteps >= self.next_eval:
            self.next_eval += self.config.eval_every
            self.evaluate()
        over_steps = self.config.max_steps is not None and self.num_timesteps >= self.config.max_steps
        return not (over_steps or time.time() >= self.deadline)

    def _seconds(self) -> float:
        return self.state["seconds"] + time.time() - self.state["started"]

    def evaluate(self) -> None:
        """Score the deterministic policy on the validation episodes; keep it if best."""
        if self.validation_env is None:
            self.validation_env = self.config.env()
        score = validate_policy(self.validation_env, self.model.policy, self.config.distributions,
                                self.config.validation_seeds)
        _append_curve(self.out, {"kind": "validation", "steps": self.num_timesteps,
                                 "seconds": self._seconds(), "blocking_rate": score})
        if self.state.get("best_score") is None or score < self.state["best_score"]:
            self.state["best_score"] = score  # unrounded: a tie must not replace the first
            self.model.save(self.out / "best.zip")
        self.state["next_eval"] = self.next_eval
        save_state(self.model, self.out, self.state)

    def _on_training_end(self) -> None:
        self.bar.close()


def _append_curve(out: Path, row: dict) -> None:
    path = out / "curve.csv"
    new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, ["kind", "steps", "seconds", "blocking_rate"])
        if new:
            writer.writeheader()
        writer.writerow(row)


def save_state(model: MaskablePPO, out: Path, state: dict) -> None:
    """Write ``latest.zip`` and the run state (atomically, so a kill never leaves half a file)."""
    model.save(out / "latest.tmp.zip")
    (out / "latest.tmp.zip").replace(out / "latest.zip")
    now = time.time()
    state["seconds"] += now - state["started"]
    state["started"] = now
    state["steps"] = int(model.num_timesteps)
    (out / "run.json").write_text(json.dumps(state, indent=1))


def train(config: TrainConfig, out: str | Path, resume: bool = False, log=print) -> Path:
    """Train (or, with ``resume``, continue) an agent into ``out``; returns the best checkpoint.

    ``config.minutes`` bounds this call's wall time (warm start included); ``max_steps`` the
    total environment steps.
    """
    out = Path(out)
    started = time.time()
    deadline = started + 60 * config.minutes
    if resume:
        if not (out / "latest.zip").is_file() or not (out / "run.json").is_file():
            raise InputError(f"--resume: no checkpoint to resume in '{out}' (latest.zip, run.json)")
        state = json.loads((out / "run.json").read_text())
    else:
        if (out / "latest.zip").exists():
            raise InputError(f"'{out}' already holds a training run; use --resume or another --out")
        out.mkdir(parents=True, exist_ok=True)
        state = {"config": asdict(config), "seconds": 0.0, "best_score": None}
    state["started"] = started
    torch.set_num_threads(config.torch_threads)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    vec_cls = SubprocVecEnv if config.subprocess and config.envs > 1 else DummyVecEnv
    envs = vec_cls([_make_env(config, i) for i in range(config.envs)])
    try:
        if resume:
            model = MaskablePPO.load(out / "latest.zip", env=envs, device="cpu")
        else:
            model = MaskablePPO(
                DegreePolicy, envs, learning_rate=config.learning_rate, n_steps=config.n_steps,
                batch_size=config.batch_size, n_epochs=config.n_epochs, gamma=config.gamma,
                gae_lambda=config.gae_lambda, clip_range=config.clip_range,
                ent_coef=config.ent_coef, seed=config.seed, device="cpu", verbose=0)
            if config.init:
                model.policy.load_state_dict(load_checkpoint(str(Path(config.init).resolve()))
                                             .state_dict())
            elif config.teacher and config.warm_episodes:
                warm_start(model, config, rng, log)
            state["started"] = started
            save_state(model, out, state)
        callback = _Monitor(out, config, state, deadline)
        if not resume:  # score the starting point: PPO must beat it to replace best.zip
            callback.init_callback(model)
            callback.evaluate()
        budget = (config.max_steps - model.num_timesteps if config.max_steps
                  else 10 ** 9)  # the wall-clock budget stops it first
        if budget > 0 and time.time() < deadline:
            model.set_logger(Logger(folder=None, output_formats=[]))  # sb3 would make a /tmp dir
            model.learn(total_timesteps=budget, callback=callback, reset_num_timesteps=False)
            callback.evaluate()
        save_state(model, out, state)
    finally:
        envs.close()
    best = out / "best.zip"
    return best if best.exists() else out / "latest.zip"
