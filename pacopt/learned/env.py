"""The gymnasium environment: one decision per arriving job, over pacopt's online simulator.

Each ``reset`` draws a new episode from a *workload family*: the base instance's cluster, model,
graphs and horizon, with a fresh job stream whose beta distribution and seed are drawn from the
family (by default the paper's four distributions and the training seed range of
:mod:`pacopt.model.paper_workload`, so evaluation seeds are never seen). ``step(degree)`` decides the
waiting job through :class:`~pacopt.model.simulator.OnlineEpisode` (placed on the live cluster
by the instance's placer, first fit by default, exactly as for every other policy: the agent
chooses the degree, the placer where it goes) and moves to the next arrival.

Rewards (``reward=``): ``"acceptance"`` (PAC-ML's, the default) +1 when the job is accepted and
-1 when it is blocked for any reason; ``"accepted"`` +1 / 0; both times ``reward_scale`` (training
uses 1 - gamma, so that returns stay about 1 and the critic's loss does not swamp the actor's
gradient through the shared encoder). Both are known at decision time: a job's JCT is fixed when
it is placed, so its fate (deadline, horizon) is too.

``action_masks()`` (sb3-contrib's protocol) allows reject and the degrees that the placer can
place now and that meet the deadline; every other degree blocks the job exactly as reject does.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from pacopt.infra.errors import InputError
from pacopt.learned.features import Observer
from pacopt.model.datasets import trace_path
from pacopt.model.instance import Instance, instance_from_dict
from pacopt.model.jct import JctModel
from pacopt.model.paper_workload import (
    PAPER_DISTRIBUTIONS,
    TRAIN_SEED_RANGE,
    on_cluster,
    paper_instance_dict,
)
from pacopt.model.placers import DEFAULT_PLACER
from pacopt.model.simulator import OnlineEpisode
from pacopt.model.trace import (
    DEFAULT_LOAD,
    DEFAULT_MODELS,
    DEFAULT_NUM_JOBS,
    TraceSpec,
    evaluation_rows,
    expand_trace,
    read_trace,
)
from pacopt.model.workload import generate_jobs

REWARDS = ("acceptance", "accepted")


@dataclass
class WorkloadFamily:
    """Episodes that share a cluster, a model, graphs and a horizon, with job streams drawn from
    ``workload`` (an instance's ``workload`` JSON section) with each episode's own seed and beta
    distribution."""

    base: Instance
    workload: dict
    distributions: tuple[str, ...] = PAPER_DISTRIBUTIONS
    seed_range: tuple[int, int] = TRAIN_SEED_RANGE

    @classmethod
    def paper(cls, distributions: tuple[str, ...] = PAPER_DISTRIBUTIONS, preset: str = "ddls",
              num_jobs: int = 1001, seed_range: tuple[int, int] = TRAIN_SEED_RANGE,
              placement: str = DEFAULT_PLACER, cluster: tuple[int, int, int] | None = None,
              **kwargs) -> WorkloadFamily:
        """The paper's workload family (see :func:`pacopt.model.paper_workload.paper_instance_dict`)
        under ``placement``; on ``cluster`` (groups, racks, servers per rack) at the paper's
        load per server if given (:func:`~pacopt.model.paper_workload.on_cluster`)."""
        data = paper_instance_dict("A", 0, num_jobs, preset, **kwargs)
        if cluster is not None:
            on_cluster(data, cluster)
        data["model"]["placement"] = placement
        return cls.from_instance_data(data, distributions=distributions, seed_range=seed_range,
                                      source="paper")

    @classmethod
    def from_instance_data(cls, data: dict, base_dir: str | Path = ".", *,
                           distributions: tuple[str, ...] = PAPER_DISTRIBUTIONS,
                           seed_range: tuple[int, int] = TRAIN_SEED_RANGE,
                           source: str | None = None) -> WorkloadFamily:
        """The family of an instance JSON dict with a ``workload`` section (its explicit jobs, if
        any, are dropped): its cluster, model, graphs and horizon, with new job streams."""
        if "workload" not in data:
            raise InputError("a training family needs an instance with a 'workload' section")
        for dist in distributions:
            if dist not in PAPER_DISTRIBUTIONS:
                raise InputError(f"unknown beta distribution '{dist}'; expected one of "
                                 f"{', '.join(PAPER_DISTRIBUTIONS)}")
        data = {**copy.deepcopy(data), "jobs": []}
        base = instance_from_dict(data, base_dir, source=source)  # checks the whole instance
        return cls(replace(base, jobs=[]), data["workload"], tuple(distributions), seed_range)

    def instance(self, distribution: str, seed: int) -> Instance:
        """The episode of ``distribution`` and workload ``seed``."""
        workload = copy.deepcopy(self.workload)
        workload["seed"] = int(seed)
        workload["max_jct_fraction"] = {"paper": distribution}
        jobs = generate_jobs(workload, self.base.graphs)
        return replace(self.base, jobs=jobs,
                       source=f"{self.base.source or 'family'}-{distribution}-seed{seed}")

    def draw(self, rng: np.random.Generator) -> tuple[Instance, dict]:
        """A random episode of the family, and what was drawn."""
        distribution = self.distributions[int(rng.integers(len(self.distributions)))]
        seed = int(rng.integers(*self.seed_range))
        return self.instance(distribution, seed), {"distribution": distribution, "seed": seed}


@dataclass
class TraceFamily(WorkloadFamily):
    """Episodes that are windows of real job traces (:mod:`pacopt.model.trace`): each
    "distribution" is one trace file (labelled by its name, e.g. ``cluster02``), and an episode's
    seed picks a window of ``workload["trace"]["num_jobs"]`` consecutive jobs that overlaps none of
    the windows the project's trace tables are measured on
    (:data:`~pacopt.model.trace.EVALUATION_WINDOWS`), and seeds its draws."""

    files: dict[str, Path] = field(default_factory=dict)
    _windows: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_files(cls, files, preset: str = "ddls", placement: str = DEFAULT_PLACER,
                   num_jobs: int = DEFAULT_NUM_JOBS, load: float = DEFAULT_LOAD,
                   fmt: str = "elasticflow",
                   seed_range: tuple[int, int] = TRAIN_SEED_RANGE) -> TraceFamily:
        """The family of trace ``files`` (format ``fmt``) replayed at ``load`` on the 4x4x2
        cluster under ``preset`` and ``placement``. A file that cannot be read, or that has no
        window outside the evaluation windows, is an :class:`InputError` naming it."""
        # a path, or a trace's name (cluster04) in the traces folder (pacopt download-traces)
        paths = {Path(f).stem: trace_path(f, fmt) for f in files}
        if len(paths) != len(files) or not paths:
            raise InputError("--trace: give one or more trace files with distinct names")
        trace = {"format": fmt, "num_jobs": num_jobs, "load": load}
        data = {"model": {"preset": preset, "placement": placement},
                "workload": {"trace": {**trace, "file": str(next(iter(paths.values()))),
                                       "num_jobs": 1, "load": None}}}
        base = instance_from_dict(data, source="trace")  # checks the settings and the first file
        family = cls(replace(base, jobs=[]), {"trace": trace}, tuple(paths), seed_range,
                     files=paths)
        for label in paths:
            family._starts(label)  # each file read and checked now, not in the first episode
        return family

    def _rows(self, label: str):
        fmt = self.workload["trace"]["format"]
        return read_trace(self.files[label], fmt,
                          DEFAULT_MODELS if fmt == "elasticflow" else None)

    def _starts(self, label: str) -> np.ndarray:
        """First rows of the windows training may use: clear of the evaluation windows, and
        the first row of their submission second (a window starts at a time); found once per
        file."""
        if label in self._windows:
            return self._windows[label]
        rows = self._rows(label)
        n = self.workload["trace"]["num_jobs"]
        ok = np.ones(max(len(rows) - n + 1, 0), dtype=bool)
        for start, stop in evaluation_rows(rows, self.base.model.max_partitions_per_op):
            ok[max(start - n + 1, 0):stop] = False
        times = np.array([r.submission_s for r in rows])
        ok[1:] &= times[1:len(ok)] > times[:len(ok) - 1]
        starts = np.flatnonzero(ok)
        if not len(starts):
            raise InputError(f"--trace: '{self.files[label]}' has no window of {n} jobs outside "
                             "the evaluation windows (docs/traces.md)")
        self._windows[label] = starts
        return starts

    def instance(self, distribution: str, seed: int) -> Instance:
        """The window of trace ``distribution`` (a file's label) that ``seed`` picks."""
        rows, starts = self._rows(distribution), self._starts(distribution)
        start = int(starts[np.random.default_rng(seed).integers(len(starts))])
        spec = TraceSpec.parse({**self.workload["trace"], "file": str(self.files[distribution]),
                                "start_s": rows[start].submission_s, "seed": int(seed)},
                               ("workload", "trace"))
        replay = expand_trace(spec, self.base.graphs, self.base.cluster, self.base.model)
        return replace(self.base, graphs={**self.base.graphs, **replay.graphs}, jobs=replay.jobs,
                       source=f"trace-{distribution}-seed{seed}")


class PartitionEnv(gym.Env):
    """One decision per arriving job: action = degree (0 = reject). See the module doc."""

    metadata = {"render_modes": []}

    def __init__(self, family: WorkloadFamily, reward: str = "acceptance",
                 reward_scale: float = 1.0):
        if reward not in REWARDS:
            raise InputError(f"unknown reward '{reward}'; known: {', '.join(REWARDS)}")
        self.family = family
        self.reward = reward
        self.reward_scale = reward_scale
        base = family.base
        self.observer = Observer(base.cluster, base.model)
        self.model = JctModel(base.cluster, base.model)  # shared by every episode: warm caches
        self.observation_space = self.observer.observation_space()
        self.action_space = spaces.Discrete(self.observer.num_actions)
        self.episode: OnlineEpisode | None = None
        self._final_obs = {k: np.zeros(s.shape, s.dtype) for k, s in self.observation_space.items()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start a new episode; ``options`` may fix ``{"distribution": "B", "seed": 10001}``."""
        super().reset(seed=seed)
        options = options or {}
        if "seed" in options:
            distribution = options.get("distribution", self.family.distributions[0])
            instance = self.family.instance(distribution, options["seed"])
            info = {"distribution": distribution, "seed": int(options["seed"])}
        else:
            instance, info = self.family.draw(self.np_random)
        self.episode = OnlineEpisode(instance, self.model)
        self.observer.reset()
        self._require_a_decision()
        return self._observe(), info

    def _require_a_decision(self) -> None:
        """An episode whose every job arrives after the horizon has nothing to decide; such a
        family is a user error."""
        if self.episode.done:
            raise InputError("the workload has no job to decide before the horizon")

    def _observe(self) -> dict[str, np.ndarray]:
        if self.episode.done:
            return {key: value.copy() for key, value in self._final_obs.items()}
        return self.observer.observe(self.episode.decision)

    def step(self, action):
        if self.episode is None or self.episode.done:
            raise RuntimeError("call reset() before step()")
        record = self.episode.decide(int(action))
        if self.reward == "acceptance":
            reward = 1.0 if record.accepted else -1.0
        else:
            reward = 1.0 if record.accepted else 0.0
        reward *= self.reward_scale
        terminated = self.episode.done
        info = {"accepted": record.accepted, "reason": record.reason, "degree": record.degree}
        if terminated:
            records = self.episode.records
            info["blocking_rate"] = 1.0 - sum(r.accepted for r in records) / len(records)
        return self._observe(), reward, terminated, False, info

    def action_masks(self) -> np.ndarray:
        """Allowed actions now (sb3-contrib's MaskablePPO reads this)."""
        if self.episode is None or self.episode.done:
            mask = np.zeros(self.observer.num_actions, dtype=bool)
            mask[0] = True
            return mask
        return self.episode.decision.worthwhile_mask()
