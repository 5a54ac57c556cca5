"""What the benchmarks and tools share: where the data are, the seed sets, the instances several
of them play, and the writing of result tables.

- **Data.** :func:`pipedream_dir` is the one way to find the PipeDream profiles: the package's
  own folders (:func:`pacopt.model.datasets.pipedream_dirs`: ``$PACOPT_PIPEDREAM_DIR``, then
  the download cache of ``pacopt download-pipedream``), then ``../shared/data/pipedream``
  beside the repository. :func:`use_pipedream` points ``$PACOPT_PIPEDREAM_DIR`` there, so that
  ``paper_instance`` and every subprocess find them. :func:`use_traces` does the same for the
  ITP traces (:func:`pacopt.model.datasets.find_traces`: ``$PACOPT_TRACES_DIR``, the download
  cache of ``pacopt download-traces``; then ``../shared/data/traces/elasticflow``).
- **Seeds.** The split lives in :mod:`pacopt.model.paper_workload` (``TUNING_SEEDS``,
  ``HELD_OUT_SEEDS``, ``FRESH_SEEDS``) and :mod:`pacopt.learned.train_config` (validation:
  :func:`validation_seeds`); :func:`first_seeds` takes the first N of one set, as ``--seeds N``
  asks, and :func:`heldout_seeds` the held-out ones.
- **Instances** more than one script plays: :func:`paper_on_cluster`, :func:`scaled_instance`
  on :data:`SHAPES`, and the policies ``tuned`` picks among (:func:`tuned_candidates`).
- **Results.** :func:`add_out_argument` and :func:`write_results`: ``--out FILE.json`` writes a
  table as ``docs/results/NAME.json`` holds it (``docs/hooks/tables.py``: title, columns, rows,
  command, measured, notes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
from datetime import date
from pathlib import Path

from pacopt.infra.errors import InputError
from pacopt.model.datasets import find_traces, pipedream_dirs
from pacopt.model.paper_workload import (
    HELD_OUT_SEEDS,
    PAPER_GRAPHS,
    on_cluster,
    paper_instance,
    paper_instance_dict,
)

#: The repository's root folder.
REPOSITORY = Path(__file__).resolve().parents[1]
#: Where this machine keeps the data beside the repository (the last place looked).
BESIDE = REPOSITORY.parent / "shared" / "data"


# ----- data ----------------------------------------------------------------------------------------
def pipedream_dir() -> Path:
    """The folder of the PipeDream profiles: ``$PACOPT_PIPEDREAM_DIR`` when set, else the first
    of the package's folders (:func:`~pacopt.model.datasets.pipedream_dirs`) that holds the
    paper's graphs, else ``../shared/data/pipedream`` beside the repository if it exists, else
    the download cache (so that a message names where to put them)."""
    folders = pipedream_dirs()
    if os.environ.get("PACOPT_PIPEDREAM_DIR"):
        return folders[0]
    for folder in folders:
        if all((folder / f"{graph}.txt").is_file() for graph in PAPER_GRAPHS):
            return folder
    if (BESIDE / "pipedream").is_dir():
        return BESIDE / "pipedream"
    return folders[0]


def add_pipedream_argument(parser: argparse.ArgumentParser) -> None:
    """``--pipedream DIR``: the profiles' folder, default :func:`pipedream_dir`."""
    parser.add_argument("--pipedream", type=Path, default=None, metavar="DIR",
                        help="folder with the PipeDream <model>.txt profiles (default: "
                             "$PACOPT_PIPEDREAM_DIR, then the download cache, then "
                             "../shared/data/pipedream beside the repository)")


def use_pipedream(folder: Path | str | None = None, required: bool = False) -> Path:
    """Point ``$PACOPT_PIPEDREAM_DIR`` at ``folder`` (``--pipedream``), or when none is given
    at :func:`pipedream_dir`, and return it. With ``required``, a folder that does not exist
    ends the process with exit 2 and one line on stderr."""
    path = Path(folder) if folder is not None else pipedream_dir()
    if required and not path.is_dir():
        print(f"no PipeDream profiles at {path}", file=sys.stderr)
        raise SystemExit(2)
    os.environ["PACOPT_PIPEDREAM_DIR"] = str(path)
    return path


