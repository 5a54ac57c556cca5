"""Checkpoint metadata (``pacopt.json``), the format check on load, and ``pacopt train
--recipe``: the shipped checkpoints' metadata, one clear line for another format, a short run's
metadata, the recipes against checkpoints/README.md, and pac-ml's result recording them.

Nothing here trains more than a few hundred steps; the recipe runs replace ``train``."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import zipfile
from dataclasses import asdict, replace
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

import pacopt
from pacopt.cli import pacopt_main, solve_main
from pacopt.infra.errors import InputError
from pacopt.learned.agent import (
    CHECKPOINT_DIR,
    TRACE,
    LearnedPolicy,
    default_checkpoint,
    load_checkpoint,
)
from pacopt.learned.checkpoint_meta import (
    CHECKPOINT_FORMAT,
    KEYS,
    MEMBER,
    SUMMARY_KEYS,
    format_of,
    read_metadata,
    set_metadata,
    summary,
)
from pacopt.learned.recipes import RECIPES, get_recipe, recipe_flags
from pacopt.learned.train_config import TrainConfig, read_run_state, recorded_overrides
from pacopt.model.simulator import simulate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SHIPPED = sorted(CHECKPOINT_DIR.glob("*.zip"))


def small_bundled(path: Path, num_jobs: int = 40) -> Path:
    """The bundled example with fewer jobs (a pac-ml episode in about a second)."""
    data = json.loads((EXAMPLES / "bundled.json").read_text())
    data["workload"]["num_jobs"] = num_jobs
    data["graphs"] = {name: {"file": str(EXAMPLES / graph["file"])}
                      for name, graph in data["graphs"].items()}
    path.write_text(json.dumps(data))
    return path


def _copy_with(tmp_path: Path, name: str, **changes) -> Path:
    """A copy of the shipped C-ddls checkpoint whose metadata has ``changes``."""
    path = tmp_path / name
    shutil.copy(CHECKPOINT_DIR / "C-ddls.zip", path)
    set_metadata(path, {**read_metadata(path), **changes})
    return path


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_checkpoints_have_complete_metadata(path):
    meta = read_metadata(path)
    assert meta is not None and tuple(meta) == KEYS
    assert meta["format"] == format_of(meta["config"])  # 1: the table of degrees
    assert re.fullmatch(r"\d+\.\d+\.\d+ \(git [0-9a-f]{7,}(, modified)?\)", meta["code_version"])
    assert meta["recipe"] == path.stem and meta["recipe"] in RECIPES
    assert isinstance(meta["recipe_overrides"], dict)
    config = TrainConfig(**recorded_overrides(meta["config"], str(path)))  # each field typed
    assert meta["seeds"] == {"training": config.seed,
                             "validation": list(config.validation_seeds)}
    assert isinstance(meta["rounds"], int) and meta["rounds"] >= 1
    assert meta["timesteps"] == 0  # the README: the imitation policy was kept
    assert datetime.fromisoformat(meta["trained_at"]).utcoffset().total_seconds() == 0
    curve = pd.read_csv(path.with_suffix(".curve.csv"))
    validation = curve[curve["kind"] == "validation"]
    assert meta["validation"] == validation["blocking_rate"].min()
    assert validation.loc[validation["blocking_rate"].idxmin(), "steps"] == 0
    # the recipe, with the flags given beside it, is the recorded config
    recipe = get_recipe(meta["recipe"]).config(recorded_overrides(meta["recipe_overrides"], ""),
                                               out="runs")
    recorded = {k: v for k, v in asdict(config).items() if k in meta["config"]}
    assert same_init({k: v for k, v in asdict(recipe).items() if k in meta["config"]}) == \
        same_init(recorded)


def same_init(settings: dict) -> dict:
    """``settings`` with ``init`` as an absolute path: a recipe's ``{shipped}`` is the shipped
    folder's absolute path, a run records the path it was given (from the repository's root)."""
    if settings.get("init"):
        return {**settings, "init": str(Path(settings["init"]).resolve())}
    return settings


def test_another_format_fails_in_one_line_another_code_version_loads(tmp_path, capsys):
    instance = small_bundled(tmp_path / "small.json")
    newer = _copy_with(tmp_path, "newer.zip", format=CHECKPOINT_FORMAT + 1,
                       code_version="9.0.0 (git abcdef0)")
    code = solve_main([str(instance), "--method", "pac-ml", "--checkpoint", str(newer),
                       "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "Traceback" not in err
    assert (f"checkpoint '{newer}' was written by pacopt 9.0.0 (git abcdef0) in checkpoint "
            f"format {CHECKPOINT_FORMAT + 1}; this pacopt reads formats 1, 2") in err
    assert "pacopt train --recipe C-ddls" in err and not (tmp_path / "r.json").exists()
    # the same format written by other code loads; so does a file without metadata
    other = _copy_with(tmp_path, "other.zip", code_version="0.0.1 (git 1234567)")
    LearnedPolicy(checkpoint=other)
    bare = tmp_path / "bare.zip"
    with zipfile.ZipFile(CHECKPOINT_DIR / "C-ddls.zip") as source, \
            zipfile.ZipFile(bare, "w") as target:
        for info in source.infolist():
            if info.filename != MEMBER:
                target.writestr(info, source.read(info))
    assert read_metadata(bare) is None
    LearnedPolicy(checkpoint=bare)
    # --resume from a checkpoint of another format: the same line, before any work
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(newer, run / "latest.zip")
    (run / "run.json").write_text(json.dumps({"config": {}, "seconds": 0, "best_score": None}))
    with pytest.raises(InputError, match=re.escape(
            f"format {CHECKPOINT_FORMAT + 1}; this pacopt reads formats 1, 2")):
        read_run_state(run)


def test_a_short_run_writes_its_metadata(tmp_path, pipedream_env):
    from pacopt.learned.train import train

    config = TrainConfig(distributions=("C",), num_jobs=30, envs=1, max_steps=64, n_steps=64,
                         batch_size=32, minutes=1, teacher="tuned", warm_episodes=1,
                         dagger_rounds=0, warm_epochs=1, validation_seeds=(9000,))
    out = tmp_path / "run"
    best = train(config, out, log=lambda _: None, recipe="C-ddls",
                 overrides={"envs": 1})
    state = read_run_state(out)
    latest = read_metadata(out / "latest.zip")
    assert tuple(latest) == KEYS and latest["format"] == CHECKPOINT_FORMAT
    assert latest["recipe"] == "C-ddls" and latest["recipe_overrides"] == {"envs": 1}
    assert latest["config"] == state["config"] and state["recipe"] == "C-ddls"
    assert latest["seeds"] == {"training": 0, "validation": [9000]}
    assert latest["rounds"] == 1 == state["rounds"]  # the teacher's round
    assert latest["timesteps"] == state["steps"] >= 64
    assert latest["validation"] == state["best_score"]
    assert latest["code_version"].split(" ")[0] == pacopt.__version__
    datetime.fromisoformat(latest["trained_at"])
    if best.name == "best.zip":  # the imitation policy, or a PPO step that beat it
        meta = read_metadata(best)
        assert meta["rounds"] == 1 and meta["recipe"] == "C-ddls"
    load_checkpoint(str(best.resolve()))


def test_unknown_recipe_is_one_line_exit_2(tmp_path, capsys):
    assert pacopt_main(["train", "--recipe", "nope", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unknown recipe 'nope'" in err
    assert all(name in err for name in RECIPES)
    assert not (tmp_path / "r").exists()
    assert pacopt_main(["train", "--list-recipes"]) == 0
    listing = capsys.readouterr().out
    assert all(f"{name}: " in listing for name in RECIPES)


def _readme_commands() -> dict[str, list[str]]:
    """checkpoints/README.md's explicit ``pacopt train`` commands, by their ``--out`` folder."""
    text = (CHECKPOINT_DIR / "README.md").read_text().replace("\\\n", " ")
    commands = {}
    for line in text.splitlines():
        if line.startswith("pacopt train --dist"):
            argv = shlex.split(line)[2:]
            commands[Path(argv[argv.index("--out") + 1]).name] = argv
    return commands


