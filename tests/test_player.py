"""Play without torch-geometric, and mostly without torch: a checkpoint's network compiled by
TorchScript once and its head in numpy, kept in the cache, deciding as the network in memory
decides (``pacopt.learned.player``)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO

from pacopt.learned.agent import load_checkpoint
from pacopt.learned.checkpoint_meta import set_metadata
from pacopt.learned.env import PartitionEnv, WorkloadFamily
from pacopt.learned.gnn import DegreePolicy, greedy_degree, spill_features
from pacopt.learned.player import (
    TIE_MARGIN,
    _key,
    _quietly,
    _spill_features,
    load_player,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def env():
    data = json.loads((EXAMPLES / "bundled.json").read_text())
    data["workload"]["num_jobs"] = 80
    data["horizon_ms"] = 80 * data["workload"]["interarrival_ms"]
    return PartitionEnv(WorkloadFamily.from_instance_data(data, EXAMPLES))


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PACOPT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "agents"


def _saved(env, path: Path, seed: int, **extractor) -> MaskablePPO:
    kwargs = {"features_extractor_kwargs": extractor} if extractor else {}
    model = MaskablePPO(DegreePolicy, env, seed=seed, device="cpu", policy_kwargs=kwargs)
    # the scorer starts near zero: move it, so that logits differ between degrees
    with torch.no_grad():
        model.policy.features_extractor.scorer[-1].weight.normal_(
            0, 1, generator=torch.Generator().manual_seed(seed))
    model.save(path)
    model.policy.set_training_mode(False)
    return model


@pytest.mark.parametrize("extractor", [{}, {"spill": True, "degree_features": True}],
                         ids=["table", "degree-features"])
def test_the_compiled_network_plays_the_networks_logits_to_the_bit(env, tmp_path, cache,
                                                                   extractor):
    """On every state of an episode the compiled network's logits equal, bit for bit, those of
    the network in memory it was made from, from the export just written and from the one
    read back from the cache; with degree features, also for a cluster allowing more degrees."""
    model = _saved(env, tmp_path / "agent.zip", seed=5, **extractor)
    scorer = model.policy.features_extractor
    fresh = load_player.__wrapped__(str(tmp_path / "agent.zip"), load_checkpoint)
    assert len(list(cache.glob("*.pt"))) == 1
    cached = load_player.__wrapped__(str(tmp_path / "agent.zip"), load_checkpoint)
    assert cached.logits is not fresh.logits
    assert cached.shapes == {k: v.shape for k, v in env.observation_space.spaces.items()}
    assert cached.degree_features == bool(extractor)
    obs, _ = env.reset(seed=3)
    done, decisions = False, 0
    assert fresh.head is not None and cached.head is not None
    with torch.no_grad():
        while not done:
            mine = scorer.play_logits(obs)
            assert torch.equal(fresh.logits(obs), mine) and torch.equal(cached.logits(obs), mine)
            # the numpy head: torch's logits up to rounding, far inside the tie margin
            logits, scale = cached.head.scored(obs)
            assert (np.abs(logits - mine.numpy()) / scale).max() < TIE_MARGIN / 4
            mask = env.action_masks()
            degree = cached.greedy(obs, mask)
            assert degree == greedy_degree(model.policy, obs, mask) and mask[degree]
            decisions += mask.sum() > 1
            played = obs
            obs, _, done, _, _ = env.step(degree)
        assert decisions > 20
        if extractor:  # the last decision's state (the final observation stands for no job)
            more = dict(played, actions=np.concatenate([played["actions"],
                                                        played["actions"][1:]]))
            assert torch.equal(cached.logits(more), scorer.play_logits(more))
            logits, scale = cached.head.scored(more)
            assert (np.abs(logits - scorer.play_logits(more).numpy()) / scale).max() < (
                TIE_MARGIN / 4)


def test_a_near_tie_is_decided_by_the_head_in_float64(env, tmp_path, cache, monkeypatch):
    """With every gap counted a near tie, each choice between degrees is made by the numpy
    head's float64 logits, without asking the compiled network, and is the network in memory's;
    with none, the float32 logits decide every move, alike."""
    from pacopt.learned import player

    model = _saved(env, tmp_path / "agent.zip", seed=8, spill=True, degree_features=True)
    played = load_player.__wrapped__(str(tmp_path / "agent.zip"), load_checkpoint)
    played.logits = lambda obs: pytest.fail("the compiled network was asked")
    second_looks = []
    scored = played.head._scored
    monkeypatch.setattr(played.head, "_scored", lambda obs, *layers: (
        second_looks.append(layers[0][0][0].dtype), scored(obs, *layers))[1])
    for margin in (np.inf, 0.0):
        monkeypatch.setattr(player, "TIE_MARGIN", margin)
        second_looks.clear()
        obs, _ = env.reset(seed=4)
        done, choices = False, 0
        while not done:
            mask = env.action_masks()
            degree = played.greedy(obs, mask)
            assert degree == greedy_degree(model.policy, obs, mask)
            choices += mask.sum() > 1
            obs, _, done, _, _ = env.step(degree)
        assert choices > 20
        assert second_looks.count(np.float64) == (choices if margin else 0)


def test_the_numpy_spill_features_are_torchs():
    rng = np.random.default_rng(3)
    actions = rng.uniform(0, 1, (40, 8)).astype(np.float32)
    actions[::4, 3] = 0.0  # not placeable on an empty cluster
    actions[1::4, 6] = actions[1::4, 3]  # no spill
    actions[2::4, 6] = actions[2::4, 3] * 1.5  # half as many again
    mine = _spill_features(actions)
    assert mine.dtype == np.float32
    assert np.array_equal(mine, spill_features(torch.from_numpy(actions[None]))[0].numpy())


def _played_in_a_process(env: dict, checkpoint: str | None = None) -> dict:
    """``solve --method pac-ml`` on the bundled example in a process of its own: its jobs,
    whether validated, and which of torch, torch-geometric and the sb3s it imported."""
    script = ("import json, sys\n"
              "from pacopt.model.instance import load_instance\n"
              "from pacopt.solvers.api import solve\n"
              f"solution = solve(load_instance({str(EXAMPLES / 'bundled.json')!r}), 'pac-ml',"
              f" checkpoint={checkpoint!r})\n"
              "print(json.dumps({'jobs': [[j.degree, j.blocks, j.start_ms] for j in solution.jobs],"
              " 'validated': solution.validated, 'imported': sorted(m for m in"
              " ('torch', 'torch_geometric', 'stable_baselines3', 'sb3_contrib')"
              " if m in sys.modules)}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_later_process_plays_without_torch(env, tmp_path):
    """``solve --method pac-ml --checkpoint`` on the bundled example with a checkpoint of no
    shipped export: the first process compiles it into the cache and embeds the example's
    graphs; the next plays it from there without importing torch, torch-geometric or
    stable-baselines3, and decides every job alike. The shipped agents play from their shipped
    exports (``tests/test_extras.py``): without torch from the first process on."""
    _saved(env, tmp_path / "agent.zip", seed=5, spill=True, degree_features=True)
    cache = {**os.environ, "PACOPT_CACHE_DIR": str(tmp_path / "cache")}
    first, second = (_played_in_a_process(cache, str(tmp_path / "agent.zip")) for _ in range(2))
    assert first["validated"] and second["validated"]
    assert first["jobs"] == second["jobs"]
    assert "torch_geometric" in first["imported"]
    assert second["imported"] == []
    assert list((tmp_path / "cache" / "agents").glob("*.pt"))
    shipped = _played_in_a_process({**os.environ, "PACOPT_CACHE_DIR": str(tmp_path / "other")})
    assert shipped["validated"] and shipped["imported"] == []


def test_a_shipped_export_decides_as_the_compiled_network(env, cache, monkeypatch):
    """A shipped checkpoint played from its shipped export and from the cache's export (the
    compiled network, its numpy head and the embeddings it computes) decides every job of an
    episode alike."""
    from pacopt.learned import player
    from pacopt.learned.agent import CHECKPOINT_DIR

    path = str(CHECKPOINT_DIR / "general-ddls.zip")
    shipped = load_player.__wrapped__(path, load_checkpoint)
    assert shipped.head is not None and shipped.head.export._module is None  # no torch yet
    monkeypatch.setattr(player, "read_shipped_export", lambda path: None)
    compiled = load_player.__wrapped__(path, load_checkpoint)
    obs, _ = env.reset(seed=3)
    done, decisions = False, 0
    while not done:
        mask = env.action_masks()
        degree = compiled.greedy(obs, mask)
        assert shipped.greedy(obs, mask) == degree
        decisions += mask.sum() > 1
        obs, _, done, _, _ = env.step(degree)
    assert decisions > 20


def _unembedded(shipped) -> None:
    """Forget the graph embeddings of ``shipped``'s export: each graph is then new to it."""
    shipped.head.export.stored.clear()
    shipped.head.export.embeddings.clear()


