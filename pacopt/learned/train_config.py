"""The settings of a training run, :class:`TrainConfig`, which are also the ``pacopt train``
command line: each field that is an option carries its flag, help and allowed range
(:class:`Option`), and the config checks the ranges. Kept apart from :mod:`pacopt.learned.train`
so that the command checks its flags without importing torch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pacopt.infra.errors import InputError
from pacopt.learned.checkpoint_meta import check_agent_checkpoint
from pacopt.learned.env import PartitionEnv, TraceFamily, WorkloadFamily
from pacopt.learned.teacher import IMPROVE_FUTURES, IMPROVE_HORIZON, TeacherSpec
from pacopt.model.paper_workload import PAPER_DISTRIBUTIONS, parse_cluster
from pacopt.model.placers import DEFAULT_PLACER, PLACERS, check_placer
from pacopt.online.rollout import SAMPLED_FUTURES

#: Training-range seeds the best checkpoint is selected on (never the held-out seeds).
VALIDATION_SEEDS = tuple(range(9_000, 9_008))
#: On traces, two windows of each trace (episodes of several traces are slower and longer-lived).
TRACE_VALIDATION_SEEDS = VALIDATION_SEEDS[:2]


@dataclass(frozen=True)
class Option:
    """How a :class:`TrainConfig` field is set on the ``pacopt train`` command line (the field's
    ``metadata["option"]``; :mod:`pacopt.learned.train_command` builds its parser from these),
    and the range its value must lie in (:class:`TrainConfig` checks it)."""

    flag: str
    help: str | None = None  # ``%(default)s`` (or ``%(default)g``) there is the field's default
    type: Callable[[str], Any] = str
    choices: tuple | None = None
    metavar: str | None = None
    parse: Callable[[Any], Any] | None = None  # the command line's value -> the field's value
    switch_off: bool = False  # a flag without a value that sets the field to False
    minimum: float | None = None  # the value is a finite number >= minimum (None: no range) ...
    exclusive: bool = False  # ... or > minimum
    error: str | None = None  # the message when it is not (default "FLAG must be ...")

    def check(self, value) -> None:
        """Raise :class:`InputError` (naming the flag) for a value outside the range; None, the
        absent value, is always allowed."""
        if self.minimum is None or value is None:
            return
        above = self.minimum < value if self.exclusive else self.minimum <= value
        if not (above and value < math.inf):  # NaN is neither
            number = "a finite number " if self.type is float else ""
            relation = ">" if self.exclusive else ">="
            raise InputError(self.error
                             or f"{self.flag} must be {number}{relation} {self.minimum:g}")


def _option(default, flag: str, help: str | None = None, **option) -> Any:
    """A :class:`TrainConfig` field that is a command-line option (:class:`Option`); its value
    type is its default's unless given."""
    if "type" not in option and isinstance(default, (int, float)) and not isinstance(default, bool):
        option["type"] = type(default)
    return field(default=default, metadata={"option": Option(flag, help, **option)})


def _distributions(name: str) -> tuple[str, ...]:
    return PAPER_DISTRIBUTIONS if name == "all" else (name,)


def _teacher(name: str) -> str:
    return "" if name == "none" else name


#: The one message for an integer option out of range (the command has always given it whole).
_COUNTS_ERROR = ("--envs, --jobs, --steps, --dagger-episodes, --label-every, --rollout-futures, "
                 "--improve-futures, --improve-horizon and --warm-epochs must be "
                 ">= 1, --seed, --warm-episodes, --dagger-rounds and --improve-keep >= 0")
_TARGET_ERROR = ("--teacher-temperature must be a finite number > 0, and --regret-weight, "
                 "--rollout-significance, --rollout-terminal-weight, --improve-margin and "
                 "--improve-significance finite numbers >= 0")


