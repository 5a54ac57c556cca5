"""The trained agent as a pacopt ``Policy`` (``solve --method pac-ml``), and its checkpoints.

A checkpoint is a MaskablePPO ``.zip`` saved by :mod:`pacopt.learned.train`. The package ships
``checkpoints/general-<preset>.zip`` (trained across the four beta distributions; beta is in the
observation), ``checkpoints/trace-ddls.zip`` (trained on windows of the ITP traces),
per-distribution fine-tunes ``checkpoints/<A|B|C|D>-<preset>.zip`` where they
validate lower than it on their distribution, and agents trained under a placer other than
first fit, ``checkpoints/<name>-<preset>-<placer>.zip`` (``general-ddls-best-fit`` and its
beta-B fine-tune ``B-ddls-best-fit``, ``general-physical-compact``); a preset and placer no
agent was trained for is played by the one chosen for it on the validation seeds
(:data:`STAND_INS`). ``checkpoints/README.md`` says how each was trained, how it scored and
how it was chosen. The agent plays deterministically: the most likely degree under the live
mask, through each checkpoint's network compiled once into the cache
(:mod:`pacopt.learned.player`: a later process plays it without importing torch-geometric, and
on graphs the cache has seen without importing torch). A shipped checkpoint plays from its
shipped export, with no torch at all on the graphs it embeds (the bundled examples, the paper's
and the traces' PipeDream graphs): the core install plays it; another graph needs the
``learned`` extra (:func:`check_embedded`).

``pac-ml`` is online: at each arrival it plays the fine-tune of the distribution the betas
arrived so far look like (:class:`~pacopt.online.recognise.BetaRecogniser`), the general agent
before the first guess, where no fine-tune is shipped and on a cluster other than the one the
fine-tune was trained and chosen on; a job replayed from a trace (it carries its user's
requested degree) is played by the trace fine-tune ``trace-<preset>[-<placer>].zip`` (or the
one that stands in for the setting: :data:`TRACE_STAND_INS`), on the cluster it was trained on.
On another cluster shape the agent of the shape nearest it, if nearer than the paper's 4x4x2,
plays the paper's distributions (``<C>x<R>x<S>-<preset>[-<placer>].zip``,
:func:`shape_fine_tune`; shipped: ``8x8x4-ddls-best-fit.zip``).
``pac-ml-given-label`` is the former rule, an oracle: it picks one checkpoint from *every* job's
beta, future jobs included (the trace fine-tune when every job is a trace's).
"""

from __future__ import annotations

import copy
import math
import re
from functools import lru_cache
from pathlib import Path

from gymnasium import spaces

from pacopt.infra.checkpoint import load_checked
from pacopt.infra.errors import InputError, warn
from pacopt.infra.extras import MissingExtra, available, require
from pacopt.learned.checkpoint_meta import (
    AGENT_KIND,
    AGENT_POLICY,
    CHECKPOINT_DIR,
    check_agent_checkpoint,
    read_metadata,
    summary,
)
from pacopt.learned.features import Observer
from pacopt.learned.player import Player, load_player, space_shapes
from pacopt.model.decision import Decision
from pacopt.model.instance import Instance
from pacopt.model.paper_workload import PAPER_DISTRIBUTIONS, parse_cluster
from pacopt.model.placers import DEFAULT_PLACER
from pacopt.model.topology import RampCluster
from pacopt.online.recognise import BetaRecogniser, instance_distribution

_IN_MEMORY = "network-in-memory"  # the path shown for a network handed over in memory


#: The shipped agent that plays a preset and placer no shipped agent was trained for, chosen
#: on the validation seeds 9000-9007 over the other shipped agents, below that placer's
#: ``tuned`` there (``checkpoints/README.md``, "Every placer"): under ``physical``, best fit
#: is played by the compact agent.
STAND_INS: dict[tuple[str, str], str] = {("physical", "best-fit"): "general-physical-compact.zip"}

#: The name of the fine-tune for jobs replayed from cluster traces (``trace-<preset>.zip``): it
#: plays every job that carries its user's requested degree (:attr:`Decision.requested_degree`).
TRACE = "trace"