def traces_dir() -> Path:
    """The folder of the ElasticFlow release of the ITP traces (``generated/``, ``raw/``): the
    package's (:func:`~pacopt.model.datasets.find_traces`: ``$PACOPT_TRACES_DIR``, then the
    download cache), else ``../shared/data/traces/elasticflow`` beside the repository; else the
    package's :class:`InputError` saying how to get them."""
    try:
        return find_traces()
    except InputError:
        if (BESIDE / "traces" / "elasticflow" / "generated").is_dir():
            return BESIDE / "traces" / "elasticflow"
        raise


def use_traces() -> Path:
    """Point ``$PACOPT_TRACES_DIR`` at :func:`traces_dir`, so that a trace named ``cluster04``
    is found in this process and its subprocesses, and return it."""
    path = traces_dir()
    os.environ["PACOPT_TRACES_DIR"] = str(path)
    return path


# ----- seeds ---------------------------------------------------------------------------------------
def validation_seeds() -> tuple[int, ...]:
    """The seeds checkpoints are selected on (:data:`pacopt.learned.train_config.
    VALIDATION_SEEDS`), imported only when asked for (the learned package is slow to load)."""
    from pacopt.learned.train_config import VALIDATION_SEEDS

    return VALIDATION_SEEDS


def first_seeds(parser: argparse.ArgumentParser, seeds: tuple[int, ...], count: int,
                flag: str = "--seeds") -> tuple[int, ...]:
    """The first ``count`` of ``seeds``; outside 1..len(seeds), argparse's error (exit 2)."""
    if not 1 <= count <= len(seeds):
        parser.error(f"{flag} must be in 1..{len(seeds)}")
    return tuple(seeds[:count])


def add_heldout_arguments(parser: argparse.ArgumentParser, jobs: bool = True) -> None:
    """``--seeds N`` (the first N of ``HELD_OUT_SEEDS``, never used to train, tune or select
    anything), ``--pipedream`` and (with ``jobs``) ``--jobs``."""
    parser.add_argument("--seeds", type=int, default=3, help="how many held-out seeds")
    if jobs:
        parser.add_argument("--jobs", type=int, default=1001, help="jobs per episode")
    add_pipedream_argument(parser)