@dataclass
class TrainConfig:
    """Settings of one training run (recorded in ``run.json``); the fields made with
    :func:`_option` are also ``pacopt train``'s options, their ranges checked here."""

    distributions: tuple[str, ...] = _option(
        PAPER_DISTRIBUTIONS, "--dist", "beta distribution of the training episodes (default: all "
        "four)", choices=(*PAPER_DISTRIBUTIONS, "all"), parse=_distributions)
    preset: str = _option("ddls", "--preset", choices=("ddls", "physical"))
    placement: str = _option(DEFAULT_PLACER, "--placement", "placer of the training episodes: "
                             "the agent decides each job's degree under it (default "
                             "%(default)s)", choices=tuple(PLACERS))
    trace: str | None = _option(
        None, "--trace", "train on windows of these ElasticFlow traces (format elasticflow; "
        "1001 jobs at load 0.5, drawn outside the windows docs/traces.md measures on) instead "
        "of the paper's workload; --dist does not apply", metavar="FILE[,FILE...]")
    cluster: str | None = _option(
        None, "--cluster", "train on this RAMP cluster at the paper's load per server (default "
        "the paper's 4x4x2; e.g. 8x8x4: 256 servers, jobs 8 times as often)",
        metavar="CxRxS")
    num_jobs: int = _option(1001, "--jobs", "jobs per training episode (default %(default)s; "
                            "validation plays episodes of the same length)", minimum=1,
                            error=_COUNTS_ERROR)
    minutes: float = _option(60.0, "--minutes", "wall-clock budget of this run (default "
                             "%(default)g)", minimum=0, exclusive=True)
    max_steps: int | None = _option(None, "--steps", "stop after this many environment steps",
                                    type=int, minimum=1, error=_COUNTS_ERROR)
    envs: int = _option(2, "--envs", "parallel environments (default %(default)s)", minimum=1,
                        error=_COUNTS_ERROR)
    subprocess: bool = True
    seed: int = _option(0, "--seed", minimum=0, error=_COUNTS_ERROR)
    teacher: str = _option(
        "tuned", "--teacher", "policy imitated by the warm start (default %(default)s): tuned, "
        "rollout (rollouts over tuned on sampled futures: about a minute per episode, "
        "stronger), rollout:POLICY (the same over another rule, e.g. rollout:min-feasible), "
        "improve (rollout in the first round; then, in each DAgger round, shorter rollouts "
        "over the policy being trained, which is fitted on to that round's labels: "
        "approximate policy iteration), improve:POLICY (the same from POLICY: every round's "
        "rollouts alike, e.g. improve:para-max), lookahead (rollout's forks on the episode's "
        "real future: hindsight), lookahead:POLICY (the same over another rule, e.g. "
        "lookahead:min-feasible on traces), any online heuristic, agent:PATH (a trained agent; "
        "{dist} in PATH becomes each distribution: distillation), or none", parse=_teacher)
    init: str | None = _option(None, "--init", "start from this checkpoint (fine-tuning): the "
                               "warm start, if --warm-episodes > 0 and a teacher is given, "
                               "imitates its teacher from these weights, then PPO",
                               metavar="CHECKPOINT")
    warm_episodes: int = _option(5, "--warm-episodes", "teacher episodes per distribution in the "
                                 "warm start (default %(default)s)", minimum=0,
                                 error=_COUNTS_ERROR)
    warm_epochs: int = _option(6, "--warm-epochs", "passes over the labelled states after each "
                               "round (default %(default)s; the rollout teacher's soft targets "
                               "want more, e.g. 32)", minimum=1, error=_COUNTS_ERROR)
    dagger_rounds: int = _option(1, "--dagger-rounds", "rounds in which the agent drives and the "
                                 "teacher labels the states it visits (default %(default)s)",
                                 minimum=0, error=_COUNTS_ERROR)
    label_every: int = _option(1, "--label-every", "in the DAgger rounds, the improve "
                               "teacher (whose forks call the network) labels every this many "
                               "states (default %(default)s; about 10 is worth it); the other "
                               "teachers label every state", minimum=1, error=_COUNTS_ERROR)
    rollout_futures: int = _option(SAMPLED_FUTURES, "--rollout-futures", "the rollout "
                                   "teacher's sampled job streams per labelled state (default "
                                   "%(default)s; more cost as much more time and average more "
                                   "of the rollouts' noise away)", minimum=1, error=_COUNTS_ERROR)
    rollout_significance: float = _option(
        0.0, "--rollout-significance", "standard errors of its gain over the base policy's "
        "degree (stream by stream) the rollout teacher takes off every other degree's score, "
        "as --improve-significance does for the improve teacher (default %(default)g: off)",
        minimum=0, error=_TARGET_ERROR)
    rollout_terminal_weight: float = _option(
        0.0, "--rollout-terminal-weight", "jobs per job's worth of worker-time (the mean "
        "sequential JCT of the episode's graphs) that the jobs running when a fork of the "
        "rollout or lookahead teacher ends still hold, taken off the fork's score: the beam "
        "search's future cost at the fork's end, which breaks the forks' ties towards the "
        "degree that leaves the cluster freer (default %(default)g: off)",
        minimum=0, error=_TARGET_ERROR)
    improve_futures: int = _option(IMPROVE_FUTURES, "--improve-futures", "the improve "
                                   "teacher's sampled job streams per labelled state (default "
                                   "%(default)s)", minimum=1, error=_COUNTS_ERROR)
    improve_horizon: int = _option(IMPROVE_HORIZON, "--improve-horizon", "arrivals each of "
                                   "its forks plays (default %(default)s)", minimum=1,
                                   error=_COUNTS_ERROR)
    improve_margin: float = _option(
        0.0, "--improve-margin", "jobs by which a degree's rollout score must beat the "
        "student's own degree before the improve teacher prefers it (default %(default)g: "
        "ties only; rollouts this short are noisy, and chasing their noise undoes a round)",
        minimum=0, error=_TARGET_ERROR)
    improve_significance: float = _option(
        0.0, "--improve-significance", "standard errors of its gain over the student's own "
        "degree (stream by stream) the improve teacher takes off every other degree's score, a "
        "lower confidence bound (default %(default)g: off; a guard that grows with the "
        "rollouts' noise, where --improve-margin is fixed)", minimum=0, error=_TARGET_ERROR)
    improve_keep: int = _option(1, "--improve-keep", "rounds of labels the improve teacher's "
                                "student is fitted to: the newest round's and the ones before "
                                "it, 0 for all (default %(default)s: the newest alone)",
                                minimum=0, error=_COUNTS_ERROR)
    improve_from: str = _option("last", "--improve-from", "which policy each round after the "
                                "first (policy iteration's, or DAgger's) goes on from: the "
                                "last round's (last) or the best validated so far (best: an "
                                "evaluation gate; a round that validates worse is set aside, "
                                "its labels kept) (default %(default)s)",
                                choices=("last", "best"))
    dagger_episodes: int = _option(2, "--dagger-episodes", "episodes per distribution in each "
                                   "DAgger round (default %(default)s)", minimum=1,
                                   error=_COUNTS_ERROR)
    teacher_temperature: float = _option(
        0.25, "--teacher-temperature", "jobs: a rollout score gap of this much makes the "
        "teacher's target e times likelier (default %(default)g)", minimum=0, exclusive=True,
        error=_TARGET_ERROR)
    regret_weight: float = _option(
        0.0, "--regret-weight", "weight of the agent's expected regret, in jobs, under the "
        "rollout teacher's scores (default %(default)g; 4 keeps rare costly mistakes out)",
        minimum=0, error=_TARGET_ERROR)
    spill: bool = _option(True, "--no-spill", "build the network without its spill features "
                          "(as checkpoints trained before they existed)", switch_off=True)
    degree_features: bool = _option(True, "--degree-table", "give the network a learned table "
                                    "of the degrees 0..16 instead of the degrees' features (as "
                                    "checkpoints trained before 2026-11-28; it then plays no "
                                    "cluster allowing other degrees)", switch_off=True)
    learning_rate: float = 1e-4
    n_steps: int = 512
    batch_size: int = 256
    n_epochs: int = 4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.1
    ent_coef: float = 0.001
    eval_every: int = 50_000
    validation_seeds: tuple[int, ...] = VALIDATION_SEEDS
    reward: str = "acceptance"
    torch_threads: int = 1  # small networks: one thread each beats threads fighting for 2 cores

    def __post_init__(self) -> None:
        for each in fields(self):
            if "option" in each.metadata:
                each.metadata["option"].check(getattr(self, each.name))
        check_placer(self.placement, self.preset, "--placement")
        self.teacher_spec()  # --teacher's syntax: one line now, not a traceback in a worker
        if self.trace and self.distributions != PAPER_DISTRIBUTIONS:
            raise InputError("--dist does not apply with --trace (each trace file is a family "
                             "of episodes of its own)")
        if self.cluster is not None:
            if self.trace:
                raise InputError("--cluster does not apply with --trace (a trace's cluster is "
                                 "its own)")
            parse_cluster(self.cluster)
        if self.trace and self.validation_seeds == VALIDATION_SEEDS:
            self.validation_seeds = TRACE_VALIDATION_SEEDS

    def teacher_spec(self) -> TeacherSpec | None:
        """``--teacher`` read into a :class:`~pacopt.learned.teacher.TeacherSpec` with the
        settings of its rollouts (None: no teacher, no warm start)."""
        if not self.teacher:
            return None
        return TeacherSpec.parse(
            self.teacher, preset=self.preset, placer=self.placement,
            temperature=self.teacher_temperature, label_every=self.label_every,
            rollout_streams=self.rollout_futures, rollout_significance=self.rollout_significance,
            rollout_terminal_weight=self.rollout_terminal_weight,
            improve_streams=self.improve_futures, improve_horizon=self.improve_horizon,
            improve_margin=self.improve_margin, improve_significance=self.improve_significance)

    def policy_kwargs(self) -> dict:
        """What :class:`~pacopt.learned.gnn.DegreePolicy` is built with."""
        return {"features_extractor_kwargs": {"spill": self.spill,
                                              "degree_features": self.degree_features}}

    @property
    def labels(self) -> tuple[str, ...]:
        """What the episodes are drawn over: the beta distributions, or the trace files'
        names (:class:`~pacopt.learned.env.TraceFamily`)."""
        if self.trace:
            return tuple(Path(f).stem for f in self.trace.split(","))
        return self.distributions

    def family(self, **kwargs) -> WorkloadFamily:
        if self.trace:
            return TraceFamily.from_files(self.trace.split(","), self.preset, self.placement,
                                          self.num_jobs, **kwargs)
        return WorkloadFamily.paper(self.distributions, self.preset, self.num_jobs,
                                    placement=self.placement,
                                    cluster=parse_cluster(self.cluster) if self.cluster else None,
                                    **kwargs)

    def env(self) -> PartitionEnv:
        """A training environment (rewards scaled by 1 - gamma: returns of about 1)."""
        return PartitionEnv(self.family(), self.reward, reward_scale=1.0 - self.gamma)