#: The trace agent of a preset and placer no trace agent was trained for, chosen on the trace
#: validation windows over the other shipped agents (``docs/traces.md``): the preset's own
#: (under ``physical`` the compact one), else :data:`TRACE_STAND_IN`, the first-fit ddls one.
#: The general agents, trained on the paper's workload, block far more on trace jobs.
TRACE_STAND_IN = "trace-ddls.zip"
TRACE_STAND_INS: dict[str, str] = {"ddls": TRACE_STAND_IN,
                                   "physical": "trace-physical-compact.zip"}


def default_checkpoint(preset: str = "ddls", distribution: str | None = None,
                       placer: str = DEFAULT_PLACER,
                       cluster: tuple[int, int, int] | None = None) -> Path:
    """The shipped checkpoint for ``preset`` and ``placer``: the fine-tune of ``distribution`` if
    one is shipped, else the general agent; those trained under ``placer`` first
    (``<name>-<preset>-<placer>.zip``, or ``<name>-<preset>.zip`` for first fit), then the
    stand-in chosen for it (:data:`STAND_INS`), then the first-fit ones (their observations
    are the placer's own, so they play under any placer). For :data:`TRACE` the trace agents
    stand in before any general agent (:data:`TRACE_STAND_INS`, :data:`TRACE_STAND_IN`): a
    trace's jobs differ from the paper's more than one placer or preset from another. On a
    ``cluster`` (groups, racks, servers per rack) other than the paper's, a cluster shape's
    agent (:func:`shape_fine_tune`) plays the paper's distributions before any other: the
    others were chosen on the paper's cluster."""
    names = ([] if distribution is None else [distribution]) + ["general"]
    own = f"-{placer}" if placer != DEFAULT_PLACER else ""
    shape = shape_fine_tune(preset, own, cluster) if distribution != TRACE else None
    if shape is not None:
        names.insert(0, shape)
    files = [f"{name}-{preset}{own}.zip" for name in names]
    if distribution == TRACE:
        files[1:1] = [TRACE_STAND_INS.get(preset, TRACE_STAND_IN), TRACE_STAND_IN]
    files += [STAND_INS[preset, placer]] if (preset, placer) in STAND_INS else []
    files += [f"{name}-{preset}.zip" for name in names] if own else []
    for file in files:
        path = CHECKPOINT_DIR / file
        if path.is_file():
            return path
    others = sorted(p.stem.removeprefix(f"general-{preset}-")
                    for p in CHECKPOINT_DIR.glob(f"general-{preset}-*.zip"))
    where = (f" under placer '{placer}' (shipped for --placement {', '.join(others)})"
             if others else f" (general-{preset}.zip)")
    raise InputError(f"no shipped pac-ml checkpoint for preset '{preset}'{where}; train one with "
                     "`pacopt train` and pass --checkpoint")


def shape_fine_tune(preset: str, own: str, cluster: tuple[int, int, int] | None) -> str | None:
    """The name (``<C>x<R>x<S>``) of the shipped fine-tune ``<C>x<R>x<S>-<preset><own>.zip``
    trained on the cluster shape nearest ``cluster`` by server count (a ratio: 1024 servers are
    nearer 256 than 32), or None where the paper's 4x4x2 is as near (its agents play there).
    Chosen on validation seeds: on 16x16x4 the 8x8x4 agent blocks less than the 4x4x2 one
    (``docs/scale.md``)."""
    if cluster is None:
        return None
    servers = math.prod(cluster)

    def distance(shape) -> float:  # of server counts, as a ratio
        return abs(math.log(math.prod(shape) / servers))

    pattern = re.compile(rf"(\d+)x(\d+)x(\d+)-{re.escape(preset + own)}")
    shapes = [tuple(int(n) for n in match.groups()) for path in CHECKPOINT_DIR.glob("*.zip")
              if (match := pattern.fullmatch(path.stem))]
    best = min(shapes, key=distance, default=None)
    if best is None or distance(best) >= distance(RampCluster().dims):
        return None
    return "x".join(map(str, best))


