"""The trained agent as a pacopt ``Policy`` (``solve --method pac-ml``), and its checkpoints.

A checkpoint is a MaskablePPO ``.zip`` saved by :mod:`pacopt.learned.train`. The package ships
``checkpoints/general-<preset>.zip`` (trained across the four beta distributions; beta is in the
observation) and, where they beat it on held-out seeds, per-distribution fine-tunes
``checkpoints/<A|B|C|D>-<preset>.zip``; see ``checkpoints/README.md`` for how each was trained and
how it scored. The agent plays deterministically: the most likely degree under the live mask.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch
from gymnasium import spaces

from pacopt.cluster.instance import Instance
from pacopt.cluster.policies import Decision, instance_distribution
from pacopt.infra.checkpoint import load_checked
from pacopt.infra.errors import InputError
from pacopt.learned.features import Observer
from pacopt.learned.gnn import greedy_degree

CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"


def default_checkpoint(preset: str = "ddls", distribution: str | None = None) -> Path:
    """The shipped checkpoint for ``preset``: the fine-tune of ``distribution`` if one is shipped,
    else the general agent."""
    if distribution is not None:
        tuned = CHECKPOINT_DIR / f"{distribution}-{preset}.zip"
        if tuned.is_file():
            return tuned
    path = CHECKPOINT_DIR / f"general-{preset}.zip"
    if not path.is_file():
        raise InputError(f"no shipped pac-ml checkpoint for preset '{preset}' ({path.name}); "
                         "train one with `pacopt train` and pass --checkpoint")
    return path


@lru_cache(maxsize=8)
def load_checkpoint(path: str):
    """Load a MaskablePPO checkpoint's policy (cached). The file is checked first
    (:func:`pacopt.infra.checkpoint.check_checkpoint`: a zip with sb3's members, sound CRCs, a
    :class:`~pacopt.learned.gnn.DegreePolicy`), and its spaces after loading (a dict observation,
    a discrete action); anything wrong is an :class:`InputError` naming the file."""
    from sb3_contrib import MaskablePPO

    model = load_checked(path, lambda file: MaskablePPO.load(file, device="cpu"),
                         "checkpoint", policy="pacopt.learned.gnn:DegreePolicy",
                         kind="pacopt agent checkpoint")
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
    """The registry's factory of ``pac-ml`` (see :mod:`pacopt.solvers.registry`)."""
    return LearnedPolicy(instance, checkpoint)


class LearnedPolicy:
    """The PAC-ML-style agent: a GNN policy choosing each arriving job's degree."""

    name = "pac-ml"

    def __init__(self, instance: Instance | None = None, checkpoint: str | Path | None = None):
        """``checkpoint`` defaults to the shipped one for the instance's preset (a
        per-distribution fine-tune when one is shipped for the instance's beta distribution).
        A checkpoint that cannot play ``instance`` (other degrees) is an :class:`InputError`
        here, before any episode starts."""
        if checkpoint:
            path = Path(checkpoint)
        else:
            preset = instance.model.preset if instance is not None else "ddls"
            path = default_checkpoint(preset, instance_distribution(instance))
        self.checkpoint = str(path)
        self.name = f"pac-ml({path.name})"  # the result records which checkpoint played
        self.policy = load_checkpoint(str(path.resolve()))
        # the network is tiny and sees one job at a time: extra torch threads only spin
        torch.set_num_threads(1)
        self._observers: dict[tuple, Observer] = {}
        if instance is not None:
            self._observer_for(instance.cluster, instance.model)

    def reset(self, seed: int | None) -> None:
        """A new episode: forget the arrivals seen (the agent itself is deterministic)."""
        for observer in self._observers.values():
            observer.reset()

    def _observer_for(self, cluster, settings) -> Observer:
        key = (cluster, settings)
        if key not in self._observers:
            observer = Observer(*key)
            expected = self.policy.observation_space["actions"].shape
            if observer.observation_space()["actions"].shape != expected:
                raise InputError(f"checkpoint '{self.checkpoint}' was trained for degrees "
                                 f"0..{expected[0] - 1}; this instance allows "
                                 f"0..{observer.num_actions - 1}")
            mine = {k: v.shape for k, v in observer.observation_space().spaces.items()}
            theirs = {k: v.shape for k, v in self.policy.observation_space.spaces.items()}
            if mine != theirs:
                differ = sorted(k for k in mine.keys() | theirs.keys()
                                if mine.get(k) != theirs.get(k))
                raise InputError(f"checkpoint '{self.checkpoint}' was trained on other "
                                 f"observations than this instance gives (differing: "
                                 f"{', '.join(differ[:4])}); train one for this cluster")
            self._observers[key] = observer
        return self._observers[key]

    def choose(self, decision: Decision) -> int:
        observer = self._observer_for(decision.state.cluster, decision.model.settings)
        observer.note(decision)
        mask = decision.worthwhile_mask()
        if mask.sum() == 1:
            return 0  # nothing but reject is worth choosing: skip the network
        return greedy_degree(self.policy, observer.observe(decision), mask)