# ----- a run folder handed back: --resume -------------------------------------------------------
#: ``pacopt train --resume`` flags that may differ from the recorded run: its budget. Any other
#: setting is the run's own (``run.json``); a different one given is an error, not a silent change.
RESUME_OVERRIDES = ("minutes", "max_steps", "envs")
MAX_RUN_JSON_BYTES = 16 * 2**20


def read_run_state(out: Path) -> dict:
    """The state of the training run in folder ``out``, checked before it is resumed (one
    :class:`InputError` line naming the file and the problem): ``out`` is a folder holding
    ``latest.zip`` (a pac-ml checkpoint: :func:`pacopt.infra.checkpoint.check_checkpoint`) and
    ``run.json``, a JSON object with ``config`` (the run's settings, each a :class:`TrainConfig`
    field of its type), ``seconds`` (a number >= 0), ``best_score`` (null or a number) and
    optionally ``steps``, ``next_eval`` and ``rounds`` (counts), ``recipe`` (null or a name) and
    ``recipe_overrides`` (an object). ``latest.zip`` must be of the checkpoint format this pacopt
    reads (:func:`pacopt.learned.checkpoint_meta.check_format`)."""
    out = Path(out)
    if not out.is_dir():
        raise InputError(f"--resume: no checkpoint to resume in '{out}' (no such folder)")
    latest, record = out / "latest.zip", out / "run.json"
    if not latest.exists() or not record.exists():
        raise InputError(f"--resume: no checkpoint to resume in '{out}' (it needs latest.zip "
                         "and run.json)")
    check_agent_checkpoint(latest, "--resume checkpoint")
    where = f"--resume: '{record}'"
    if not record.is_file() or record.stat().st_size > MAX_RUN_JSON_BYTES:
        raise InputError(f"{where} is not a run state (not a small regular file)")
    try:
        state = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        reason = err.strerror if isinstance(err, OSError) else str(err).splitlines()[0][:120]
        raise InputError(f"{where} is not valid JSON ({reason})") from None
    if not isinstance(state, dict):
        raise InputError(f"{where} must hold a JSON object")
    for key, check, kind in (
            ("seconds", lambda v: _number(v) and v >= 0, "a number >= 0"),
            ("best_score", lambda v: v is None or _number(v), "null or a number"),
            ("steps", lambda v: _count(v), "an integer >= 0"),
            ("next_eval", lambda v: _count(v) and v >= 1, "an integer >= 1"),
            ("rounds", lambda v: _count(v), "an integer >= 0"),
            ("recipe", lambda v: v is None or isinstance(v, str), "null or a recipe name"),
            ("recipe_overrides", lambda v: isinstance(v, dict), "an object")):
        if key in state and not check(state[key]):
            raise InputError(f"{where}: {key} must be {kind}, got {json.dumps(state[key])[:40]}")
    for key in ("config", "seconds", "best_score"):
        if key not in state:
            raise InputError(f"{where} lacks '{key}': not the state of a pacopt training run")
    _recorded_fields(state["config"], where)
    return state


