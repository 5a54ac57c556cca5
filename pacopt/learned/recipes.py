"""Named training recipes: ``pacopt train --recipe NAME`` trains with the settings a shipped
checkpoint was trained with (``pacopt/learned/checkpoints/README.md`` says how each went).

A recipe is a set of :class:`~pacopt.learned.train_config.TrainConfig` settings (the fields
that are ``pacopt train`` flags; :func:`recipe_flags` writes them as the command line) and,
for a checkpoint built from others, the recipes run before it (:attr:`Recipe.steps`). The
settings are defaults: flags given on the command line beside ``--recipe`` override them, and
the run records both (``run.json`` and each checkpoint's metadata,
:mod:`pacopt.learned.checkpoint_meta`). A recipe with steps runs each step, then itself, into
a subfolder of ``--out`` named after it, each a normal resumable run (``pacopt train --resume
--out DIR`` goes on with the first unfinished one); ``{out}`` in a setting is that ``--out``,
``{shipped}`` the shipped checkpoints' folder (a fine-tune from a shipped agent).

Kept free of torch, as :mod:`pacopt.learned.train_config` is, so that the command checks its
flags before importing it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, fields
from pathlib import Path

from pacopt.infra.errors import InputError
from pacopt.learned.checkpoint_meta import CHECKPOINT_DIR
from pacopt.learned.train_config import TrainConfig
from pacopt.model.paper_workload import PAPER_DISTRIBUTIONS


@dataclass(frozen=True)
class Recipe:
    """One named recipe (module doc)."""

    name: str
    summary: str
    #: TrainConfig field -> value (the values the flags give: ``distributions`` a tuple,
    #: ``spill`` a bool, ``teacher`` "" for none); ``{out}`` in a text is ``--out``,
    #: ``{shipped}`` the shipped checkpoints' folder. Recipes
    #: of checkpoints trained with the table of degrees say ``degree_features: False``.
    settings: dict = field(default_factory=dict)
    #: Recipes run first, each into ``--out``/<its name>; this one then runs into
    #: ``--out``/<its name> too. Empty: this recipe's run goes into ``--out`` itself.
    steps: tuple[str, ...] = ()

    def config(self, given: dict | None = None, out: str | Path = ".") -> TrainConfig:
        """The run's settings: this recipe's, overridden by ``given`` (TrainConfig field ->
        value, as given on the command line), ``{out}`` replaced by ``out`` and ``{shipped}``
        by the shipped checkpoints' folder."""
        settings = {name: value.replace("{out}", str(out)).replace("{shipped}",
                                                                    str(shipped_folder()))
                    if isinstance(value, str) else value for name, value in self.settings.items()}
        return TrainConfig(**{**settings, **(given or {})})


def shipped_folder() -> Path:
    """The shipped checkpoints' folder as a run records it: from the working directory when it
    lies under it (from the repository's root, ``pacopt/learned/checkpoints``, as a command
    given that path records it, so a checkpoint's metadata holds no machine's path), else
    absolute."""
    try:
        return CHECKPOINT_DIR.relative_to(Path.cwd().resolve())
    except ValueError:
        return CHECKPOINT_DIR


_ROLLOUT_STUDENT = {"teacher": "rollout", "warm_epochs": 32, "regret_weight": 4.0, "envs": 2,
                    "minutes": 20.0}
#: The general agents' recipe (one network for A-D, any placer): imitation of the rollout
#: teacher over the placer's ``tuned``, 8 episodes of each distribution and a DAgger round of 2.
_GENERAL = {"warm_episodes": 8, "dagger_rounds": 1, "dagger_episodes": 2, "max_steps": 1,
            **_ROLLOUT_STUDENT, "minutes": 40.0}
#: The best-fit general agents' recipe since 2026-11-29: the teacher samples 32 streams.
_BEST_FIT_32 = {"placement": "best-fit", **_GENERAL, "rollout_futures": 32, "minutes": 75.0}


