"""The agent's network as play needs it, and a checkpoint's network exported once so that play
needs torch alone.

Playing a checkpoint takes its observation shapes, whether it scores degrees by their
features, and its degree logits for one observation (:class:`Player`). Loading the checkpoint
itself takes stable-baselines3 and torch-geometric, and torch-geometric's import (with
``torch._dynamo`` and its datasets) was most of ``pac-ml``'s start-up. So :func:`load_player`
keeps each checkpoint's network compiled by TorchScript
(:meth:`~pacopt.learned.gnn.DegreeScorer.play_module`) in the cache,
``$PACOPT_CACHE_DIR/agents/<key>.pt`` (:func:`~pacopt.cluster.timing_cache.cache_dir`), keyed by
the checkpoint's bytes, the network's source and the torch and torch-geometric versions, so an
export never outlives what it was made from. A miss loads the checkpoint with every check
(:func:`~pacopt.learned.agent.load_checkpoint`), compiles its network and writes the export
(where the cache can be written). A first run and a later one both play the compiled network,
so they decide alike.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Callable
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pacopt.cluster.timing_cache import cache_dir

#: Bump when what an export holds changes (its module's methods, its extra file's keys).
EXPORT_VERSION = 1
_EXTRA = "pacopt-player.json"
#: Exports kept in the cache; the oldest go first (each code version makes its own).
MAX_EXPORTS = 64
#: The code an export was compiled from (features.py: the degree scale the network holds).
_SOURCES = ("gnn.py", "features.py", "player.py")


class Player:
    """An agent network as play sees it: ``shapes`` (its observation's shapes, key -> tuple),
    ``degree_features`` (whether it scores any number of degrees, or a table of
    ``shapes["actions"][0]``), :meth:`logits` and :meth:`greedy`."""

    def __init__(self, shapes: dict[str, tuple[int, ...]], degree_features: bool,
                 logits: Callable[[dict[str, np.ndarray]], torch.Tensor], network=None):
        self.shapes = shapes
        self.degree_features = degree_features
        self.logits = logits
        self.network = network  # the policy in memory it plays, if any

    @classmethod
    def of_policy(cls, policy) -> Player:
        """Play a :class:`~pacopt.learned.gnn.DegreePolicy` in memory (a student being
        trained: it sees every update of its weights)."""
        extractor = policy.features_extractor
        return cls(space_shapes(policy.observation_space), extractor.degree_features,
                   extractor.play_logits, network=policy)

    def greedy(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        """The allowed degree of largest logit (how the agent plays)."""
        with torch.no_grad():
            return masked_argmax(self.logits(obs), mask)


def masked_argmax(logits: torch.Tensor, mask: np.ndarray) -> int:
    """The index of the largest of ``logits`` where ``mask`` allows."""
    allowed = torch.from_numpy(np.asarray(mask, dtype=bool))
    return int(torch.argmax(torch.where(allowed, logits, -torch.inf)))


class _Compiled:
    """The logits of a compiled network (:meth:`DegreeScorer.play_module`): each graph
    embedded once (by its signature), then the head, as the network in memory plays."""

    def __init__(self, module: torch.jit.ScriptModule):
        self.module = module
        self.embeddings: dict[tuple, torch.Tensor] = {}

    @torch.inference_mode()  # never trained: lighter than no_grad (no version counters)
    def __call__(self, obs: dict[str, np.ndarray]) -> torch.Tensor:
        key = tuple(obs["graph_sig"].tolist())
        embedding = self.embeddings.get(key)
        if embedding is None:
            sig = torch.from_numpy(obs["graph_sig"][None])
            embedding = self.embeddings[key] = self.module.embed(
                torch.from_numpy(obs["node_x"][None]), torch.from_numpy(obs["edge_index"][None]),
                torch.from_numpy(obs["edge_x"][None]), sig[:, 2:])[0]
        return self.module(embedding.unsqueeze(0), torch.from_numpy(obs["globals"][None]),
                           torch.from_numpy(obs["actions"][None]))[0, :len(obs["actions"])]


@lru_cache(maxsize=8)
def load_player(path: str, load: Callable[[str], Any]) -> Player:
    """The checkpoint at ``path`` (an absolute path, checked) ready to play, once per file and
    process: its export from the cache, or else loaded by ``load`` (a
    :class:`~pacopt.learned.gnn.DegreePolicy`, checked:
    :func:`~pacopt.learned.agent.load_checkpoint`), compiled and exported (module doc). A
    damaged or unreadable export is made again; a cache that cannot be written only costs the
    next run the slow load."""
    from pacopt.learned.checkpoint_meta import check_agent_checkpoint

    check_agent_checkpoint(path)  # the file as it is now: a missing or damaged one fails here
    file = cache_dir() / "agents" / f"{_key(path)}.pt"
    if file.is_file():
        try:
            extra = {_EXTRA: ""}
            module = _quietly(torch.jit.load, str(file), map_location="cpu", _extra_files=extra)
            info = json.loads(extra[_EXTRA])
            shapes = {k: tuple(v) for k, v in info["shapes"].items()}
            return Player(shapes, bool(info["degree_features"]), _Compiled(module))
        except (RuntimeError, OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # made again below (AttributeError: a torch without TorchScript)
    policy = load(path)
    try:
        module = _quietly(policy.features_extractor.play_module)
    except (AttributeError, RuntimeError):  # a torch without TorchScript: play it in memory
        return Player.of_policy(policy)
    shapes = space_shapes(policy.observation_space)
    degree_features = policy.features_extractor.degree_features
    _save(module, file, {"shapes": shapes, "degree_features": degree_features,
                         "checkpoint": path})
    return Player(shapes, degree_features, _Compiled(module))


def _quietly(call: Callable, *args, **kwargs):
    """``call`` without the DeprecationWarning torch 2.13 gives every TorchScript entry
    point, in favour of ``torch.export``. The export is kept: ``torch.export``'s programs need
    their shapes declared in advance, the graph encoder's loop over graphs depends on the
    data, and its module ran slower than eager mode for the network's head
    (``docs/experiments.md``). Where TorchScript is gone, play falls back to the network in
    memory."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return call(*args, **kwargs)


def space_shapes(space) -> dict[str, tuple[int, ...]]:
    """A dict observation space's shapes, key -> tuple."""
    return {k: tuple(v.shape) for k, v in space.spaces.items()}


def _key(path: str) -> str:
    """What an export depends on, hashed: the checkpoint's bytes, the code that compiles and
    plays it, and the libraries that run it."""
    digest = hashlib.sha256()
    digest.update(Path(path).read_bytes())
    here = Path(__file__).resolve().parent
    for source in _SOURCES:
        digest.update((here / source).read_bytes())
    versions = [str(EXPORT_VERSION), torch.__version__, _version("torch_geometric")]
    digest.update("\0".join(versions).encode())
    return digest.hexdigest()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def _save(module: torch.jit.ScriptModule, file: Path, info: dict) -> None:
    """Write the export whole or not at all (another process may be reading the cache), and
    leave at most :data:`MAX_EXPORTS` in the cache."""
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=file.parent, suffix=".tmp")
        os.close(fd)
        try:
            _quietly(torch.jit.save, module, tmp, _extra_files={_EXTRA: json.dumps(info)})
            os.replace(tmp, file)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        exports = sorted(file.parent.glob("*.pt"), key=lambda f: f.stat().st_mtime)
        for old in exports[:-MAX_EXPORTS]:
            old.unlink(missing_ok=True)
    except (OSError, RuntimeError):
        pass  # a read-only cache: this run plays the compiled module all the same
