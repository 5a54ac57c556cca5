"""The learned scheduler for the heterogeneous problem (HeterPS's RL idea on pacopt's model).

HeterPS picks a resource type per layer with reinforcement learning; pacopt's version (its own
design: only the paper's abstract was at hand) is a small MLP policy trained with sb3-contrib's
MaskablePPO in :class:`HeteroEnv`:

- an episode is one problem (a graph, the types, a step budget); step p assigns a type to
  position p of the linear order, through the same :class:`~pacopt.hetero.greedy.Walk`
  as the greedy, so the open stage's least replica count is kept exactly;
- the mask allows the types that keep the open (or new) stage within the budget with at most
  ``max_replicas`` replicas;
- the reward is minus the increase in cost per hour, divided by the problem's fluid bound
  (sum over ops of the cheapest price x time / budget), so the return is about minus the plan's
  cost ratio to a lower bound, comparable across graphs and budgets; a dead end (no type
  allowed) ends the episode with a penalty of :data:`DEAD_END`;
- the observation (:func:`observe`) is, per type, the op's time and all-reduce share over the
  budget, the next ops' mean time, the remaining work, the price, the replicas and cost increase
  if chosen, the inbound transfer, whether it is the open stage's type; plus the position, the open
  stage's replicas, length and headroom. It has a fixed size for a fixed number of types, so a
  checkpoint serves one types file's shape (4 types for the bundled one).

Training (:func:`train_hetero_policy`) samples a training graph and a step budget (the graph's A100 step time
divided by a log-uniform factor in :data:`LOAD_RANGE`) per episode. It first clones the DP
optimum's choices on 400 sampled problems (behaviour cloning of the masked policy: a warm start,
as the cluster agent's imitation), then fine-tunes with MaskablePPO; the cloning does most of
the work (``docs/experiments.md``, Heterogeneous resources). :func:`evaluate` reports the cost
gap to the DP optimum on graphs never trained on.
``python -m pacopt.hetero.rl --help``; the shipped checkpoint's run is described in
``examples/hetero/rl_policy.json``.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from pacopt.hetero.greedy import Walk
from pacopt.hetero.model import (
    HeteroPlan,
    HeteroProblem,
    build_hetero_problem,
    infeasible_plan,
    plan_from_types,
)
from pacopt.hetero.types import EXAMPLE_TYPES, ResourceTypes, load_types
from pacopt.infra.checkpoint import load_checked
from pacopt.infra.errors import InputError
from pacopt.model.graph import JobGraph

#: The shipped checkpoint (trained on the bundled types) and its description.
CHECKPOINT = EXAMPLE_TYPES.parent / "rl_policy.zip"
#: The policy class a hetero checkpoint holds (sb3-contrib's maskable MLP actor-critic).
HETERO_POLICY = "sb3_contrib.common.maskable.policies:MaskableActorCriticPolicy"
#: Per-type and global observation features.
TYPE_FEATURES, GLOBAL_FEATURES = 10, 5
#: Reward on a dead end (in units of the fluid bound).
DEAD_END = 5.0
#: Step budgets in training: the graph's A100 step time divided by a factor in this range.
LOAD_RANGE = (1.0, 30.0)
LOOKAHEAD = 8
#: The graphs the shipped policy trains on (bundled zoo and the PAC-ML paper's PipeDream five,
#: plus resnet50); every other PipeDream graph is held out.
TRAIN_GRAPHS = ("cnn", "resnet", "transformer", "alexnet", "vgg16", "resnet18", "squeezenet1_0",
                "gnmt", "resnet50")
HELD_OUT_GRAPHS = ("inception_v3", "densenet121", "resnet101", "resnext50", "resnext101",
                   "gnmt_large", "nasnetamobile")
#: Evaluation loads (A100 step time / budget).
EVAL_LOADS = (2.0, 5.0, 10.0, 20.0)


def fluid_bound(problem: HeteroProblem) -> float:
    """A lower bound on the cost per hour: every op on its cheapest type per unit of work, with
    fractional replicas (nothing else charged)."""
    return float((problem.types.prices[None, :] * problem.work).min(axis=1).sum()
                 / problem.step_budget_ms)


class _Context:
    """Per-problem arrays the observation reads, computed once per episode."""

    def __init__(self, problem: HeteroProblem):
        T = problem.step_budget_ms
        self.work = problem.work / T
        self.reduce = problem.allreduce / T
        kernel = np.ones(LOOKAHEAD) / LOOKAHEAD
        padded = np.vstack([self.work[1:], np.zeros((LOOKAHEAD, problem.num_types))])
        self.ahead = np.stack([np.convolve(padded[:, k], kernel, "valid")[:problem.num_positions]
                               for k in range(problem.num_types)], axis=1)
        self.remaining = np.cumsum(self.work[::-1], axis=0)[::-1] / problem.max_replicas
        self.price = problem.types.prices / max(problem.types.prices.max(), 1e-12)
        self.norm = max(fluid_bound(problem), 1e-9)


def observe(walk: Walk, context: _Context, replicas: np.ndarray, increase: np.ndarray) -> np.ndarray:
    """The observation of the next decision (module docstring)."""
    p, problem = walk.position, walk.problem
    K, T, rmax = problem.num_types, problem.step_budget_ms, problem.max_replicas
    current = walk.current
    inbound = problem.comm[p, current] / T if current is not None and p else np.zeros(K)
    per_type = np.stack([
        np.log1p(context.work[p]), np.log1p(context.reduce[p]), np.log1p(context.ahead[p]),
        np.log1p(context.remaining[p]), context.price, replicas / rmax,
        np.where(np.isfinite(increase), np.minimum(increase / context.norm, 5.0), -1.0),
        np.log1p(inbound), np.array([k == current for k in range(K)], dtype=float),
        np.isfinite(increase).astype(float)], axis=1)
    if current is None:
        headroom, length = 0.0, 0.0
    else:
        stage = walk.labels[walk.start:]
        load = context.work[walk.start:p, current].sum() + context.reduce[walk.start:p,
                                                                          current].sum()
        headroom = min(walk.replicas - load, 5.0)
        length = len(stage) / problem.num_positions
    glob = np.array([p / problem.num_positions, walk.replicas / rmax, length, headroom,
                     1.0 if p == 0 else 0.0])
    return np.concatenate([per_type.ravel(), glob]).astype(np.float32)


class HeteroEnv(gym.Env):
    """One episode assigns types to one problem; ``sample(rng)`` draws the problem."""

    def __init__(self, sample, num_types: int):
        self.sample = sample
        self.num_types = num_types
        size = num_types * TYPE_FEATURES + GLOBAL_FEATURES
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.action_space = gym.spaces.Discrete(num_types)
        self.walk: Walk | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        problem = options["problem"] if options and "problem" in options else \
            self.sample(self.np_random)
        self.walk = Walk(problem)
        self.context = _Context(problem)
        return self._observe(), {}

    def _observe(self) -> np.ndarray:
        self.replicas, self.increase = self.walk.options()
        return observe(self.walk, self.context, self.replicas, self.increase)

    def action_masks(self) -> np.ndarray:
        """Allowed types now (sb3-contrib's MaskablePPO reads this); all, at a dead end."""
        mask = np.isfinite(self.increase)
        return mask if mask.any() else np.ones(self.num_types, dtype=bool)

    def step(self, action):
        k = int(action)
        if not np.isfinite(self.increase[k]):  # a dead end: no type can take the position
            return self._observe_done(), -DEAD_END, True, False, {"dead_end": True}
        reward = -float(self.increase[k]) / self.context.norm
        self.walk.take(k, self.replicas[k])
        if self.walk.done:
            return self._observe_done(), reward, True, False, {}
        return self._observe(), reward, False, False, {}

    def _observe_done(self) -> np.ndarray:
        return np.zeros(self.observation_space.shape, np.float32)


# ----- the scheduler as a method -------------------------------------------------------------------
def load_policy(path: str | Path = CHECKPOINT):
    """Load a MaskablePPO checkpoint; a missing or unreadable file is an :class:`InputError`."""
    from sb3_contrib import MaskablePPO

    path = Path(path)
    if not path.exists():
        raise InputError(f"RL checkpoint '{path}' not found; train one with "
                         "`python -m pacopt.hetero.rl --out FILE`")
    model = load_checked(path, lambda file: MaskablePPO.load(file, device="cpu"),
                         "RL checkpoint", policy=HETERO_POLICY,
                         kind="hetero scheduler checkpoint")
    if not (isinstance(model.observation_space, spaces.Box)
            and len(model.observation_space.shape) == 1
            and isinstance(model.action_space, spaces.Discrete)):
        raise InputError(f"RL checkpoint '{path}' is not a hetero scheduler (its spaces are "
                         f"{type(model.observation_space).__name__} and "
                         f"{type(model.action_space).__name__})")
    return model


def solve_rl(problem: HeteroProblem, model=None) -> HeteroPlan:
    """The trained policy's plan (deterministic: the most likely allowed type at each step)."""
    started = time.perf_counter()
    model = model if model is not None else load_policy()
    expected = problem.num_types * TYPE_FEATURES + GLOBAL_FEATURES
    if model.observation_space.shape != (expected,):
        raise InputError(f"the RL checkpoint was trained for "
                         f"{(model.observation_space.shape[0] - GLOBAL_FEATURES) // TYPE_FEATURES}"
                         f" types; this types file has {problem.num_types}")
    env = HeteroEnv(None, problem.num_types)
    obs, _ = env.reset(options={"problem": problem})
    while True:
        mask = env.action_masks()
        if not np.isfinite(env.increase).any():
            return infeasible_plan(problem, "rl", time.perf_counter() - started,
                                   f"the policy reached position {env.walk.position}, "
                                   "which no type can take")
        action, _ = model.predict(obs, action_masks=mask, deterministic=True)
        obs, _, done, _, _ = env.step(action)
        if done:
            break
    return plan_from_types(problem, env.walk.labels, "rl", "heuristic",
                           time.perf_counter() - started)


# ----- training and evaluation ---------------------------------------------------------------------
def training_graphs(names) -> list[JobGraph]:
    """The named graphs: bundled examples, or PipeDream profiles found locally (skipped if not)."""
    from pacopt.model.graph_sources import resolve_graph

    graphs = []
    for name in names:
        try:
            graphs.append(resolve_graph(name))
        except InputError:
            print(f"skipping {name}: not available", file=sys.stderr)
    return graphs


def problem_sampler(graphs: list[JobGraph], types: ResourceTypes, load_range=LOAD_RANGE):
    """Draws (graph, step budget) uniformly / log-uniformly; built problems are cached."""
    cache: dict[tuple[int, float], HeteroProblem] = {}
    lo, hi = math.log(load_range[0]), math.log(load_range[1])

    def sample(rng: np.random.Generator) -> HeteroProblem:
        g = int(rng.integers(len(graphs)))
        load = round(math.exp(rng.uniform(lo, hi)), 1)  # a coarse grid keeps the cache small
        if (g, load) not in cache:
            cache[g, load] = build_hetero_problem(graphs[g], types, graphs[g].step_ms / load)
        return cache[g, load]

    return sample


def evaluate(model, graphs: list[JobGraph], types: ResourceTypes, loads=EVAL_LOADS) -> list[dict]:
    """Per graph and load: the RL, greedy and DP (optimal) costs per hour and the gaps."""
    from pacopt.hetero.exact import solve_dp
    from pacopt.hetero.greedy import solve_greedy

    rows = []
    for graph in graphs:
        for load in loads:
            problem = build_hetero_problem(graph, types, graph.step_ms / load)
            best = solve_dp(problem)
            if best.status != "optimal":
                continue
            rl, greedy = solve_rl(problem, model), solve_greedy(problem)
            rows.append({"graph": graph.name, "load": load, "optimum": best.cost_per_hour,
                         "rl": rl.cost_per_hour, "greedy": greedy.cost_per_hour,
                         "rl_gap": _gap(rl, best), "greedy_gap": _gap(greedy, best)})
    return rows


def _gap(plan: HeteroPlan, best: HeteroPlan) -> float | None:
    if plan.cost_per_hour is None:
        return None
    return plan.cost_per_hour / best.cost_per_hour - 1.0


def demonstrations(problems: list[HeteroProblem]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(observations, masks, actions) of the DP optimum's choices on ``problems``."""
    from pacopt.hetero.exact import solve_dp

    obs, masks, actions = [], [], []
    for problem in problems:
        best = solve_dp(problem)
        if best.status != "optimal":
            continue
        names = problem.types.names
        labels = [names.index(best.assignment[problem.graph.ops[op].id]) for op in problem.order]
        env = HeteroEnv(None, problem.num_types)
        o, _ = env.reset(options={"problem": problem})
        for k in labels:
            obs.append(o)
            masks.append(env.action_masks())
            actions.append(k)
            o, _, done, _, _ = env.step(k)
    return np.array(obs), np.array(masks), np.array(actions)


def imitate(model, problems: list[HeteroProblem], epochs: int = 30, seed: int = 0) -> float:
    """Behaviour cloning of the DP optimum (cross-entropy on the masked policy); the mean loss
    of the last epoch."""
    import torch

    obs, masks, actions = demonstrations(problems)
    policy = model.policy
    optimiser = torch.optim.Adam(policy.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)
    loss_value = math.nan
    for _ in range(epochs):
        order = rng.permutation(len(actions))
        losses = []
        for chunk in np.array_split(order, max(1, len(order) // 256)):
            dist = policy.get_distribution(torch.as_tensor(obs[chunk]), action_masks=masks[chunk])
            loss = -dist.log_prob(torch.as_tensor(actions[chunk])).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
        loss_value = float(np.mean(losses))
    return loss_value


def train_hetero_policy(graphs: list[JobGraph], types: ResourceTypes, timesteps: int, seed: int = 0,
          imitation_problems: int = 400, learning_rate: float = 1e-4, progress: bool = False):
    """Train the policy (small MLP) on problems drawn from ``graphs``: behaviour cloning of the
    DP optimum on ``imitation_problems`` sampled problems, then MaskablePPO for ``timesteps``."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.logger import Logger

    torch.manual_seed(seed)
    torch.set_num_threads(1)  # a small MLP: more threads only contend on a shared machine
    sample = problem_sampler(graphs, types)
    env = HeteroEnv(sample, len(types.names))
    rollout = min(1024, max(64, timesteps))  # a short (test) run still makes one update
    model = MaskablePPO("MlpPolicy", env, seed=seed, n_steps=rollout,
                        batch_size=min(256, rollout), n_epochs=5,
                        gamma=1.0, gae_lambda=0.95, learning_rate=learning_rate, ent_coef=0.001,
                        policy_kwargs={"net_arch": [64, 64]}, device="cpu", verbose=0)
    if imitation_problems:
        rng = np.random.default_rng(seed)
        imitate(model, [sample(rng) for _ in range(imitation_problems)], seed=seed)
    if timesteps:
        model.set_logger(Logger(folder=None, output_formats=[]))  # sb3 would make a /tmp dir
        model.learn(total_timesteps=timesteps, callback=_progress_bar(timesteps) if progress else None)
    return model


def _progress_bar(total: int):
    """A tqdm bar over PPO's timesteps (sb3's own needs ``rich``, which pacopt does not use)."""
    from stable_baselines3.common.callbacks import BaseCallback

    from pacopt.infra.progress import tqdm

    class Bar(BaseCallback):
        def _on_training_start(self) -> None:
            self.bar = tqdm(total=total, unit="step", desc="PPO")

        def _on_step(self) -> bool:
            self.bar.update(self.training_env.num_envs)
            return True

        def _on_training_end(self) -> None:
            self.bar.close()

    return Bar()


def main(argv: list[str] | None = None) -> int:
    """Train on :data:`TRAIN_GRAPHS`, report gaps on :data:`HELD_OUT_GRAPHS`, save the policy."""
    from pacopt.infra.commandline import CommandParser, run_command

    def run(argv) -> int:
        parser = CommandParser(prog="python -m pacopt.hetero.rl",
                         description="Train the heterogeneous RL scheduler and report its gaps.")
        parser.add_argument("--types", default=str(EXAMPLE_TYPES))
        parser.add_argument("--timesteps", type=int, default=200_000)
        parser.add_argument("--learning-rate", type=float, default=1e-4)
        parser.add_argument("--imitation", type=int, default=400, metavar="N",
                            help="problems whose DP optimum is cloned first (0: pure PPO)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--out", default=str(CHECKPOINT))
        args = parser.parse_args(argv)
        types = load_types(args.types)
        started = time.perf_counter()
        model = train_hetero_policy(training_graphs(TRAIN_GRAPHS), types, args.timesteps, args.seed,
                      imitation_problems=args.imitation, learning_rate=args.learning_rate,
                      progress=sys.stderr.isatty())
        minutes = (time.perf_counter() - started) / 60
        rows = evaluate(model, training_graphs(HELD_OUT_GRAPHS), types)
        model.save(args.out)
        gaps = [r["rl_gap"] for r in rows if r["rl_gap"] is not None]
        summary = {"types": list(types.names), "timesteps": args.timesteps, "seed": args.seed,
                   "imitation_problems": args.imitation, "learning_rate": args.learning_rate,
                   "train_graphs": list(TRAIN_GRAPHS), "train_minutes": round(minutes, 2),
                   "held_out": rows,
                   "mean_rl_gap": float(np.mean(gaps)) if gaps else None,
                   "mean_greedy_gap": float(np.mean([r["greedy_gap"] for r in rows
                                                     if r["greedy_gap"] is not None]))}
        Path(args.out).with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
        print(json.dumps({k: v for k, v in summary.items() if k != "held_out"}, indent=1))
        return 0

    return run_command(run, argv)


if __name__ == "__main__":
    sys.exit(main())