def resumed_config(state: dict, given: dict) -> TrainConfig:
    """The settings of a resumed run: the recorded ones (``state["config"]``), with the budget
    flags of :data:`RESUME_OVERRIDES` taken from ``given`` (the flags on the command line). A
    different value given for any other setting is an :class:`InputError`."""
    recorded = _recorded_fields(state["config"], "--resume: run.json")
    recorded.setdefault("degree_features", False)  # recorded before the field: the table
    options = {f.name: f.metadata["option"].flag for f in fields(TrainConfig)
               if "option" in f.metadata}
    for name, value in given.items():
        if name not in RESUME_OVERRIDES and name in recorded and recorded[name] != value:
            raise InputError(f"--resume continues the run as recorded: {options.get(name, name)} "
                             f"{_shown(value)} differs from its {_shown(recorded[name])} (only "
                             f"{', '.join(options[n] for n in RESUME_OVERRIDES)} may change; "
                             "--init starts a new run from a checkpoint)")
    settings = {**recorded, **{k: v for k, v in given.items() if k in RESUME_OVERRIDES}}
    return TrainConfig(**settings)


def recorded_overrides(settings, where: str) -> dict:
    """Settings recorded as JSON (a recipe run's ``overrides``, ``recipe.json``) as
    :class:`TrainConfig` keyword arguments, each checked as ``run.json``'s config is."""
    return _recorded_fields(settings, where)


def _recorded_fields(config, where: str) -> dict:
    """``run.json``'s ``config`` as :class:`TrainConfig` keyword arguments, each checked."""
    if not isinstance(config, dict):
        raise InputError(f"{where}: config must be an object")
    known = {f.name: f for f in fields(TrainConfig)}
    out = {}
    for name, value in config.items():
        if name not in known:
            raise InputError(f"{where}: config.{name} is not a setting of pacopt train")
        default = known[name].default
        if isinstance(default, tuple):
            ok = isinstance(value, list) and all(
                isinstance(v, type(default[0])) and not isinstance(v, bool) for v in value)
            value = tuple(value) if ok else value
        elif isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int) and not isinstance(default, bool):
            ok = _count(value)
        elif isinstance(default, float):
            ok = _number(value)
        elif isinstance(default, str):
            ok = isinstance(value, str)
        else:  # None defaults: max_steps (a count) and init (a path)
            ok = value is None or (_count(value) if name == "max_steps" else isinstance(value, str))
        if not ok:
            raise InputError(f"{where}: config.{name} has the wrong type "
                             f"({json.dumps(value)[:40]})")
        out[name] = value
    return out


def _number(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _shown(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