@pytest.fixture
def trained(monkeypatch):
    """``train`` replaced: records each call's config, folder and keywords."""
    import pacopt.learned.train as train_module

    calls = []

    def fake(config, out, resume=False, log=print, recipe=None, overrides=None, ray=None,
             label_cache=None):
        calls.append({"config": config, "out": Path(out), "resume": resume, "recipe": recipe,
                      "overrides": overrides, "ray": ray, "label_cache": label_cache})
        return Path(out) / "best.zip"

    monkeypatch.setattr(train_module, "train", fake)
    return calls


@pytest.mark.parametrize("name", ["A-ddls", "C-ddls", "A-ddls-table", "C-ddls-table"])
def test_a_recipe_is_its_readme_command(name, tmp_path, trained):
    assert pacopt_main(["train", "--recipe", name, "--out", str(tmp_path / "r")]) == 0
    readme = _readme_commands()[name]
    assert pacopt_main(["train", *readme[:readme.index("--out")],
                        "--out", str(tmp_path / "readme")]) == 0
    (recipe, by_hand) = trained
    assert recipe["config"] == by_hand["config"]
    assert recipe["recipe"] == name and recipe["overrides"] == {}
    assert recipe_flags(RECIPES[name].settings)  # every setting is a flag


def test_flags_beside_a_recipe_override_it_and_are_recorded(tmp_path, trained):
    assert pacopt_main(["train", "--recipe", "A-ddls", "--minutes", "5", "--seed", "3",
                        "--out", str(tmp_path / "r")]) == 0
    (call,) = trained
    assert call["config"].minutes == 5 and call["config"].seed == 3
    assert call["config"].warm_episodes == 24 and call["config"].spill is True
    assert call["overrides"] == {"minutes": 5.0, "seed": 3}