def test_a_graph_new_to_a_shipped_export_is_embedded_by_its_shipped_network(env, cache,
                                                                            monkeypatch):
    """A graph a shipped export does not embed, in a fresh cache: the compiled network
    shipped in the export embeds it (no checkpoint loaded, nothing compiled into the cache),
    and play decides as with the network compiled from the checkpoint."""
    from pacopt.learned import player
    from pacopt.learned.agent import CHECKPOINT_DIR

    path = str(CHECKPOINT_DIR / "general-ddls.zip")
    shipped = load_player.__wrapped__(path, load_checkpoint)
    _unembedded(shipped)
    obs, _ = env.reset(seed=3)
    mask = env.action_masks()
    assert mask.sum() > 1
    with monkeypatch.context() as patched:
        patched.setattr(player, "_export", lambda *args: pytest.fail("checkpoint loaded"))
        degree = shipped.greedy(obs, mask)
    assert shipped.head.export._module is not None and not any(cache.glob("*.pt"))
    monkeypatch.setattr(player, "read_shipped_export", lambda path: None)
    assert load_player.__wrapped__(path, load_checkpoint).greedy(obs, mask) == degree


def test_a_shipped_export_made_by_other_versions_compiles_the_network_for_a_new_graph(
        env, cache, monkeypatch):
    """A shipped export whose compiled network other torch versions made: a graph it does not
    embed, in a fresh cache, compiles the network from the checkpoint, which decides as
    always."""
    from pacopt.learned import player
    from pacopt.learned.agent import CHECKPOINT_DIR

    path = str(CHECKPOINT_DIR / "general-ddls.zip")
    with monkeypatch.context() as patched:
        patched.setattr(player, "_runtime", lambda: "torch 0.0")
        shipped = load_player.__wrapped__(path, load_checkpoint)
    assert shipped.head.export._compiled is None
    _unembedded(shipped)
    obs, _ = env.reset(seed=3)
    mask = env.action_masks()
    assert not any(cache.glob("*.pt")) and mask.sum() > 1
    degree = shipped.greedy(obs, mask)
    assert any(cache.glob("*.pt"))
    monkeypatch.setattr(player, "read_shipped_export", lambda path: None)
    assert load_player.__wrapped__(path, load_checkpoint).greedy(obs, mask) == degree