#: The ITP clusters with windows outside those ``docs/traces.md`` measures on (01 and 05 have
#: none: ``trace-ddls`` never sees them).
TRACE_TRAINING = "cluster02,cluster03,cluster04,cluster07,cluster08,cluster09"
# the trace agents' recipe: the hindsight teacher over min-feasible, eight DAgger rounds
_TRACE = {"trace": TRACE_TRAINING, "teacher": "lookahead:min-feasible", "warm_episodes": 8,
          "dagger_rounds": 8, "dagger_episodes": 4, "warm_epochs": 32, "regret_weight": 4.0,
          "max_steps": 1, "envs": 2, "minutes": 100.0}


def _distilled_teacher(dist: str, episodes: int) -> Recipe:
    """The recipe ``{dist}-ddls`` of a per-distribution teacher that ``general-ddls-distilled``
    distils (not shipped): the rollout teacher on ``episodes`` episodes of ``dist``, without
    spill or degree features."""
    return Recipe(f"{dist}-ddls", f"a teacher of general-ddls-distilled, not shipped: the "
                  f"beta-{dist} fine-tune (rollout teacher, {episodes} episodes and a "
                  "DAgger round, no spill features; 20 min)",
                  {"distributions": (dist,), "teacher": "rollout", "warm_episodes": episodes,
                   "spill": False, "degree_features": False, "envs": 1, "minutes": 20.0})