def test_a_recipe_with_steps_runs_them_into_subfolders_and_resumes(tmp_path, trained,
                                                                    monkeypatch, capsys):
    out = tmp_path / "general"
    import pacopt.learned.train as train_module

    fake = train_module.train

    def stop_at_c(config, folder, **kwargs):
        if Path(folder).name == "C-ddls-table":
            raise KeyboardInterrupt
        return fake(config, folder, **kwargs)

    monkeypatch.setattr(train_module, "train", stop_at_c)
    recipe = ["train", "--recipe", "general-ddls-distilled", "--out", str(out)]
    assert pacopt_main(recipe) == 130
    state = json.loads((out / "recipe.json").read_text())
    assert state == {"recipe": "general-ddls-distilled", "overrides": {},
                     "finished": ["A-ddls-table", "B-ddls"]}
    monkeypatch.setattr(train_module, "train", fake)
    assert pacopt_main(recipe) == 2  # no --resume
    labels = str(tmp_path / "labels")  # not a setting: given on --resume, reaches each step
    assert pacopt_main(["train", "--resume", "--minutes", "7", "--out", str(out),
                        "--label-cache", labels]) == 0
    assert [c["label_cache"] for c in trained] == [None, None, labels, labels, labels]
    assert "labels" not in (out / "recipe.json").read_text()
    assert [c["out"].name for c in trained] == ["A-ddls-table", "B-ddls", "C-ddls-table",
                                                "D-ddls", "general-ddls-distilled"]
    assert all(c["out"].parent == out for c in trained)
    assert [c["config"].minutes for c in trained[2:]] == [7, 7, 7]
    general = trained[-1]
    assert general["recipe"] == "general-ddls-distilled"
    assert general["config"].teacher == ",".join(
        f"{d}=agent:{out}/{d}-ddls{'-table' if d in 'AC' else ''}/best.zip" for d in "ABCD")
    assert general["config"].distributions == ("A", "B", "C", "D")
    finished = json.loads((out / "recipe.json").read_text())["finished"]
    assert finished[-1] == "general-ddls-distilled"
    assert f"best checkpoint: {out / 'general-ddls-distilled' / 'best.zip'}" in capsys.readouterr().out


def test_a_step_may_start_from_the_checkpoint_an_earlier_step_writes(tmp_path, trained):
    out = tmp_path / "b"
    assert pacopt_main(["train", "--recipe", "B-ddls-best-fit", "--out", str(out)]) == 0
    assert [c["out"].name for c in trained] == ["general-ddls-best-fit", "B-ddls-best-fit"]
    assert trained[0]["config"].init is None
    assert trained[1]["config"].init == str(out / "general-ddls-best-fit" / "best.zip")
    # given beside the recipe, an --init that does not exist is still one line, before any work
    assert pacopt_main(["train", "--recipe", "B-ddls-best-fit", "--init", str(tmp_path / "no"),
                        "--out", str(tmp_path / "c")]) == 2
    assert len(trained) == 2


def test_pac_ml_json_result_records_the_checkpoints_it_played(tmp_path, capsys):
    instance = small_bundled(tmp_path / "small.json")
    assert solve_main([str(instance), "--method", "pac-ml", "--json", "--quiet",
                       "--out", str(tmp_path / "r.json")]) == 0
    result = json.loads(capsys.readouterr().out)
    played = result["metrics"]["checkpoints"]
    assert played and set(played) <= {p.name for p in SHIPPED}
    for name, meta in played.items():
        assert tuple(meta) == SUMMARY_KEYS and "config" not in meta
        assert meta == summary(read_metadata(CHECKPOINT_DIR / name))
    assert result["method"].endswith(".zip)")


