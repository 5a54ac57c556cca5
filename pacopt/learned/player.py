"""The agent's network as play needs it: a checkpoint's network exported once, so that play
needs neither torch-geometric nor, mostly, torch.

Playing a checkpoint takes its observation shapes, whether it scores degrees by their
features, and its degree logits for one observation (:class:`Player`). Loading the checkpoint
itself takes stable-baselines3 and torch-geometric, whose import was most of ``pac-ml``'s
start-up; importing torch alone is most of what remained. So :func:`load_player` keeps in the
cache, ``$PACOPT_CACHE_DIR/agents/`` (:func:`~pacopt.model.timing_cache.cache_dir`), keyed by
the checkpoint's bytes, the network's source and the torch and torch-geometric versions (so an
export never outlives what it was made from):
- ``<key>.pt``: the network compiled by TorchScript
  (:meth:`~pacopt.learned.gnn.DegreeScorer.play_module`), which runs with torch alone;
- ``<key>.npz``: the layers after the graph embedding (the head) as numpy arrays, which play
  runs without torch (:class:`NumpyHead`);
- ``<key>.graphs.npz``: the embedding of each job graph met so far, computed by the compiled
  network.

A later process playing graphs the cache has seen imports no torch at all. The numpy head's
logits are torch's up to float32 rounding, far below :data:`TIE_MARGIN`, so where the two best
allowed logits are further apart than that play decides as the compiled network and the
network in memory do. A near tie (closer than that) is decided by the head once more in
float64: the choice of the network's exact logits (its float32 weights and inputs, rounded
some 10^9 times more finely), the same with and without torch and whatever a machine's
summation order. A graph not yet embedded is embedded by the compiled network. A miss loads the checkpoint with every check
(:func:`~pacopt.learned.agent.load_checkpoint`), compiles its network and writes the export
(where the cache can be written).

A shipped checkpoint's export ships beside it (``<name>.play.npz``, package data written by
``python -m tools.export_agents``: :func:`write_shipped_export`): its numpy head, the
embeddings of the graphs it is run on (:data:`SHIPPED_GRAPHS`) and its compiled network with
the torch and torch-geometric versions that compiled it, made from the checkpoint whose digest
it records. Play reads it first, with or without torch, so the core install (no torch,
``pacopt[learned]`` not installed) plays the shipped agents on those graphs, deciding as the
full install does. Without torch a graph the export does not embed is a
:class:`~pacopt.infra.extras.MissingExtra` naming the ``learned`` extra; with torch the compiled
network embeds it: the shipped one where the versions are today's (so a first run with an
empty cache loads no checkpoint), else the cache's, as above.
"""

from __future__ import annotations

import hashlib
import io
import json
import warnings
import zipfile
from collections.abc import Callable
from functools import cached_property, lru_cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pacopt.infra.errors import InputError
from pacopt.infra.extras import require
from pacopt.infra.safe_write import write_atomically
from pacopt.model.timing_cache import cache_dir

if TYPE_CHECKING:
    import torch

#: Bump when what an export holds changes (its module's methods, its files' keys).
EXPORT_VERSION = 2
_EXTRA = "pacopt-player.json"
#: Exports kept in the cache; the oldest go first (each code version makes its own).
MAX_EXPORTS = 64
#: The code an export was compiled from (features.py: the degree scale the network holds).
_SOURCES = ("gnn.py", "features.py", "player.py")
#: The numpy head's float32 logits decide when the two best allowed logits are further apart
#: than this times the sum of their rounding scales (:meth:`NumpyHead.scored`), else its
#: float64 logits (a near tie, :meth:`NumpyHead.greedy`). Its float32 logits and torch's
#: differ only in float32 rounding (other summation orders), by a small multiple of that scale
#: times float32's precision (6e-8); a different choice needs a gap below twice the difference.
#: This is many times the largest difference measured (``docs/experiments.md``), and
#: ``tests/test_player.py`` holds the difference below a quarter of it.
TIE_MARGIN = 2e-9
#: Degrees whose rows the numpy head holds for a network scoring degrees by their features
#: (0 = reject and 1..1024; a cluster allowing more is played by the compiled network).
HEAD_DEGREES = 1025
#: A checkpoint's shipped export, beside it: ``<checkpoint's stem>`` + this.
SHIPPED_SUFFIX = ".play.npz"
#: The graphs a shipped export embeds: the bundled examples (``examples/graphs``) and the
#: PipeDream profiles of the paper's workload and of the traces' default graphs.
SHIPPED_GRAPHS = ("cnn", "resnet", "transformer", "bert", "gpt2", "deepspeech2", "alexnet",
                  "vgg16", "resnet18", "squeezenet1_0", "gnmt", "resnet50", "inception_v3")
