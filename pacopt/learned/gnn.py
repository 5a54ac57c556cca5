"""The agent's network: a torch-geometric encoder of the job graph, and a masked actor-critic
policy for sb3-contrib's MaskablePPO that scores every degree with one shared head.

Forward pass over a batch of observations (:mod:`pacopt.learned.features`):
1. **Graph.** The distinct graphs of the batch (by ``graph_sig``; a workload has few) are
   embedded once each: two GINE message-passing rounds (messages along and against the data
   dependencies, edge features = bytes moved), then mean and max readout.
2. **Context.** The graph embedding joined with the job and cluster features, through an MLP.
3. **Actor.** One shared MLP scores each degree from [context, that degree's features] (the
   live first-fit outcome); the scores are the action logits, masked by MaskablePPO. Sharing the
   head across degrees is what lets a few minutes of training generalise over 17 actions. Each
   degree's row also gets a vector of the degree itself: with ``degree_features`` (new
   checkpoints) an MLP of the degree's features (:func:`degree_features`: reject or not, its
   log2 and share of 16, power of two, even), so that one network scores any number of degrees
   (a cluster allowing 32 partitions per op plays a checkpoint trained on 16); without it (the
   checkpoints trained before) a learned table of 17 entries, one per degree 0..16. With
   ``spill`` (new checkpoints; older ones were built without it) each degree's row also gets
   whether, and by how much, its live footprint exceeds its footprint on an empty cluster: an
   unsplit op that first-fit puts on a server outside the job's block. Such a placement can tip
   first-fit into a lasting misaligned packing (every later job of that degree spills too), one
   of the costliest mistakes on beta C, and its sign is too faint in the raw worker counts (4 or
   5 of 32) for a student to pick up from the few states where it matters.
4. **Critic.** An MLP on the context.

The features extractor returns [logits | context]; the policy's MLP extractor splits the two, and
its action net is the identity.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.utils import obs_as_tensor
from torch import nn
from torch_geometric.nn import GINEConv, global_max_pool, global_mean_pool

from pacopt.learned.features import DEGREE_SCALE
from pacopt.learned.player import masked_argmax

#: Length of :func:`degree_features`' rows.
DEGREE_FEATURES = 6


def _mlp(sizes: list[int], last_activation: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if last_activation or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class GraphEncoder(nn.Module):
    """Embeds padded job graphs: GINE rounds over both edge directions, mean+max readout."""

    def __init__(self, node_dim: int, edge_dim: int, hidden: int = 64, out: int = 32,
                 rounds: int = 2):
        super().__init__()
        self.inp = nn.Linear(node_dim, hidden)
        self.convs = nn.ModuleList(
            GINEConv(_mlp([hidden, hidden, hidden]), edge_dim=edge_dim + 1) for _ in range(rounds))
        self.out = nn.Linear(2 * hidden, out)

    def forward(self, node_x, edge_index, edge_x, sizes) -> torch.Tensor:
        """Embed graphs given as padded tensors (G x N x F, G x 2 x E, G x E x D, G x 2 sizes)."""
        xs, edges, attrs, batch = [], [], [], []
        offset = 0
        for g in range(node_x.shape[0]):
            n, m = int(sizes[g, 0]), int(sizes[g, 1])
            xs.append(node_x[g, :n])
            e = edge_index[g, :, :m].long() + offset
            a = edge_x[g, :m]
            # messages flow along and against each dependency; a flag tells the two apart
            edges += [e, e.flip(0)]
            attrs += [torch.cat([a, torch.zeros_like(a[:, :1])], 1),
                      torch.cat([a, torch.ones_like(a[:, :1])], 1)]
            batch.append(torch.full((n,), g, dtype=torch.long, device=node_x.device))
            offset += n
        x = torch.relu(self.inp(torch.cat(xs)))
        edge_index_all = torch.cat(edges, 1)
        edge_attr = torch.cat(attrs)
        for conv in self.convs:
            x = x + torch.relu(conv(x, edge_index_all, edge_attr))
        batch_all = torch.cat(batch)
        pooled = torch.cat([global_mean_pool(x, batch_all), global_max_pool(x, batch_all)], 1)
        return torch.relu(self.out(pooled))


class DegreeScorer(BaseFeaturesExtractor):
    """Observation -> [one logit per degree | context] (see the module doc)."""

    def __init__(self, observation_space: spaces.Dict, graph_dim: int = 32, context_dim: int = 64,
                 hidden: int = 64, degree_dim: int = 8, spill: bool = False,
                 degree_features: bool = False):
        num_actions, action_dim = observation_space["actions"].shape
        super().__init__(observation_space, features_dim=num_actions + context_dim)
        self.spill = spill
        self.degree_features = degree_features
        self.num_actions = num_actions
        self.encoder = GraphEncoder(observation_space["node_x"].shape[1],
                                    observation_space["edge_x"].shape[1], hidden, graph_dim)
        global_dim = observation_space["globals"].shape[0]
        self.context = _mlp([graph_dim + global_dim, hidden, context_dim])
        # a learned vector per degree: "prefer 6 when ..." is then a bias, not a bump to carve
        # out of the scalar d / 16 with ReLUs; from the degree's features, or (older
        # checkpoints) from a table of this space's degrees
        if degree_features:
            self.degree_encoder = _mlp([DEGREE_FEATURES, 2 * degree_dim, degree_dim],
                                       last_activation=False)
        else:
            self.degree_embedding = nn.Embedding(num_actions, degree_dim)
        self.scorer = _mlp([context_dim + action_dim + degree_dim + 2 * spill, hidden, hidden, 1],
                           last_activation=False)
        self._cache: dict[tuple, torch.Tensor] = {}
        # play's traced head (:meth:`play_logits`), in a dict: a module set as an attribute
        # would be registered, and its weights saved twice
        self._traced: dict[str, torch.jit.ScriptModule] = {}

    def train(self, mode: bool = True):
        self._cache.clear()  # the weights are about to change
        self._traced.clear()
        return super().train(mode)

    def __getstate__(self):
        # copies and pickles leave the traced head behind (TorchScript modules do not pickle,
        # and a copy must trace its own weights)
        return {**super().__getstate__(), "_traced": {}}

    def embed_graphs(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """One embedding per observation, computing each distinct graph once (and, while the
        weights are frozen for rollouts and play, once per graph until the next update)."""
        sig = obs["graph_sig"]
        frozen = not self.training and not torch.is_grad_enabled()
        if frozen and len(sig) == 1:  # one decision in play: no need to find the distinct rows
            cached = self._cache.get(tuple(sig[0].tolist()))
            if cached is not None:
                return cached.unsqueeze(0)
        unique, inverse = torch.unique(sig, dim=0, return_inverse=True)
        keys = [tuple(row) for row in unique.tolist()]
        if frozen and all(key in self._cache for key in keys):
            return torch.stack([self._cache[key] for key in keys])[inverse]
        first = torch.full((len(unique),), len(sig), dtype=torch.long, device=sig.device)
        first.scatter_reduce_(0, inverse, torch.arange(len(sig), device=sig.device), "amin")
        emb = self.encoder(obs["node_x"][first], obs["edge_index"][first], obs["edge_x"][first],
                           unique[:, 2:])
        if frozen:
            self._cache.update(zip(keys, emb))
        return emb[inverse]

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        logits, context = self._head(self.embed_graphs(obs), obs["globals"], obs["actions"])
        return torch.cat([logits, context], 1)

    @property
    def _head(self) -> _Head:
        """The layers after the graph embedding as one module (made per call: a module kept as
        an attribute would add its weights to the state dict a second time)."""
        return _Head(self)

    def play_module(self) -> torch.jit.ScriptModule:
        """This network's play compiled by TorchScript: ``embed(node_x, edge_index, edge_x,
        sizes)`` a batch of graphs, then ``forward(embedding, globals, actions)`` the degrees'
        logits (and ``degree_table(num_actions)``, the degree vectors the numpy head holds).
        It runs with torch alone, so :mod:`pacopt.learned.player` saves it and play needs no
        torch-geometric; it holds these modules, not copies. (torch 2.13 marks TorchScript
        deprecated, as for :func:`_traced`; the compiled file is what play without
        torch-geometric loads, so the warning is silenced.)"""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.script(_PlayNetwork(self))

    def play_logits(self, obs: dict[str, np.ndarray]) -> torch.Tensor:
        """The degrees' logits of one observation (numpy arrays, no batch axis) while the
        weights are frozen for play (eval mode, no gradient): the graph's embedding from the
        cache, and the head traced by TorchScript once (it runs the same operations with half
        the per-operation overhead of eager mode, the bulk of a call this small). The traced
        head holds the modules themselves, so it sees every later update of their weights."""
        device = self.scorer[0].weight.device
        num_actions = len(obs["actions"])  # this instance's degrees (any, with degree features)
        if self.training or torch.is_grad_enabled():
            batch = {k: torch.from_numpy(v[None]).to(device) for k, v in obs.items()}
            return self(batch)[0, :num_actions]
        embedding = self._cache.get(tuple(obs["graph_sig"].tolist()))
        if embedding is None:  # a graph not seen since the weights last changed
            embedding = self.embed_graphs({k: torch.from_numpy(v[None]).to(device)
                                           for k, v in obs.items()})[0]
        inputs = (embedding.unsqueeze(0), torch.from_numpy(obs["globals"][None]).to(device),
                  torch.from_numpy(obs["actions"][None]).to(device))
        head = self._traced.get(num_actions)  # a trace holds its shapes: one per degree count
        if head is None:
            head = self._traced[num_actions] = _traced(self._head, inputs)
        return head(*inputs)[0][0]


def _traced(module: nn.Module, inputs: tuple) -> nn.Module:
    """``module`` traced by TorchScript for play, or the module itself where tracing is not
    available. torch 2.13 marks ``torch.jit.trace`` deprecated in favour of ``torch.compile``
    and ``torch.export``, but for a head this small the first costs seconds of compilation and
    the second's module runs slower than eager mode (``docs/experiments.md``); the trace runs
    the same kernels, and play gives the same logits to the bit."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.trace(module, inputs, check_trace=False)
    except (AttributeError, RuntimeError):  # a torch without it, or an operation it refuses
        return module