def test_a_placer_without_its_own_checkpoint_plays_its_stand_in_or_fails_in_one_line(
        tmp_path, monkeypatch):
    from pacopt.learned import agent

    monkeypatch.setattr(agent, "CHECKPOINT_DIR", tmp_path)
    (tmp_path / "general-physical-compact.zip").write_bytes(b"")
    assert agent.default_checkpoint("physical", "A", "compact").name == \
        "general-physical-compact.zip"
    with pytest.raises(InputError, match=r"\(general-ddls\.zip\)"):
        agent.default_checkpoint("ddls", None, "best-fit")
    # best fit has a stand-in (the compact agent); first fit has none
    assert agent.default_checkpoint("physical", "A", "best-fit").name == \
        "general-physical-compact.zip"
    with pytest.raises(InputError) as err:
        agent.default_checkpoint("physical", "A", "first-fit")
    assert "under placer 'first-fit' (shipped for --placement compact)" in str(err.value)
    # an agent trained for the preset and placer plays there; under best fit the stand-in comes
    # before the preset's first-fit agent
    (tmp_path / "general-physical.zip").write_bytes(b"")
    assert agent.default_checkpoint("physical", "C", "first-fit").name == "general-physical.zip"
    assert agent.default_checkpoint("physical", "C", "best-fit").name == \
        "general-physical-compact.zip"
    monkeypatch.setattr(agent, "STAND_INS", {})
    assert agent.default_checkpoint("physical", "C", "best-fit").name == "general-physical.zip"


def test_trace_jobs_play_a_trace_agent_under_every_preset_and_placer():
    for preset, placer, name in [("ddls", "first-fit", "trace-ddls.zip"),
                                 ("ddls", "best-fit", "trace-ddls.zip"),
                                 ("physical", "first-fit", "trace-physical-compact.zip"),
                                 ("physical", "best-fit", "trace-physical-compact.zip"),
                                 ("physical", "compact", "trace-physical-compact.zip")]:
        assert default_checkpoint(preset, TRACE, placer).name == name
    # the paper's distributions keep their order: the placer's general agent before first fit's
    assert default_checkpoint("ddls", None, "best-fit").name == "general-ddls-best-fit.zip"


def test_a_trace_agent_trained_for_the_placer_comes_before_the_stand_in(tmp_path, monkeypatch):
    from pacopt.learned import agent

    monkeypatch.setattr(agent, "CHECKPOINT_DIR", tmp_path)
    for name in ("trace-ddls.zip", "trace-ddls-best-fit.zip", "general-ddls-best-fit.zip"):
        (tmp_path / name).write_bytes(b"")
    assert agent.default_checkpoint("ddls", TRACE, "best-fit").name == "trace-ddls-best-fit.zip"
    (tmp_path / "trace-ddls-best-fit.zip").unlink()
    assert agent.default_checkpoint("ddls", TRACE, "best-fit").name == "trace-ddls.zip"
    # the preset's own trace agent stands in before the ddls one; without it, the ddls one
    (tmp_path / "trace-physical-compact.zip").write_bytes(b"")
    assert agent.default_checkpoint("physical", TRACE, "first-fit").name == \
        "trace-physical-compact.zip"
    (tmp_path / "trace-physical-compact.zip").unlink()
    assert agent.default_checkpoint("physical", TRACE, "first-fit").name == "trace-ddls.zip"


def test_a_cluster_shape_s_fine_tune_plays_every_distribution_there_and_nowhere_else(
        tmp_path, monkeypatch):
    from pacopt.learned import agent

    monkeypatch.setattr(agent, "CHECKPOINT_DIR", tmp_path)
    for name in ("general-ddls-best-fit.zip", "B-ddls-best-fit.zip", "trace-ddls.zip",
                 "8x8x4-ddls-best-fit.zip"):
        (tmp_path / name).write_bytes(b"")
    for dist in (None, "A", "B"):
        assert agent.default_checkpoint("ddls", dist, "best-fit", (8, 8, 4)).name == \
            "8x8x4-ddls-best-fit.zip"
    # the paper's cluster, another shape, a trace's jobs and another placer keep theirs
    assert agent.default_checkpoint("ddls", "B", "best-fit", (4, 4, 2)).name == \
        "B-ddls-best-fit.zip"
    # a shape without its own: the nearest by server count, if nearer than the paper's
    assert agent.default_checkpoint("ddls", "A", "best-fit", (16, 16, 4)).name == \
        "8x8x4-ddls-best-fit.zip"
    assert agent.default_checkpoint("ddls", None, "best-fit", (4, 4, 4)).name == \
        "general-ddls-best-fit.zip"
    assert agent.default_checkpoint("ddls", TRACE, "best-fit", (8, 8, 4)).name == \
        "trace-ddls.zip"
    (tmp_path / "general-ddls.zip").write_bytes(b"")
    assert agent.default_checkpoint("ddls", None, "first-fit", (8, 8, 4)).name == \
        "general-ddls.zip"