@lru_cache(maxsize=8)
def load_checkpoint(path: str):
    """Load a MaskablePPO checkpoint's policy (cached). The file is checked first
    (:func:`pacopt.infra.checkpoint.check_checkpoint`: a zip with sb3's members, sound CRCs, a
    :class:`~pacopt.learned.gnn.DegreePolicy`), then its checkpoint format, when its metadata
    gives one (:func:`~pacopt.learned.checkpoint_meta.check_format`: another format is one line
    naming the file, both formats and the recipe that rebuilds it; another code version of the
    same format loads), and its spaces after loading (a dict observation, a discrete action);
    anything wrong is an :class:`InputError` naming the file."""
    MaskablePPO = require("learned", "sb3_contrib",
                          f"pac-ml with checkpoint '{Path(path).name}' (no shipped export)"
                          ).MaskablePPO

    check_agent_checkpoint(path)  # before loading: another layout fails deep in torch
    model = load_checked(path, lambda file: MaskablePPO.load(file, device="cpu"),
                         "checkpoint", policy=AGENT_POLICY, kind=AGENT_KIND)
    policy = model.policy
    observation, action = policy.observation_space, policy.action_space
    if not (isinstance(observation, spaces.Dict) and "actions" in observation.spaces
            and isinstance(action, spaces.Discrete)):
        raise InputError(f"checkpoint '{path}' is not a pacopt agent checkpoint: its spaces "
                         f"are {type(observation).__name__} and {type(action).__name__}")
    policy.set_training_mode(False)
    return policy


def learned_policy(method: str, instance: Instance,
                   checkpoint: str | Path | None = None) -> LearnedPolicy:
    """The registry's factory of ``pac-ml`` and ``pac-ml-given-label`` (see
    :mod:`pacopt.solvers.registry`)."""
    return LearnedPolicy(instance, checkpoint, given_label=method == "pac-ml-given-label")