#: The recipes by name: those of the shipped checkpoints (``general-ddls``,
#: ``general-ddls-best-fit``, ``general-physical``, ``general-physical-compact``, ``C-ddls``,
#: ``B-ddls-best-fit``, ``trace-ddls``, ``trace-physical-compact``, ``8x8x4-ddls-best-fit``);
#: variants that validated no better and are not shipped (``general-ddls-best-fit-8``,
#: ``general-ddls-best-fit-128``, ``general-ddls-32``, ``A-ddls``); a general agent distilled
#: from four per-distribution teachers (``general-ddls-distilled``, and its teachers
#: ``A-ddls-table``, ``B-ddls``, ``C-ddls-table``, ``D-ddls``); and a policy-iteration run whose
#: curve ships (``policy-iteration-A``). What each measured: ``docs/experiments.md``.
RECIPES: dict[str, Recipe] = {r.name: r for r in [
    Recipe("A-ddls", "a beta-A fine-tune, not shipped (the shipped general agent validates "
           "lower on A): imitation of the rollout teacher on 24 episodes, soft "
           "targets and the regret term; degree features (20 min)",
           {"distributions": ("A",), "warm_episodes": 24, "dagger_rounds": 0,
            **_ROLLOUT_STUDENT}),
    Recipe("A-ddls-table", "a teacher of general-ddls-distilled, not shipped: "
           "the A-ddls recipe with the table of degrees and without spill "
           "features (20 min)",
           {"distributions": ("A",), "warm_episodes": 24, "dagger_rounds": 0, "spill": False,
            "degree_features": False, **_ROLLOUT_STUDENT}),
    _distilled_teacher("B", 8),
    Recipe("C-ddls", "the shipped beta-C fine-tune: the A recipe on 30 rollout-teacher "
           "episodes and one DAgger round of 10; degree features (20 min)",
           {"distributions": ("C",), "warm_episodes": 30, "dagger_rounds": 1,
            "dagger_episodes": 10, **_ROLLOUT_STUDENT}),
    Recipe("C-ddls-table", "a teacher of general-ddls-distilled, not shipped: "
           "the C-ddls recipe with the table of degrees (20 min)",
           {"distributions": ("C",), "warm_episodes": 30, "dagger_rounds": 1,
            "dagger_episodes": 10, "degree_features": False, **_ROLLOUT_STUDENT}),
    _distilled_teacher("D", 7),
    Recipe("general-ddls", "the shipped agent under first fit: imitation of the rollout teacher "
           "over tuned, 8 episodes of each distribution, soft targets and the regret term "
           "fitted for 64 epochs, a DAgger round, no PPO; degree features (17 min to its "
           "checkpoint)", {**_GENERAL, "warm_epochs": 64}),
    Recipe("general-ddls-32", "a variant, not shipped: the "
           "general-ddls recipe fitted for 32 epochs (24 min to its checkpoint)", dict(_GENERAL)),
    Recipe("general-ddls-distilled", "not shipped: "
           "a first-fit general agent that trains the four per-distribution recipes, then "
           "distils them (4 episodes each and a DAgger round; about 92 min in all)",
           {"teacher": "A=agent:{out}/A-ddls-table/best.zip,B=agent:{out}/B-ddls/best.zip,"
                       "C=agent:{out}/C-ddls-table/best.zip,D=agent:{out}/D-ddls/best.zip",
            "warm_episodes": 4, "envs": 2, "degree_features": False, "minutes": 12.0},
           steps=("A-ddls-table", "B-ddls", "C-ddls-table", "D-ddls")),
    Recipe("general-ddls-best-fit", "the shipped agent under best fit: imitation of the "
           "rollout teacher over best-fit tuned with 32 sampled streams, 8 episodes of each "
           "distribution, soft targets and the regret term fitted for 64 epochs, a DAgger "
           "round, no PPO; degree features (about 44 min to its checkpoint, 61 in all)",
           {**_BEST_FIT_32, "warm_epochs": 64}),
    Recipe("B-ddls-best-fit", "the shipped beta-B fine-tune under best fit: the shipped "
           "best-fit agent (its recipe runs first) fitted on from its weights for 64 epochs to "
           "the 32-stream rollout teacher on 16 B episodes and a DAgger round of 4, no PPO "
           "(about 61 + 25 min)",
           {**_BEST_FIT_32, "distributions": ("B",), "init": "{out}/general-ddls-best-fit/best.zip",
            "warm_episodes": 16, "dagger_episodes": 4, "warm_epochs": 64, "minutes": 70.0},
           steps=("general-ddls-best-fit",)),
    Recipe("general-ddls-best-fit-128", "a variant, not shipped: "
           "the general-ddls-best-fit recipe fitted for 128 epochs (about 57 min to "
           "its checkpoint)",
           {**_BEST_FIT_32, "warm_epochs": 128}),
    Recipe("general-ddls-best-fit-8", "a variant, not shipped: the "
           "general-ddls-best-fit recipe with the rollout teacher's 8 streams (24 min to its "
           "checkpoint)", {"placement": "best-fit", **_GENERAL}),
    Recipe("policy-iteration-A", "not a shipped checkpoint: approximate policy iteration from "
           "para-max (beta A, best fit, 200-job episodes, rollouts over the student of 8 "
           "streams x 20 arrivals, each degree's gain lowered by one standard error, each "
           "round fitted to its own labels and going on from the best policy validated so "
           "far), 9 rounds; its curve ships as policy-iteration-A.curve.csv (42 min beside "
           "another run)",
           {"distributions": ("A",), "placement": "best-fit", "num_jobs": 200,
            "teacher": "improve:para-max", "improve_futures": 8, "improve_horizon": 20,
            "improve_keep": 1, "improve_significance": 1.0, "improve_from": "best",
            "warm_episodes": 4, "dagger_rounds": 8, "dagger_episodes": 4, "warm_epochs": 32,
            "regret_weight": 4.0, "max_steps": 1, "minutes": 75.0}),
    Recipe("trace-ddls", "the shipped agent for jobs replayed from the ITP traces (first "
           "fit): imitation of the hindsight rollout teacher over min-feasible on 8 windows of "
           "each of the six training clusters, soft targets and the regret term fitted for 32 "
           "epochs, then eight DAgger rounds of 4 windows of each, no PPO (41 min; needs the "
           "traces)",
           _TRACE),
    Recipe("trace-physical-compact", "the shipped agent for trace jobs under physical (compact, "
           "and a stand-in under best fit and first fit): the trace-ddls recipe under the "
           "physical preset and compact; needs the traces",
           {**_TRACE, "preset": "physical", "placement": "compact"}),
    Recipe("8x8x4-ddls-best-fit", "the shipped agent for larger clusters under best fit "
           "(8x8x4 and the shapes nearer it than 4x4x2): the shipped best-fit agent fitted on "
           "from its weights to the hindsight rollout over best-fit tuned on 8 episodes of each "
           "distribution on 8x8x4, each fork's score less 0.1 job per job's worth of "
           "worker-time it leaves held, soft targets and the regret term fitted for 32 epochs, "
           "then four DAgger rounds of 2, no PPO (20 min to its checkpoint, 36 in all)",
           {"cluster": "8x8x4", "placement": "best-fit",
            "init": "{shipped}/general-ddls-best-fit.zip", "teacher": "lookahead",
            "rollout_terminal_weight": 0.1,
            "warm_episodes": 8, "warm_epochs": 32, "regret_weight": 4.0,
            "dagger_rounds": 4, "dagger_episodes": 2, "max_steps": 1, "envs": 2,
            "minutes": 75.0}),
    Recipe("general-physical", "the general recipe under the physical preset and first fit: "
           "imitation of the rollout teacher over first-fit tuned, 8 episodes of each "
           "distribution and a DAgger round, no PPO; degree features (36 min to its checkpoint)",
           {"preset": "physical", **_GENERAL, "minutes": 90.0}),
    Recipe("general-physical-compact", "the best-fit recipe under the physical preset and "
           "compact, its best placer: imitation of the rollout teacher over compact tuned, 8 "
           "episodes of each distribution and a DAgger round, no PPO; degree features (26 min "
           "to its checkpoint)",
           {"preset": "physical", "placement": "compact", **_GENERAL, "minutes": 90.0}),
]}