@pytest.mark.parametrize("placer", ["first-fit", "best-fit"])
def test_pac_ml_plays_the_physical_preset_under_every_placer(tmp_path, capsys, placer):
    instance = small_bundled(tmp_path / "small.json")
    data = json.loads(instance.read_text())
    data["model"]["preset"] = "physical"
    instance.write_text(json.dumps(data))
    assert solve_main([str(instance), "--method", "pac-ml", "--placement", placer, "--json",
                       "--quiet", "--out", str(tmp_path / "r.json")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["validated"]
    # one general agent, whichever is shipped for physical and the placer (no fine-tune is)
    assert set(result["metrics"]["checkpoints"]) == {default_checkpoint("physical", None,
                                                                        placer).name}


def test_a_fine_tune_plays_only_the_cluster_it_was_trained_on(tmp_path, pipedream_env):
    """The shipped fine-tunes (degree features, trained and chosen on 4x4x2) could play a larger
    cluster, but online `pac-ml` leaves their distributions to the general agent there, with a
    warning; on their own cluster they play. Metadata naming another cluster counts as such."""
    from pacopt.infra.errors import PacoptWarning
    from pacopt.learned import agent
    from pacopt.learned.player import load_player
    from pacopt.model.instance import instance_from_dict
    from pacopt.model.paper_workload import on_cluster, paper_instance_dict

    paper = instance_from_dict(paper_instance_dict("A", 20000, 20))
    assert not LearnedPolicy(paper)._left_to_general[(paper.cluster, paper.model)]
    larger = instance_from_dict(on_cluster(paper_instance_dict("A", 20000, 20), (8, 4, 2)))
    with pytest.warns(PacoptWarning, match="fine-tune of C was not trained for this cluster"):
        policy = LearnedPolicy(larger)
    assert policy._left_to_general[(larger.cluster, larger.model)] == {"C", TRACE}
    # a trace's jobs there: the general agent plays them, with one warning
    traced = replace(larger, jobs=[replace(job, requested_degree=2) for job in larger.jobs])
    with pytest.warns(PacoptWarning, match="trace agent trace-ddls.zip was not trained") as seen:
        played = simulate(traced, policy, seed=0)
    assert sum("trace agent" in str(w.message) for w in seen) == 1
    assert list(played.metrics["checkpoints"]) == ["general-ddls.zip"]
    elsewhere = tmp_path / "C-ddls.zip"  # the C fine-tune, as if trained on 8x4x2
    shutil.copy(CHECKPOINT_DIR / "C-ddls.zip", elsewhere)
    meta = read_metadata(elsewhere)
    set_metadata(elsewhere, {**meta, "config": {**meta["config"], "cluster": "8x4x2"}})
    observer = policy._observers[(larger.cluster, larger.model)]
    network = load_player(str(elsewhere), load_checkpoint)
    assert agent._trained_for(observer, network, str(elsewhere), larger.cluster)
    assert not agent._trained_for(observer, network, str(CHECKPOINT_DIR / "C-ddls.zip"),
                                  larger.cluster)


def test_a_recipe_records_the_shipped_folder_from_the_repository_root(tmp_path, monkeypatch):
    """``{shipped}`` becomes the folder from the working directory when it lies under it (so a
    shipped checkpoint's metadata holds no machine's path, and checks out anywhere), else the
    absolute folder."""
    recipe = get_recipe("8x8x4-ddls-best-fit")
    monkeypatch.chdir(CHECKPOINT_DIR.parents[2])
    assert recipe.config().init == "pacopt/learned/checkpoints/general-ddls-best-fit.zip"
    monkeypatch.chdir(tmp_path)
    init = Path(recipe.config().init)
    assert init.is_absolute() and init == CHECKPOINT_DIR / "general-ddls-best-fit.zip"