def test_a_damaged_export_is_made_again_and_a_changed_checkpoint_gets_its_own(env, tmp_path,
                                                                             cache):
    path = tmp_path / "agent.zip"
    _saved(env, path, seed=6)
    obs, _ = env.reset(seed=1)
    degree = load_player.__wrapped__(str(path), load_checkpoint).greedy(obs, env.action_masks())
    damaged = sorted(cache.glob("*.npz"))  # the head and the graph's embedding
    assert len(damaged) == 2
    for file in damaged:  # cut short: read as missing, and made again
        file.write_bytes(file.read_bytes()[:-40])
    player = load_player.__wrapped__(str(path), load_checkpoint)
    assert player.head is not None and player.greedy(obs, env.action_masks()) == degree
    (export,) = cache.glob("*.pt")
    export.write_bytes(b"not a TorchScript archive")
    player = load_player.__wrapped__(str(path), load_checkpoint)
    obs, _ = env.reset(seed=1)
    assert player.logits(obs).shape == (env.action_space.n,)
    _quietly(torch.jit.load, str(export))  # written whole again
    before = _key(str(path))
    set_metadata(path, {"format": 2, "recipe": "changed"})
    assert _key(str(path)) != before
    load_player.__wrapped__(str(path), load_checkpoint)
    assert len(list(cache.glob("*.pt"))) == 2


def test_a_cache_that_cannot_be_written_still_plays(env, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("the cache directory cannot be made here")
    monkeypatch.setenv("PACOPT_CACHE_DIR", str(blocker))
    _saved(env, tmp_path / "agent.zip", seed=7)
    player = load_player.__wrapped__(str(tmp_path / "agent.zip"), load_checkpoint)
    obs, _ = env.reset(seed=2)
    assert player.greedy(obs, np.ones(env.action_space.n, dtype=bool)) in range(env.action_space.n)


def test_the_cache_keeps_the_newest_exports_only(env, tmp_path, cache, monkeypatch):
    from pacopt.learned import player

    monkeypatch.setattr(player, "MAX_EXPORTS", 2)
    for seed in range(3):
        _saved(env, tmp_path / f"agent{seed}.zip", seed=seed)
        load_player.__wrapped__(str(tmp_path / f"agent{seed}.zip"), load_checkpoint)
    kept = {f.name for f in cache.glob("*.pt")}
    assert kept == {f"{_key(str(tmp_path / f'agent{seed}.zip'))}.pt" for seed in (1, 2)}