class LearnedPolicy:
    """The PAC-ML-style agent: a GNN policy choosing each arriving job's degree."""

    name = "pac-ml"

    def __init__(self, instance: Instance | None = None, checkpoint: str | Path | None = None,
                 given_label: bool = False, network=None):
        """``checkpoint`` plays that one checkpoint throughout. By default the shipped ones for
        the instance's preset: online, per decision the fine-tune of the beta distribution the
        arrivals so far look like (:class:`~pacopt.online.recognise.BetaRecogniser`), else the
        general agent, and the trace fine-tune (:data:`TRACE`) for a job with a requested
        degree; with ``given_label`` (``pac-ml-given-label``, not online) the one checkpoint
        :func:`default_checkpoint` picks for the distribution of *all* the instance's betas,
        future jobs included, or for :data:`TRACE` if every job has a requested degree.
        ``network`` (a :class:`~pacopt.learned.gnn.DegreePolicy` in memory, e.g. a student being
        trained) plays that network throughout. A checkpoint that cannot play ``instance``
        (other degrees) is an :class:`InputError` here, before any episode starts."""
        self.recogniser: BetaRecogniser | None = None
        if network is not None:
            paths = {None: Path(_IN_MEMORY)}
        elif checkpoint:
            paths = {None: Path(checkpoint)}
        else:
            preset, placer, dims = ((instance.model.preset, instance.model.placement,
                                     instance.cluster.dims) if instance is not None
                                    else ("ddls", DEFAULT_PLACER, None))
            if given_label:
                label = (TRACE if instance is not None and instance.jobs
                         and all(job.requested_degree is not None for job in instance.jobs)
                         else instance_distribution(instance))
                paths = {None: default_checkpoint(preset, label, placer, dims)}
            else:  # None: before the first guess
                paths = {dist: default_checkpoint(preset, dist, placer, dims)
                         for dist in (None, *PAPER_DISTRIBUTIONS, TRACE)}
                self.recogniser = BetaRecogniser()
        self._label = "pac-ml-given-label" if given_label and not checkpoint else "pac-ml"
        # each file loaded once (load_player caches), shared by the distributions using it
        self.players = ({None: Player.of_policy(network)} if network is not None else
                        {dist: load_player(str(path.resolve()), load_checkpoint)
                         for dist, path in paths.items()})
        self.paths = {dist: str(path) for dist, path in paths.items()}
        self.checkpoint = self.paths[None]  # the one played before any guess
        self.player = self.players[None]
        self.name = self._name(self.checkpoint)  # the result records which checkpoint played
        self.played: dict[str, None] = {}  # the checkpoints that decided jobs this episode
        self._observers: dict[tuple, Observer] = {}
        # per observer: the distributions whose fine-tunes do not play there
        self._left_to_general: dict[tuple, set[str]] = {}
        self._trace_warned: set[tuple] = set()  # the observers whose trace jobs it warned of
        if instance is not None:
            self._observer_for(instance.cluster, instance.model)
            check_embedded(self, instance)

    def _name(self, path: str) -> str:
        online = "online: " if self.recogniser is not None else ""
        return f"{self._label}({online}{Path(path).name})"

    def fork(self) -> LearnedPolicy:
        """A copy that goes on from what this one has seen without changing it: a rollout's
        what-if fork (:class:`~pacopt.online.rollout.Rollout`) plays it. The networks are
        shared; the recogniser too (it forgets what a fork noted when the real episode goes
        on)."""
        other = copy.copy(self)
        other._observers = {key: observer.fork() for key, observer in self._observers.items()}
        other.played = dict(self.played)
        return other

    def reset(self, seed: int | None) -> None:
        """A new episode: forget the arrivals seen (the agent itself is deterministic)."""
        for observer in self._observers.values():
            observer.reset()
        self.played = {}
        if self.recogniser is not None:
            self.recogniser.reset()
            self.checkpoint, self.player = self.paths[None], self.players[None]
            self.name = self._name(self.checkpoint)

    def _observer_for(self, cluster, settings) -> Observer:
        """The observer of ``(cluster, settings)``: one for every checkpoint (observations do
        not depend on the network), so it is fed every arrival whichever checkpoint plays;
        checked against each checkpoint's spaces when made. Online with the shipped files, a
        fine-tune trained on another cluster (or that cannot play this one: a table of other
        degrees) leaves its distribution to the general agent, with a warning; any other misfit
        is an :class:`InputError`."""
        key = (cluster, settings)
        if key not in self._observers:
            observer = Observer(*key)
            general = _misfit(observer, self.players[None], self.paths[None])
            left_out: set[str] = set()
            for dist, player in self.players.items():
                problem = general if dist is None else _misfit(observer, player, self.paths[dist])
                if problem is None:
                    # a shipped fine-tune was chosen on validation episodes of its own cluster
                    if (self.recogniser is not None and self.paths[dist] != self.paths[None]
                            and not _trained_for(observer, player, self.paths[dist], cluster)):
                        left_out.add(dist)
                    continue
                if dist is None or self.recogniser is None or general is not None:
                    raise InputError(problem)
                left_out.add(dist)
            shown = sorted(left_out - {TRACE})  # the trace agent's, at its first trace job
            if shown:
                many = len(shown) > 1
                warn(f"the shipped fine-tune{'s' * many} of {', '.join(shown)} "
                     f"{'were' if many else 'was'} not trained for this cluster; "
                     f"{Path(self.paths[None]).name} plays "
                     f"{'those distributions' if many else 'that distribution'} here")
            self._observers[key] = observer
            self._left_to_general[key] = left_out
        return self._observers[key]

    def choose(self, decision: Decision) -> int:
        key = (decision.state.cluster, decision.model.settings)
        observer = self._observer_for(*key)
        observer.note(decision)
        if self.recogniser is not None:
            self.recogniser.note(decision.job_index, decision.max_jct_fraction)
            # a job replayed from a trace says so itself (its user's requested degree)
            guess = TRACE if decision.requested_degree is not None else self.recogniser.guess
            if guess in self._left_to_general[key]:
                if guess == TRACE and key not in self._trace_warned:
                    self._trace_warned.add(key)
                    warn(f"the shipped trace agent {Path(self.paths[TRACE]).name} was not "
                         f"trained for this cluster; {Path(self.paths[None]).name} plays the "
                         "trace's jobs here")
                guess = None  # its fine-tune is not for this cluster: the general agent plays
            self.checkpoint, self.player = self.paths[guess], self.players[guess]
            self.name = self._name(self.checkpoint)
        self.played[self.checkpoint] = None
        mask = decision.worthwhile_mask()
        if mask.sum() == 1:
            return 0  # nothing but reject is worth choosing: skip the network
        return self.player.greedy(observer.observe(decision), mask)

    def result_metrics(self) -> dict:
        """What the episode's result records of the agent (the simulator adds it to
        ``metrics``): ``checkpoints``, each checkpoint file that decided a job this episode ->
        its metadata without the settings (:func:`~pacopt.learned.checkpoint_meta.summary`:
        format, code version, recipe, seeds, rounds, steps, validation score, time), null for
        a file written before checkpoints had metadata."""
        return {"checkpoints": {Path(path).name: _summary(path)
                                for path in self.played if path != _IN_MEMORY}}


