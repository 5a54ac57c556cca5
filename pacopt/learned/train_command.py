"""``pacopt train``: train (or resume training) the learned partitioner on the paper workload.

The options are :class:`~pacopt.learned.train_config.TrainConfig`'s fields that carry an
:class:`~pacopt.learned.train_config.Option` (flag, help, range): their defaults and range checks live
there; this module adds only ``--out``, ``--resume``, ``--recipe``, ``--list-recipes``,
``--ray`` (where the warm start's episodes run) and ``--label-cache`` (where its labelled
episodes are kept, :mod:`pacopt.learned.label_cache`), which are not settings of the run and
may change on ``--resume``. ``--resume`` continues the run with the settings ``run.json``
recorded (budget flags aside: :data:`~pacopt.learned.train_config.RESUME_OVERRIDES`).
``--recipe NAME`` (:mod:`pacopt.learned.recipes`) sets the defaults of the flags to a named
recipe's; a recipe with steps runs them in order into subfolders of ``--out``
(:func:`_train_steps`). Ctrl-C saves the run and exits 130.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from pacopt.infra.commandline import command_parser
from pacopt.infra.errors import InputError
from pacopt.infra.ray_cluster import add_ray_option, ray_address


def train_command(argv: list[str]) -> int:
    """``pacopt train [--recipe NAME] --dist A|B|C|D|all [--preset P] [--minutes N] [--out DIR]
    [--resume]``, or ``pacopt train --list-recipes``."""
    from pacopt.learned.recipes import get_recipe, recipe_lines
    from pacopt.learned.train_config import TrainConfig, read_run_state, resumed_config

    parser = command_parser("train", "Train the learned partitioner (imitation warm start, then "
                                     "MaskablePPO) on the paper workload; resumable.")
    options = add_config_options(parser, TrainConfig)
    parser.add_argument("--recipe", metavar="NAME",
                        help="train with the settings of a named recipe, those a shipped "
                             "checkpoint was trained with (see --list-recipes or --recipe list); flags given "
                             "beside it override its settings, and the run records both. A "
                             "recipe built from others (general-ddls) trains each of them, then "
                             "itself, into a subfolder of --out")
    parser.add_argument("--list-recipes", action="store_true",
                        help="print the recipes (name, what it rebuilds, its flags) and exit")
    parser.add_argument("--out", help="output folder (default runs/pac-ml; with --recipe, "
                                      "runs/NAME)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out with its recorded settings (only --minutes, "
                             "--steps, --envs, --ray and --label-cache may change)")
    add_ray_option(parser, help="play the warm start's episodes (the teacher's labelling and "
                                "the DAgger rounds) as Ray tasks: on a local Ray instance of "
                                "--envs CPUs, or on the cluster at ADDRESS (e.g. auto, "
                                "ray://host:10001); the labels are the same as without it. Not "
                                "a setting of the run: not recorded, free to change on --resume")
    parser.add_argument("--label-cache", metavar="DIR",
                        help="keep the warm start's labelled episodes in DIR, and read back "
                             "those labelled there before (same settings, seeds and driving "
                             "policy) instead of playing them again: a student's fitting "
                             "settings tried again without paying the teacher. Not a setting of "
                             "the run; start a new DIR after changing pacopt's code")
    args = vars(parser.parse_args(argv))
    name, listing = args.pop("recipe"), args.pop("list_recipes")
    if listing or name == "list":
        print("\n".join(recipe_lines()))
        return 0
    recipe = get_recipe(name) if name is not None else None
    out = Path(args.pop("out") or (f"runs/{name}" if name else "runs/pac-ml"))
    resume = args.pop("resume")
    ray, label_cache = args.pop("ray"), args.pop("label_cache")
    ray_address(ray)  # nothing at the address: one line, exit 2, before any work
    if label_cache is not None:
        from pacopt.infra.safe_write import check_output_folder

        check_output_folder(label_cache, "--label-cache")
    given = dict(options[dest](value) for dest, value in args.items())
    if (out / RECIPE_STATE).exists() or (recipe is not None and recipe.steps):
        return _train_steps(recipe, given, out, resume, ray, label_cache)
    # every file handed over is checked before torch is imported (one line, exit 2)
    if resume:
        state = read_run_state(out)
        if name is not None and state.get("recipe") != name:
            raise InputError(f"--resume: the run in '{out}' was made by recipe "
                             f"{state.get('recipe') or '(none)'}, not {name}")
        config = resumed_config(state, given)
    else:
        config = recipe.config(given, out) if recipe is not None else TrainConfig(**given)
        _check_new_run(config, out)
    from pacopt.learned.train import (
        train,  # torch and sb3: only once the flags are good
    )

    best = train(config, out, resume=resume, recipe=name,
                 overrides=given if recipe is not None else None, ray=ray,
                 label_cache=label_cache)
    print(f"best checkpoint: {best}")
    return 0


#: A recipe with steps records its progress here, in ``--out``: the recipe, the settings given
#: beside it and the steps finished.
RECIPE_STATE = "recipe.json"


def _check_new_run(config, out: Path, made: frozenset[Path] = frozenset()) -> None:
    """What a new run checks before any work: ``out`` can be written and holds no run yet, and
    ``--init``'s checkpoint is a pac-ml checkpoint of this pacopt's format, unless it is one of
    ``made`` (what the steps before it will write)."""
    from pacopt.infra.safe_write import check_output_folder
    from pacopt.learned.checkpoint_meta import check_agent_checkpoint

    check_output_folder(out, "--out")
    if (out / "latest.zip").exists() or (out / RECIPE_STATE).exists():
        raise InputError(f"'{out}' already holds a training run; use --resume or another --out")
    if config.init and Path(config.init) not in made:
        check_agent_checkpoint(config.init, "--init checkpoint")


def _train_steps(recipe, given: dict, out: Path, resume: bool, ray: str | None = None,
                 label_cache: str | None = None) -> int:
    """Run a recipe with steps (:attr:`pacopt.learned.recipes.Recipe.steps`): each step, then
    the recipe itself, into ``out/<name>``, each a normal run; ``out/recipe.json`` records the
    steps finished, so ``--resume`` skips them, resumes the one under way and starts the rest.
    On ``--resume`` only the budget flags may be given; they apply to every step still to run."""
    import json

    from pacopt.infra.safe_write import prepare_folder, write_atomically
    from pacopt.learned.recipes import get_recipe
    from pacopt.learned.train_config import (
        RESUME_OVERRIDES,
        read_run_state,
        recorded_overrides,
        resumed_config,
    )

    record = out / RECIPE_STATE
    if resume:
        if not record.is_file():
            raise InputError(f"--resume: no recipe run to resume in '{out}' (no {RECIPE_STATE})")
        state = _read_recipe_state(record)
        if recipe is not None and recipe.name != state["recipe"]:
            raise InputError(f"--resume: the run in '{out}' is recipe {state['recipe']}, not "
                             f"{recipe.name}")
        recipe = get_recipe(state["recipe"])
        overrides = recorded_overrides(state["overrides"], f"--resume: '{record}'")
        for key, value in given.items():
            if key not in RESUME_OVERRIDES and overrides.get(key, value) != value:
                raise InputError(f"--resume continues the recipe run as recorded: only --minutes, "
                                 f"--steps and --envs may change ({key} differs)")
        budget = {k: v for k, v in given.items() if k in RESUME_OVERRIDES}
    else:
        if record.exists() or (out / "latest.zip").exists() or recipe is None:
            raise InputError(f"'{out}' already holds a training run; use --resume or another "
                             "--out")
        if any(c in str(out) for c in "=,{}"):
            raise InputError(f"--out '{out}': a recipe with steps names its teachers by --out, "
                             "which must not hold '=', ',', '{' or '}'")
        overrides, budget = given, {}
        state = {"recipe": recipe.name, "overrides": overrides, "finished": []}
    steps = (*recipe.steps, recipe.name)
    configs = {step: get_recipe(step).config({**overrides, **budget}, out) for step in steps}
    if not resume:
        for n, step in enumerate(steps):  # every step's settings and files checked first
            _check_new_run(configs[step], out / step,
                           frozenset(out / earlier / "best.zip" for earlier in steps[:n]))
        prepare_folder(out, "--out")
        write_atomically(record, json.dumps(state, indent=1), what="training output")
    from pacopt.learned.train import (
        train,  # torch and sb3: only once the flags are good
    )

    best = None
    for step in steps:
        folder = out / step
        if step in state["finished"]:
            print(f"{step}: finished already, in '{folder}'")
            best = folder / "best.zip"
            continue
        print(f"{step}: training into '{folder}'")
        if (folder / "latest.zip").exists():  # the step under way when the run stopped
            best = train(resumed_config(read_run_state(folder), budget), folder, resume=True,
                         ray=ray, label_cache=label_cache)
        else:
            best = train(configs[step], folder, recipe=step, overrides=overrides, ray=ray,
                         label_cache=label_cache)
        state["finished"].append(step)
        write_atomically(record, json.dumps(state, indent=1), what="training output")
    print(f"best checkpoint: {best}")
    return 0


def _read_recipe_state(record: Path) -> dict:
    """``recipe.json`` of a recipe run, checked: an object with ``recipe`` (a name),
    ``overrides`` (an object) and ``finished`` (a list of step names)."""
    import json

    try:
        state = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise InputError(f"--resume: '{record}' cannot be read ({type(err).__name__})") from None
    if not (isinstance(state, dict) and isinstance(state.get("recipe"), str)
            and isinstance(state.get("overrides"), dict)
            and isinstance(state.get("finished"), list)
            and all(isinstance(step, str) for step in state["finished"])):
        raise InputError(f"--resume: '{record}' is not the state of a recipe run (it needs "
                         "recipe, overrides and finished)")
    return state


def add_config_options(parser: argparse.ArgumentParser, config_class) -> dict:
    """Add an argument for each field of the dataclass ``config_class`` whose metadata holds an
    ``"option"`` (:class:`~pacopt.learned.train_config.Option`). An option left out is absent from the
    parsed namespace (the field keeps its default). Returns, for each argument's ``dest``, a
    function from the parsed value to ``(field name, field value)``."""
    options = {}
    for each in dataclasses.fields(config_class):
        option = each.metadata.get("option")
        if option is None:
            continue
        kwargs = {"default": argparse.SUPPRESS,
                  "help": None if option.help is None else option.help % {"default": each.default}}
        if option.switch_off:
            kwargs["action"] = "store_false"
        else:
            kwargs.update(type=option.type, choices=option.choices, metavar=option.metavar)
        dest = parser.add_argument(option.flag, **kwargs).dest
        options[dest] = (lambda value, name=each.name, parse=option.parse:
                         (name, value if parse is None else parse(value)))
    return options
