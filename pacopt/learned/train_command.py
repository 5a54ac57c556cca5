"""``pacopt train``: train (or resume training) the learned partitioner on the paper workload.

The options are :class:`~pacopt.learned.train_config.TrainConfig`'s fields that carry an
:class:`~pacopt.learned.train_config.Option` (flag, help, range): their defaults and range checks live
there; this module adds only ``--out`` and ``--resume``, which are not settings of the run.
``--resume`` continues the run with the settings ``run.json`` recorded (budget flags aside:
:data:`~pacopt.learned.train_config.RESUME_OVERRIDES`). Ctrl-C saves the run and exits 130.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from pacopt.infra.commandline import command_parser
from pacopt.infra.errors import InputError


def train_command(argv: list[str]) -> int:
    """``pacopt train --dist A|B|C|D|all [--preset P] [--minutes N] [--out DIR] [--resume]``."""
    from pacopt.infra.checkpoint import check_checkpoint
    from pacopt.infra.safe_write import check_output_folder
    from pacopt.learned.train_config import TrainConfig, read_run_state, resumed_config

    parser = command_parser("train", "Train the learned partitioner (imitation warm start, then "
                                     "MaskablePPO) on the paper workload; resumable.")
    options = add_config_options(parser, TrainConfig)
    parser.add_argument("--out", default="runs/pac-ml", help="output folder (default %(default)s)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out with its recorded settings (only --minutes, "
                             "--steps and --envs may change)")
    args = vars(parser.parse_args(argv))
    out, resume = Path(args.pop("out")), args.pop("resume")
    given = dict(options[dest](value) for dest, value in args.items())
    # every file handed over is checked before torch is imported (one line, exit 2)
    if resume:
        config = resumed_config(read_run_state(out), given)
    else:
        config = TrainConfig(**given)
        check_output_folder(out, "--out")
        if (out / "latest.zip").exists():
            raise InputError(f"'{out}' already holds a training run; use --resume or another "
                             "--out")
        if config.init:
            check_checkpoint(config.init, "--init checkpoint",
                             policy="pacopt.learned.gnn:DegreePolicy",
                             kind="pacopt agent checkpoint")
    from pacopt.learned.train import (
        train,  # torch and sb3: only once the flags are good
    )

    best = train(config, out, resume=resume)
    print(f"best checkpoint: {best}")
    return 0


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