class _Head(nn.Module):
    """:class:`DegreeScorer`'s layers after the graph embedding: (graph embedding, globals,
    actions) -> (the degrees' logits, the context). Its own module (holding the scorer's
    modules, not copies), so that play can trace it."""

    def __init__(self, scorer: DegreeScorer):
        super().__init__()
        self.context, self.scorer, self.spill = scorer.context, scorer.scorer, scorer.spill
        self.degree_encoder = scorer.degree_encoder if scorer.degree_features else None
        self.degree_embedding = None if scorer.degree_features else scorer.degree_embedding

    def forward(self, embedding: torch.Tensor, globals_: torch.Tensor,
                actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        context = self.context(torch.cat([embedding, globals_], 1))
        if self.spill:
            actions = torch.cat([actions, spill_features(actions)], 2)
        batch, num_actions = actions.shape[0], actions.shape[1]
        degrees = self.degree_table(num_actions, actions.device).unsqueeze(0).expand(batch, -1, -1)
        joined = torch.cat([context.unsqueeze(1).expand(-1, num_actions, -1), actions, degrees], 2)
        return self.scorer(joined).squeeze(-1), context

    def degree_table(self, num_actions: int, device: torch.device) -> torch.Tensor:
        """The vectors of degrees 0..num_actions-1 (a table network: its whole table)."""
        if self.degree_encoder is not None:
            if torch.jit.is_scripting():  # a scripted module cannot call the cached function
                rows = _degree_rows(num_actions, device)
            else:
                rows = degree_features(num_actions, device)
            return self.degree_encoder(rows)
        return self.degree_embedding.weight


class _PlayNetwork(nn.Module):
    """Play's two steps as one module for TorchScript (:meth:`DegreeScorer.play_module`):
    ``embed`` a graph (once per graph), then ``forward`` one observation's degree logits from
    that embedding."""

    def __init__(self, scorer: DegreeScorer):
        super().__init__()
        self.encoder, self.head = scorer.encoder, _Head(scorer)

    @torch.jit.export
    def embed(self, node_x: torch.Tensor, edge_index: torch.Tensor, edge_x: torch.Tensor,
              sizes: torch.Tensor) -> torch.Tensor:
        return self.encoder(node_x, edge_index, edge_x, sizes)

    @torch.jit.export
    def degree_table(self, num_actions: int) -> torch.Tensor:
        """The head's degree vectors (:meth:`_Head.degree_table`), for the numpy head."""
        return self.head.degree_table(num_actions, torch.device("cpu"))

    def forward(self, embedding: torch.Tensor, globals_: torch.Tensor,
                actions: torch.Tensor) -> torch.Tensor:
        return self.head(embedding, globals_, actions)[0]


@lru_cache(maxsize=16)
def degree_features(num_actions: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """One row per degree 0..num_actions-1 (0 = reject), DEGREE_FEATURES numbers each that
    mean the same on any cluster: [reject, log2(d) / 4, d / DEGREE_SCALE, d a power of two,
    d even, the fractional part of log2(d)] (the last ties 3, 6, 12, 24: three equal parts).
    Made once per size (every decision asks; a traced head then holds it as a constant), so
    never to be changed in place."""
    return _degree_rows(num_actions, torch.device(device))


def _degree_rows(num_actions: int, device: torch.device,
                 scale: float = float(DEGREE_SCALE)) -> torch.Tensor:
    """:func:`degree_features` made afresh (TorchScript compiles this one; it takes the
    scale as an argument, since it reads no global)."""
    d = torch.arange(num_actions, dtype=torch.float32, device=device)
    log = torch.log2(d.clamp_min(1.0))
    frac = log - torch.floor(log + 1e-6)
    positive = (d >= 1).float()
    return torch.stack([1.0 - positive, log / 4, d / scale,
                        positive * (frac.abs() < 1e-6).float(),
                        positive * (torch.remainder(d, 2) == 0).float(),
                        positive * frac.clamp_min(0.0)], 1)


def spill_features(actions: torch.Tensor) -> torch.Tensor:
    """Per degree: [live footprint larger than on an empty cluster (0/1), by how much relative
    to that], from the action rows' workers now (column 6) and on an empty cluster (column 3),
    both as shares of the cluster (:mod:`pacopt.learned.features`)."""
    live, empty = actions[..., 6], actions[..., 3]
    excess = torch.where(empty > 0, (live - empty) / empty.clamp_min(1e-9), 0.0).clamp_min(0.0)
    return torch.stack([(excess > 1e-6).float(), excess.clamp_max(1.0)], -1)


class _SplitHeads(nn.Module):
    """sb3's MLP-extractor slot: the actor gets the logits, the critic an MLP of the context."""

    def __init__(self, num_actions: int, context_dim: int, hidden: int = 64):
        super().__init__()
        self.num_actions = num_actions
        self.latent_dim_pi = num_actions
        self.latent_dim_vf = hidden
        self.critic = _mlp([context_dim, hidden, hidden])

    def forward(self, features):
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features):
        return features[:, :self.num_actions]

    def forward_critic(self, features):
        return self.critic(features[:, self.num_actions:])


class DegreePolicy(MaskableActorCriticPolicy):
    """MaskablePPO's actor-critic with :class:`DegreeScorer` as features extractor."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("features_extractor_class", DegreeScorer)
        kwargs.setdefault("share_features_extractor", True)
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        extractor = self.features_extractor
        self.mlp_extractor = _SplitHeads(extractor.num_actions,
                                         extractor.features_dim - extractor.num_actions)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the scorer's outputs are the logits
        # the scorer's last layer starts small, like sb3's action net (near-uniform policy)
        last = self.features_extractor.scorer[-1]
        nn.init.orthogonal_(last.weight, gain=0.01)
        nn.init.zeros_(last.bias)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1),
                                              **self.optimizer_kwargs)


def degree_distribution(policy: MaskableActorCriticPolicy, obs: dict[str, np.ndarray],
                        mask: np.ndarray):
    """The policy's masked action distribution for one observation."""
    with torch.no_grad():
        tensor = obs_as_tensor({k: v[None] for k, v in obs.items()}, policy.device)
        return policy.get_distribution(tensor, mask[None])


def greedy_degree(policy: DegreePolicy, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
    """The most likely allowed degree (how the agent plays): the largest allowed logit, read
    straight from the scorer (a :class:`DegreePolicy`'s spaces are float32 boxes, with no
    preprocessing to do, and its actor's logits are the scorer's first outputs), without
    building the distribution."""
    with torch.no_grad():
        return masked_argmax(policy.features_extractor.play_logits(obs), mask)