def get_recipe(name: str) -> Recipe:
    """The recipe ``name``; an :class:`InputError` line listing the known ones otherwise."""
    if name not in RECIPES:
        raise InputError(f"--recipe: unknown recipe '{name}'; known: {', '.join(RECIPES)} "
                         "(pacopt train --list-recipes)")
    return RECIPES[name]


def recipe_flags(settings: dict) -> list[str]:
    """``settings`` (TrainConfig field -> value) as ``pacopt train`` flags, in the fields'
    order: ``{"distributions": ("A",), "spill": False}`` -> ``["--dist", "A", "--no-spill"]``."""
    options = {f.name: f.metadata["option"] for f in fields(TrainConfig) if "option" in f.metadata}
    flags = []
    for name, option in options.items():
        if name not in settings:
            continue
        value = settings[name]
        if option.switch_off:
            flags += [] if value else [option.flag]
            continue
        if name == "distributions":
            value = "all" if tuple(value) == PAPER_DISTRIBUTIONS else ",".join(value)
        elif name == "teacher" and value == "":
            value = "none"
        elif isinstance(value, float):
            value = f"{value:g}"
        flags += [option.flag, str(value)]
    unknown = sorted(set(settings) - set(options))
    if unknown:
        raise ValueError(f"settings that are no pacopt train flags: {', '.join(unknown)}")
    return flags


def recipe_command(name: str, out: str | None = None) -> str:
    """The ``pacopt train`` command line of recipe ``name``'s own run (its steps aside), with
    ``--out`` if given."""
    flags = recipe_flags(get_recipe(name).settings)
    return " ".join(["pacopt train", *map(shlex.quote, flags),
                     *(["--out", shlex.quote(out)] if out else [])])


def recipe_lines() -> list[str]:
    """What ``pacopt train --list-recipes`` prints: each recipe's name, summary, steps and
    command line."""
    lines = []
    for recipe in RECIPES.values():
        lines.append(f"{recipe.name}: {recipe.summary}")
        if recipe.steps:
            lines.append(f"    steps: {', '.join(recipe.steps)}, then {recipe.name}, each into "
                         "--out/<step>")
        lines.append(f"    {recipe_command(recipe.name)}")
    return lines
