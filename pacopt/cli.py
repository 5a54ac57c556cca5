"""The command dispatcher, the top of the house: ``solve INSTANCE.json`` and ``pacopt COMMAND``.

Each command lives with its layer (:mod:`pacopt.solvers.commands`,
:mod:`pacopt.learned.train_command`, :mod:`pacopt.analysis.study_command`,
:mod:`pacopt.hetero.command`); this module only names them, so no layer imports a higher one.
Exit codes are those of :mod:`pacopt.infra.commandline`. A command that needs an extra not
installed (an optional module missing: :mod:`pacopt.infra.extras`) says which, in one line,
exit 2.
"""

from __future__ import annotations

import importlib
import sys

from pacopt.infra.commandline import run_command
from pacopt.infra.errors import InputError
from pacopt.infra.extras import missing_extra

#: ``pacopt`` subcommands: name -> (module, function, one-line help). Registering a subcommand is
#: one entry here; its module is imported only when it runs, and ``function(argv) -> int`` parses
#: its own arguments (with :func:`pacopt.infra.commandline.command_parser`) and returns the exit
#: code.
COMMANDS = {
    "profile": ("pacopt.solvers.commands", "profile_command",
                "per-degree table of one graph on an empty cluster"),
    "job": ("pacopt.solvers.commands", "job_command",
            "job-level optimum: per-op split counts for one graph"),
    "validate": ("pacopt.solvers.commands", "validate_command",
                 "re-check a result file against its instance"),
    "download-pipedream": ("pacopt.solvers.commands", "download_command",
                           "fetch the public PipeDream profiles (internet)"),
    "download-traces": ("pacopt.solvers.commands", "download_traces_command",
                        "fetch Microsoft's ITP job traces (ElasticFlow's release; internet)"),
    "schema": ("pacopt.solvers.commands", "schema_command", "print the instance JSON Schema"),
    "train": ("pacopt.learned.train_command", "train_command",
              "train the learned partitioner (imitation, then MaskablePPO); resumable"),
    "study": ("pacopt.analysis.study_command", "study_command",
              "run a study (grids of instances x methods; local pool or --ray); resumable"),
    "trace": ("pacopt.analysis.trace_command", "trace_command",
              "turn a job trace (ElasticFlow / Microsoft ITP) into an instance; print its load"),
    "hetero": ("pacopt.hetero.command", "hetero_command",
               "cheapest resource types and provisioning of one job for a throughput (HeterPS)"),
}


#: What a command's missing extra is reported as needed for (default ``pacopt COMMAND``).
FEATURES = {"train": "pac-ml training"}


def solve_main(argv: list[str] | None = None) -> int:
    """Entry point of the ``solve`` command."""
    from pacopt.solvers.commands import solve_command

    return run_command(lambda args: _naming_extras(solve_command, args, "solve"), argv)


def pacopt_main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pacopt`` command."""
    return run_command(_dispatch, argv)


def _dispatch(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        raise InputError(f"a command is required; known: {', '.join(COMMANDS)} (see --help)")
    if argv[0] in ("-h", "--help"):
        width = max(map(len, COMMANDS))
        print("usage: pacopt COMMAND [ARGS]  (pacopt COMMAND --help for its options)\n\ncommands:")
        for name, (_, _, text) in COMMANDS.items():
            print(f"  {name:<{width}}  {text}")
        return 0
    if argv[0] not in COMMANDS:
        raise InputError(f"unknown command '{argv[0]}'; known: {', '.join(COMMANDS)}")
    module, function, _ = COMMANDS[argv[0]]
    return _naming_extras(lambda args: getattr(importlib.import_module(module), function)(args),
                          argv[1:], FEATURES.get(argv[0], f"pacopt {argv[0]}"))


def _naming_extras(main, argv, what: str) -> int:
    """``main(argv)``, an optional module found missing on the way (an extra not installed)
    raised as the one line naming the extra (:func:`pacopt.infra.extras.missing_extra`)."""
    try:
        return main(argv)
    except ModuleNotFoundError as err:
        missing = missing_extra(err, what)
        if missing is None or missing is err:  # not an extra's, or said already
            raise
        raise missing from err


if __name__ == "__main__":
    sys.exit(pacopt_main())