_UNEMBEDDED = "pac-ml on a graph the shipped agents' exports do not embed"
_COMPILED = "pac-ml's compiled network (more than 1024 degrees)"


def torch_for_play(what: str = "pac-ml without a shipped export"):
    """torch, imported on first need (play from the cache mostly needs none), with one
    thread: the network is tiny and sees one job at a time, extra threads only spin. Without
    torch, a :class:`~pacopt.infra.extras.MissingExtra`: ``what`` needs the learned extra."""
    torch = require("learned", "torch", what)
    torch.set_num_threads(1)
    return torch


class Player:
    """An agent network as play sees it: ``shapes`` (its observation's shapes, key -> tuple),
    ``degree_features`` (whether it scores any number of degrees, or a table of
    ``shapes["actions"][0]``), :meth:`logits` (torch's) and :meth:`greedy`. ``head``: the
    numpy head that decides most of an export's moves without torch (:class:`NumpyHead`)."""

    def __init__(self, shapes: dict[str, tuple[int, ...]], degree_features: bool,
                 logits: Callable[[dict[str, np.ndarray]], torch.Tensor], network=None,
                 head: NumpyHead | None = None):
        self.shapes = shapes
        self.degree_features = degree_features
        self.logits = logits
        self.network = network  # the policy in memory it plays, if any
        self.head = head

    @classmethod
    def of_policy(cls, policy) -> Player:
        """Play a :class:`~pacopt.learned.gnn.DegreePolicy` in memory (a student being
        trained: it sees every update of its weights)."""
        torch_for_play()
        extractor = policy.features_extractor
        return cls(space_shapes(policy.observation_space), extractor.degree_features,
                   extractor.play_logits, network=policy)

    def greedy(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        """The allowed degree of largest logit (how the agent plays): the numpy head's where it
        scores the observation (:meth:`NumpyHead.greedy`), else the compiled network's."""
        if self.head is not None:
            degree = self.head.greedy(obs, mask)
            if degree is not None:
                return degree
        with torch_for_play().no_grad():
            return masked_argmax(self.logits(obs), mask)

    def embeds(self, node_x: np.ndarray, edge_index: np.ndarray, edge_x: np.ndarray,
               graph_sig: np.ndarray) -> bool:
        """Whether the numpy head plays this graph (its arrays: :mod:`~pacopt.learned.features`)
        without torch: its embedding is shipped or in the cache."""
        return (self.head is not None
                and graph_digest(node_x, edge_index, edge_x, graph_sig) in self.head.export.stored)


def masked_argmax(logits: torch.Tensor, mask: np.ndarray) -> int:
    """The index of the largest of ``logits`` where ``mask`` allows."""
    import torch

    allowed = torch.from_numpy(np.asarray(mask, dtype=bool))
    return int(torch.argmax(torch.where(allowed, logits, -torch.inf)))


class NumpyHead:
    """An export's network after the graph embedding, in numpy: the context MLP on [graph
    embedding, globals], then one shared MLP scoring each degree's row [context, its action
    features (with the spill features, if the network has them), its degree vector]. The graph
    embeddings come from the cache, or from the compiled network on first sight of a graph
    (:class:`_Export`)."""

    def __init__(self, arrays: dict[str, np.ndarray], export: _Export):
        self.context = _layers(arrays, "context")
        self.scorer = _layers(arrays, "scorer")
        self.degrees = arrays["degrees"]  # one vector per degree, 0 first
        self.spill = bool(arrays["spill"])
        self.export = export

    def scored(self, obs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
        """The degrees' logits and the scale of their rounding (:func:`_forward`); None for
        more degrees than the head holds."""
        return self._scored(obs, self.context, self.scorer)

    @cached_property
    def _layers64(self) -> tuple[list[tuple], list[tuple]]:
        """The context and scorer layers in float64 (a near tie's second look)."""
        return tuple([tuple(a.astype(np.float64) if isinstance(a, np.ndarray) else a
                            for a in layer) for layer in layers]
                     for layers in (self.context, self.scorer))

    def _scored(self, obs: dict[str, np.ndarray], context_layers: list[tuple],
                scorer_layers: list[tuple]) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`scored` by these layers, in their weights' precision."""
        dtype = context_layers[0][0].dtype
        actions = obs["actions"]
        n = len(actions)
        if n > len(self.degrees):
            return None
        x = np.concatenate([self.export.embedding(obs), obs["globals"]], dtype=dtype)
        context, scale = _forward(context_layers, x, np.zeros_like(x))
        if self.spill:
            actions = np.concatenate([actions, _spill_features(actions)], 1)
        degrees = self.degrees[:n]
        rows = np.concatenate([np.broadcast_to(context, (n, len(context))), actions, degrees], 1,
                              dtype=dtype)
        scales = np.concatenate([np.broadcast_to(scale, (n, len(scale))),
                                 np.zeros((n, actions.shape[1] + degrees.shape[1]),
                                          dtype=dtype)], 1)
        logits, scale = _forward(scorer_layers, rows, scales)
        return logits[:, 0], scale[:, 0]

    def greedy(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> int | None:
        """The allowed degree of largest logit (the first of equal ones), or None where the
        head cannot score this observation (the compiled network plays it). Where the two best
        float32 logits are closer than :data:`TIE_MARGIN` times their rounding scales (a near
        tie: float32 rounding could order them either way) the float64 logits decide: the
        exact network's choice wherever the gap is above float64's rounding, which torch's
        float32 shares wherever the gap is above its own."""
        scored = self.scored(obs)
        if scored is None:
            return None
        allowed = np.flatnonzero(mask)
        logits, scale = scored[0][allowed], scored[1][allowed]
        order = np.argsort(-logits, kind="stable")
        if len(order) > 1:
            best, second = order[0], order[1]
            if logits[best] - logits[second] < TIE_MARGIN * (scale[best] + scale[second]):
                logits = self._scored(obs, *self._layers64)[0][allowed]
                return int(allowed[int(np.argmax(logits))])
        return int(allowed[order[0]])


def _layers(arrays: dict[str, np.ndarray], name: str) -> list[tuple]:
    """An MLP's (weight transposed, its absolute values, bias, its absolute values, ReLU
    after) per linear layer, as :func:`_save_head` wrote them."""
    out = []
    while f"{name}.{len(out)}.weight" in arrays:
        i = len(out)
        weight, bias = arrays[f"{name}.{i}.weight"].T, arrays[f"{name}.{i}.bias"]
        out.append((weight, np.abs(weight), bias, np.abs(bias),
                    bool(arrays[f"{name}.{i}.relu"])))
    return out


def _forward(layers, x: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The MLP on ``x``, and the scale of its rounding: each layer adds the sizes of the terms
    it sums (weights and inputs by their absolute values, and the bias), and carries the
    scale it was given through its weights' absolute values (``scale``: the input's, zero
    for inputs both sides hold exactly). Another summation order moves an output by at most
    a small multiple of float32's precision times its scale."""
    for weight, abs_weight, bias, abs_bias, relu in layers:
        scale = (scale + np.abs(x)) @ abs_weight + abs_bias
        x = x @ weight + bias
        if relu:
            x = np.maximum(x, 0.0)
    return x, scale


def _spill_features(actions: np.ndarray) -> np.ndarray:
    """:func:`~pacopt.learned.gnn.spill_features` on one observation's action rows, in numpy
    (a test holds the two equal)."""
    live, empty = actions[:, 6], actions[:, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        excess = np.where(empty > 0, (live - empty) / np.maximum(empty, np.float32(1e-9)),
                          np.float32(0.0))
    excess = np.maximum(excess, np.float32(0.0))
    return np.stack([(excess > 1e-6).astype(np.float32), np.minimum(excess, np.float32(1.0))],
                    -1)


def graph_digest(node_x: np.ndarray, edge_index: np.ndarray, edge_x: np.ndarray,
                 graph_sig: np.ndarray) -> str:
    """The digest by which exports keep a graph's embedding: of its observation arrays."""
    digest = hashlib.sha256()
    for name, array in (("node_x", node_x), ("edge_index", edge_index), ("edge_x", edge_x),
                        ("graph_sig", graph_sig)):
        array = np.ascontiguousarray(array)
        digest.update(f"{name}{array.dtype}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


class _Export:
    """A checkpoint's export in the cache: the graph embeddings (in memory by signature, on disk
    by the graph arrays' digest; ``shipped``: those of its shipped export, which come first)
    and the compiled network, loaded on first need (``remake`` compiles it again from the
    checkpoint). Called, the compiled network's logits (as :class:`Player` plays without a
    numpy head)."""

    def __init__(self, file: Path, remake: Callable[[], Any], module=None,
                 shipped: dict[str, np.ndarray] | None = None, compiled: bytes | None = None):
        self.file, self._remake = file, remake
        self._module = module
        self._compiled = compiled  # a shipped export's compiled network (TorchScript's bytes)
        self.embeddings: dict[tuple, np.ndarray] = {}
        self.stored = {**(_read_arrays(_graphs_file(file)) or {}), **(shipped or {})}

    @property
    def module(self):
        if self._module is None:
            torch = torch_for_play(_COMPILED)
            # the shipped network, the cache's, else compiled from the checkpoint now: not
            # made yet (a first near tie of a shipped export made by other versions), gone or
            # damaged (torch says ValueError for a missing file)
            sources = [io.BytesIO(self._compiled)] if self._compiled else []
            for source in [*sources, str(self.file)]:
                try:
                    self._module = _quietly(torch.jit.load, source, map_location="cpu")
                    break
                except (RuntimeError, OSError, ValueError, AttributeError):
                    continue
            else:
                self._module = self._remake()
        return self._module

    def embedding(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The graph's embedding (float32): remembered by signature, else from the cache by
        the graph arrays' digest, else computed by the compiled network and kept."""
        sig = tuple(obs["graph_sig"].tolist())
        embedding = self.embeddings.get(sig)
        if embedding is None:
            name = graph_digest(obs["node_x"], obs["edge_index"], obs["edge_x"],
                                obs["graph_sig"])
            embedding = self.stored.get(name)
            if embedding is None:
                torch_for_play(_UNEMBEDDED)
                embedding = _embed(self.module, obs["node_x"], obs["edge_index"],
                                   obs["edge_x"], obs["graph_sig"])
                self.stored[name] = embedding
                _write_arrays(_graphs_file(self.file), self.stored)
            self.embeddings[sig] = embedding
        return embedding

    def __call__(self, obs: dict[str, np.ndarray]) -> torch.Tensor:
        torch = torch_for_play(_COMPILED)
        with torch.inference_mode():  # never trained: lighter than no_grad
            embedding = torch.from_numpy(self.embedding(obs))
            return self.module(embedding.unsqueeze(0), torch.from_numpy(obs["globals"][None]),
                               torch.from_numpy(obs["actions"][None]))[0, :len(obs["actions"])]


@lru_cache(maxsize=8)
def load_player(path: str, load: Callable[[str], Any]) -> Player:
    """The checkpoint at ``path`` (an absolute path, checked) ready to play, once per file and
    process: its shipped export (:func:`read_shipped_export`), else its export from the cache,
    or else loaded by ``load`` (a
    :class:`~pacopt.learned.gnn.DegreePolicy`, checked:
    :func:`~pacopt.learned.agent.load_checkpoint`), compiled and exported (module doc). A
    damaged or unreadable export is made again; a cache that cannot be written only costs the
    next run the slow load."""
    from pacopt.learned.checkpoint_meta import check_agent_checkpoint

    check_agent_checkpoint(path)  # the file as it is now: a missing or damaged one fails here
    file = cache_dir() / "agents" / f"{_key(path)}.pt"
    remake = lambda: _export(path, load, file)[1]  # the export gone or damaged while playing
    shipped = read_shipped_export(path)
    if shipped is not None:
        embeddings = {key.removeprefix("graph:"): value for key, value in shipped.items()
                      if key.startswith("graph:")}
        compiled = shipped.pop("compiled", None)  # held once: as bytes, where it can play
        compiled = (compiled.tobytes() if compiled is not None
                    and str(shipped.get("compiled_with")) == _runtime() else None)
        return _player(json.loads(str(shipped["info"])),
                       _Export(file, remake, shipped=embeddings, compiled=compiled), shipped)
    arrays = _read_arrays(file.with_suffix(".npz")) if file.is_file() else None
    if arrays is not None:
        try:  # the head written with this very module, and the module whole
            if str(arrays["module"]) == _digest(file):
                return _player(json.loads(str(arrays["info"])), _Export(file, remake), arrays)
        except (KeyError, ValueError, TypeError, OSError):
            pass  # made again below
    if file.is_file():
        try:
            torch = torch_for_play()
            extra = {_EXTRA: ""}
            module = _quietly(torch.jit.load, str(file), map_location="cpu",
                              _extra_files=extra)
            info = json.loads(extra[_EXTRA])
            return _player(info, _Export(file, remake, module), _save_head(module, file, info))
        except (RuntimeError, OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # made again below (AttributeError: a torch without TorchScript)
    info, module, arrays = _export(path, load, file)
    if module is None:  # a torch without TorchScript: play the network in memory
        return Player.of_policy(info)
    return _player(info, _Export(file, remake, module), arrays)


def read_shipped_export(path: str) -> dict[str, np.ndarray] | None:
    """The arrays of the export shipped beside the checkpoint at ``path``
    (:data:`SHIPPED_SUFFIX`), or None when there is none, it is unreadable, or it was made from
    other bytes or by another :data:`EXPORT_VERSION`."""
    arrays = _read_arrays(shipped_export_path(path))
    try:
        if (arrays is None or int(arrays["export_version"]) != EXPORT_VERSION
                or str(arrays["checkpoint_sha256"]) != _digest(Path(path))):
            return None
    except (KeyError, ValueError, TypeError, OSError):
        return None
    return arrays


def shipped_export_path(path: str | Path) -> Path:
    """Where the shipped export of the checkpoint at ``path`` is: beside it."""
    path = Path(path)
    return path.with_name(path.name.removesuffix(".zip") + SHIPPED_SUFFIX)


def write_shipped_export(path: str, load: Callable[[str], Any], graphs: dict) -> Path:
    """Write the shipped export of the checkpoint at ``path`` beside it (:func:`read_shipped_export`
    reads it): the numpy head of its compiled network, and the embedding of each of ``graphs``
    (name -> :class:`~pacopt.model.graph.JobGraph`) as that network computes it; torch and
    ``load`` (:func:`~pacopt.learned.agent.load_checkpoint`) make it."""
    from pacopt.learned.features import encode_graph

    torch = torch_for_play("writing an agent's export")
    policy = load(path)
    module = _quietly(policy.features_extractor.play_module)
    info = {"shapes": space_shapes(policy.observation_space),
            "degree_features": policy.features_extractor.degree_features,
            "checkpoint": Path(path).name}
    arrays = _head_arrays(module, info)
    if arrays is None:
        raise InputError(f"checkpoint '{path}': its head is not one the numpy head plays")
    names = {}
    for name, graph in graphs.items():
        g = encode_graph(graph)
        digest = graph_digest(g.node_x, g.edge_index, g.edge_x, g.sig)
        arrays[f"graph:{digest}"] = _embed(module, g.node_x, g.edge_index, g.edge_x, g.sig)
        names[name] = digest
    arrays["graphs"] = np.array(json.dumps(names, sort_keys=True))
    compiled = io.BytesIO()  # the network a near tie needs, so play loads no checkpoint
    _quietly(torch.jit.save, module, compiled)
    arrays["compiled"] = np.frombuffer(compiled.getvalue(), dtype=np.uint8)
    arrays["compiled_with"] = np.array(_runtime())
    arrays["checkpoint_sha256"] = np.array(_digest(Path(path)))
    arrays["export_version"] = np.array(EXPORT_VERSION)
    arrays["module"] = np.array("")  # no cache file: the network ships as "compiled"
    out = shipped_export_path(path)

    def save(tmp: Path) -> None:
        with tmp.open("wb") as stream:
            np.savez_compressed(stream, **arrays)

    write_atomically(out, save, what="the shipped export")
    return out


def _embed(module, node_x: np.ndarray, edge_index: np.ndarray, edge_x: np.ndarray,
           graph_sig: np.ndarray) -> np.ndarray:
    """One graph's embedding by the compiled network (float32)."""
    torch = torch_for_play(_UNEMBEDDED)
    with torch.inference_mode():
        return module.embed(torch.from_numpy(node_x[None]), torch.from_numpy(edge_index[None]),
                            torch.from_numpy(edge_x[None]),
                            torch.from_numpy(graph_sig[None])[:, 2:])[0].numpy()


def _export(path: str, load: Callable[[str], Any], file: Path):
    """Load the checkpoint, compile its network and write the export: ``(info, module, head
    arrays)``, or ``(the policy, None, None)`` where torch has no TorchScript."""
    policy = load(path)
    try:
        module = _quietly(policy.features_extractor.play_module)
    except (AttributeError, RuntimeError):
        return policy, None, None
    info = {"shapes": space_shapes(policy.observation_space),
            "degree_features": policy.features_extractor.degree_features, "checkpoint": path}
    _save(module, file, info)
    return info, module, _save_head(module, file, info)


def _digest(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()


def _player(info: dict, export: _Export, arrays: dict[str, np.ndarray] | None) -> Player:
    shapes = {k: tuple(v) for k, v in info["shapes"].items()}
    head = None if arrays is None else NumpyHead(arrays, export)
    return Player(shapes, bool(info["degree_features"]), export, head=head)


def _save_head(module, file: Path, info: dict) -> dict[str, np.ndarray] | None:
    """The compiled network's head as numpy arrays (:class:`NumpyHead`), written next to its
    export; None for a head of other layers (the compiled network then plays every move)."""
    arrays = _head_arrays(module, info)
    if arrays is None:
        return None
    try:
        arrays["module"] = np.array(_digest(file))  # the export it was made with
    except OSError:  # not written (a read-only cache): the head plays in this process only
        arrays["module"] = np.array("")
    _write_arrays(file.with_suffix(".npz"), arrays)
    return arrays


def _head_arrays(module, info: dict) -> dict[str, np.ndarray] | None:
    """The compiled network's head as numpy arrays (:class:`NumpyHead`), or None for a head of
    other layers."""
    torch = torch_for_play()
    head = module.head
    arrays: dict[str, np.ndarray] = {"info": np.array(json.dumps(info)),
                                     "spill": np.array(bool(head.spill))}
    try:
        for name in ("context", "scorer"):
            layers = list(getattr(head, name).children())
            kinds = [layer.original_name for layer in layers]
            linear = [i for i, kind in enumerate(kinds) if kind == "Linear"]
            if set(kinds) - {"Linear", "ReLU"} or kinds[0] != "Linear":
                return None
            for j, i in enumerate(linear):
                arrays[f"{name}.{j}.weight"] = layers[i].weight.detach().numpy().copy()
                arrays[f"{name}.{j}.bias"] = layers[i].bias.detach().numpy().copy()
                arrays[f"{name}.{j}.relu"] = np.array(i + 1 < len(kinds)
                                                      and kinds[i + 1] == "ReLU")
        with torch.inference_mode():
            arrays["degrees"] = module.degree_table(HEAD_DEGREES).numpy().copy()
    except (AttributeError, RuntimeError):
        return None
    return arrays


def _graphs_file(file: Path) -> Path:
    return file.with_suffix(".graphs.npz")


def _read_arrays(file: Path) -> dict[str, np.ndarray] | None:
    """The arrays of an ``.npz`` in the cache, or None when missing or unreadable."""
    try:
        # the file opened here: np.load leaves its own handle open when the zip is damaged
        with open(file, "rb") as handle, np.load(handle, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        return None


def _write_arrays(file: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` whole or not at all (another process may be reading the cache); a cache
    that cannot be written is left alone."""

    def save(tmp: Path) -> None:
        with tmp.open("wb") as out:  # a file object: given a path, numpy would add ".npz"
            np.savez(out, **arrays)

    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(file, save, what="the agent cache")
    except (OSError, InputError):
        pass


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
    digest.update(f"{EXPORT_VERSION}\0{_runtime()}".encode())
    return digest.hexdigest()


def _runtime() -> str:
    """The libraries a compiled network is made and run with, as one string."""
    return "\0".join((_version("torch"), _version("torch_geometric")))


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def _save(module: torch.jit.ScriptModule, file: Path, info: dict) -> None:
    """Write the export whole or not at all (another process may be reading the cache), and
    leave at most :data:`MAX_EXPORTS` in the cache (each with its numpy files)."""
    torch = torch_for_play()
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(file, lambda tmp: _quietly(torch.jit.save, module, str(tmp),
                                                    _extra_files={_EXTRA: json.dumps(info)}),
                         what="the agent cache")
        exports = sorted(file.parent.glob("*.pt"), key=lambda f: f.stat().st_mtime)
        for old in exports[:-MAX_EXPORTS]:
            for each in (old, old.with_suffix(".npz"), _graphs_file(old)):
                each.unlink(missing_ok=True)
    except (OSError, RuntimeError, InputError):
        pass  # a read-only cache: this run plays the compiled module all the same