def heldout_seeds(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[int, ...]:
    """The held-out seeds ``args`` asks for (a bad ``--seeds``/``--jobs`` ends with argparse's
    exit 2), with the profiles found (:func:`use_pipedream`)."""
    if not 1 <= args.seeds <= len(HELD_OUT_SEEDS) or getattr(args, "jobs", 1) < 1:
        parser.error(f"--seeds must be in 1..{len(HELD_OUT_SEEDS)} and --jobs >= 1")
    use_pipedream(args.pipedream)
    return HELD_OUT_SEEDS[:args.seeds]


# ----- instances -----------------------------------------------------------------------------------
def paper_on_cluster(dist: str, seed: int, cluster: tuple[int, int, int] | None,
                     preset: str = "ddls"):
    """The paper's instance under ``preset``, on ``cluster`` (groups, racks, servers) at the
    paper's load per server if given."""
    from pacopt.model.instance import instance_from_dict

    if cluster is None:
        return paper_instance(dist, seed, preset=preset)
    data = on_cluster(paper_instance_dict(dist, seed, preset=preset), cluster)
    name = "x".join(map(str, cluster))
    return instance_from_dict(data, source=f"paper-{dist}-seed{seed}-{name}-{preset}")


#: RAMP shapes by servers: 4 servers per rack from 64 up, groups and racks doubled in turn, so
#: that from 128 up the cluster is made of 4x4x4 tiles (:mod:`pacopt.model.tiles`).
SHAPES = {32: (4, 4, 2), 64: (4, 4, 4), 128: (8, 4, 4), 256: (8, 8, 4), 512: (16, 8, 4),
          1024: (16, 16, 4)}
#: The same sizes with 8 servers per rack, tiles of 4x4x8 (128 servers, masks wider than a
#: 64-bit word) from 256 servers up.
SHAPES_8 = {32: (4, 1, 8), 64: (4, 2, 8), 128: (4, 4, 8), 256: (8, 4, 8), 512: (8, 8, 8),
            1024: (16, 8, 8)}


def scaled_instance(servers: int, jobs: int, preset: str,
                    shape: tuple[int, int, int] | None = None, max_degree: int | None = None):
    """The paper's workload scaled to the cluster of ``servers`` (``shape``: another RAMP shape
    of that size than :data:`SHAPES`'): beta A, held-out seed 10000, jobs ``1000 x 32 /
    servers`` ms apart, no horizon, so every size sees the same offered load per server.
    ``max_degree``: the model's ``max_partitions_per_op`` (default the model's, 16)."""
    from pacopt.model.instance import instance_from_dict

    data = on_cluster(paper_instance_dict("A", HELD_OUT_SEEDS[0], jobs, preset, horizon_ms=None),
                      tuple(shape or SHAPES[servers]))
    if max_degree is not None:
        data["model"]["max_partitions_per_op"] = max_degree
    return instance_from_dict(data, source=f"scale-{servers}")


def tuned_candidates(max_degree: int) -> list[str]:
    """Every policy ``tuned`` may pick, in tie-break order: the heuristics, then ``fixed:K``
    and ``fixed-or-min:K`` for K = 1..``max_degree``."""
    from pacopt.online.policies import HEURISTICS

    ks = range(1, max_degree + 1)
    return [*HEURISTICS, *(f"fixed:{k}" for k in ks), *(f"fixed-or-min:{k}" for k in ks)]


# ----- results -------------------------------------------------------------------------------------
def add_out_argument(parser: argparse.ArgumentParser) -> None:
    """``--out FILE.json``: also write the table as a results data file."""
    parser.add_argument("--out", type=Path, default=None, metavar="FILE.json",
                        help="also write the table as a results data file, e.g. "
                             "docs/results/NAME.json (title, columns, rows, command, measured)")


def command_line(argv: list[str] | None = None) -> str:
    """The command that reproduces this run's table: ``python -m benchmarks NAME ARGS`` without
    ``--out``."""
    argv = list(sys.argv if argv is None else argv)
    prog, args = argv[0], argv[1:]
    if prog.endswith(".py"):  # run as a file: named as the suite names it
        path = Path(prog)
        prog = f"python -m {path.resolve().parent.name} {path.stem.removeprefix('bench_')}"
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            kept.append(arg)
    return " ".join([prog, *map(shlex.quote, kept)])


def _cell(value):
    """A JSON cell: text, a whole number, a finite float or None."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if hasattr(value, "item"):  # a numpy scalar
        value = value.item()
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)


def write_results(path: Path | str, title: str, columns: list[str], rows: list[list],
                  notes: str | None = None, command: str | None = None) -> dict:
    """Write one result table to ``path`` as ``docs/results/NAME.json`` holds it: ``title``,
    ``columns``, ``rows`` (one cell per column: text, a number or None), ``command`` (default:
    :func:`command_line`), ``measured`` (today) and, if given, ``notes``. Written whole or not
    at all. Returns the data."""
    columns = [str(c) for c in columns]
    table = []
    for i, row in enumerate(rows):
        if len(row) != len(columns):
            raise ValueError(f"row {i} has {len(row)} cells for {len(columns)} columns")
        table.append([_cell(c) for c in row])
    data = {"title": title, "columns": columns, "rows": table,
            "command": command or command_line(), "measured": date.today().isoformat()}
    if notes:
        data["notes"] = notes
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return data