def check_embedded(agent: LearnedPolicy, instance: Instance) -> None:
    """Without torch, a :class:`~pacopt.infra.extras.MissingExtra` (the ``learned`` extra) for
    the first of ``instance``'s job graphs that one of ``agent``'s checkpoints has no embedding
    of (shipped or in the cache): it could not play that graph. Checked before any episode, so
    that the exact methods' warm start leaves the agent out; with torch, nothing to check."""
    if available("torch"):
        return
    observer = agent._observer_for(instance.cluster, instance.model)
    for name in dict.fromkeys(job.graph for job in instance.jobs):
        g = observer.graph(instance.graphs[name])
        for path, player in zip(agent.paths.values(), agent.players.values()):
            if player.network is None and not player.embeds(g.node_x, g.edge_index, g.edge_x,
                                                            g.sig):
                raise MissingExtra(f"pac-ml on graph '{name}' (not embedded by "
                                   f"{Path(path).name}'s export)", "learned", "torch")


def _misfit(observer: Observer, player: Player, path: str) -> str | None:
    """Why ``player`` (the checkpoint at ``path``) cannot play what ``observer`` observes, in
    one line; None when it can."""
    mine = _shapes(space_shapes(observer.observation_space()), player)
    theirs = _shapes(player.shapes, player)
    expected = player.shapes["actions"]
    if mine["actions"] != theirs["actions"] and mine["actions"][-1:] == theirs["actions"][-1:]:
        return (f"checkpoint '{path}' was trained for degrees 0..{expected[0] - 1}; this "
                f"instance allows 0..{observer.num_actions - 1} (a checkpoint with degree "
                "features plays any; this one has a table)")
    if mine != theirs:
        differ = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        return (f"checkpoint '{path}' was trained on other observations than this instance "
                f"gives (differing: {', '.join(differ[:4])}); train one for this cluster")
    return None


def _shapes(shapes: dict[str, tuple[int, ...]], player: Player) -> dict:
    """An observation's shapes as ``player`` needs them: with degree features any number of
    degrees (rows of ``actions``) will do, so only the row's length counts."""
    shapes = dict(shapes)
    if player.degree_features:
        shapes["actions"] = shapes["actions"][1:]
    return shapes


def _trained_for(observer: Observer, player: Player, path: str, cluster) -> bool:
    """Whether the checkpoint at ``path`` was trained on ``cluster``'s RAMP shape with the
    degrees ``observer`` offers (a network with degree features plays others too)."""
    return (_trained_shape(path) == cluster.dims
            and player.shapes["actions"][0] == observer.num_actions)


def _trained_shape(path: str) -> tuple[int, int, int]:
    """The RAMP shape (groups, racks per group, servers per rack) the checkpoint at ``path``
    was trained on, from its metadata (``--cluster``; the paper's 4x4x2 when not given, and
    for a file written before checkpoints had metadata)."""
    config = (_metadata(path) or {}).get("config") or {}
    if config.get("cluster"):
        return parse_cluster(config["cluster"])
    return RampCluster().dims


@lru_cache(maxsize=8)
def _metadata(path: str) -> dict | None:
    """A checkpoint's metadata, read once per file (as the checkpoint is loaded once:
    :func:`load_checkpoint`)."""
    return read_metadata(path)


def _summary(path: str) -> dict | None:
    """A checkpoint's metadata as results record it."""
    return summary(_metadata(path))
