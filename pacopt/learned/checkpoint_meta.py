"""What a checkpoint says about itself: ``pacopt.json``, a small JSON member inside the
stable-baselines3 ``.zip`` of every checkpoint a training run writes (``latest.zip``,
``best.zip``) and of the shipped ones.

sb3's loader reads only ``data`` and the ``.pth`` members, and
:func:`~pacopt.infra.checkpoint.check_checkpoint` only requires its own, so the member travels
with the file through ``MaskablePPO.load``, copies and downloads. Its keys:

- ``format``: the checkpoint format, the network's layout (:func:`format_of`): 1 with the
  learned table of degrees, :data:`CHECKPOINT_FORMAT` (2) with degree features. It is bumped
  whenever the observations or the network's layout change, so that a checkpoint the current
  code cannot play fails on load with one line saying so (:func:`check_format`) rather than with
  a tensor-shape error deep in torch;
- ``code_version``: pacopt's version and the git commit of the code that trained it
  (:func:`code_version`), e.g. ``0.1.0 (git 642fa30)``;
- ``recipe``: the ``pacopt train --recipe`` it was made by (:mod:`pacopt.learned.recipes`) or
  null, and ``recipe_overrides``: the settings given on the command line besides the recipe's
  (``{}`` for the recipe as it stands);
- ``config``: the run's settings as ``run.json`` records them
  (:class:`~pacopt.learned.train_config.TrainConfig`);
- ``seeds``: ``{"training": the run's seed, "validation": the validation seeds}``;
- ``rounds``: the imitation rounds fitted before these weights were written (1 = the teacher's
  round, 1 + k = k DAgger rounds after it; 0 = none, e.g. ``--init`` or no teacher);
- ``timesteps``: PPO's environment steps (0 = the imitation policy);
- ``validation``: the run's best validation score (mean blocking rate) when it was written, which
  for ``best.zip`` is its own; null before any;
- ``trained_at``: when it was written, UTC, ISO 8601.

A checkpoint without the member (written before it existed) has no metadata:
:func:`read_metadata` returns None and it loads as before, its spaces checked against the
observations as always.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from datetime import UTC, datetime
from functools import lru_cache
from importlib import metadata as package_metadata
from pathlib import Path

from pacopt.infra.checkpoint import check_checkpoint
from pacopt.infra.errors import InputError
from pacopt.infra.safe_write import write_atomically

#: The shipped checkpoints' folder (package data).
CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"

#: The current checkpoint format: bump it when the observations or the network's layout change
#: (and retrain the shipped checkpoints with ``pacopt train --recipe NAME``).
CHECKPOINT_FORMAT = 2
#: The formats this pacopt plays: 1, the layout with the learned table of degrees 0..16
#: (``--degree-table``), and 2, with the degrees' features (:mod:`pacopt.learned.gnn`).
READ_FORMATS = (1, 2)
#: The member of the ``.zip`` that holds the metadata.
MEMBER = "pacopt.json"
#: The most a metadata member may hold (it is a few kB).
MAX_METADATA_BYTES = 2**20
#: The keys every metadata object has (module doc).
KEYS = ("format", "code_version", "recipe", "recipe_overrides", "config", "seeds", "rounds",
        "timesteps", "validation", "trained_at")
#: The keys a result records for each checkpoint played (:func:`summary`): all but the config.
SUMMARY_KEYS = tuple(key for key in KEYS if key != "config")

_PACKAGE_DIR = Path(__file__).resolve().parents[1]


@lru_cache(maxsize=1)
def code_version() -> str:
    """pacopt's version and, when the package lies in a git checkout, its commit:
    ``0.1.0 (git 642fa30)``, ``0.1.0 (git 642fa30, modified)`` when the package's files differ
    from the commit, ``0.1.0 (git unknown)`` outside a checkout or without git. Never fails."""
    try:
        version = package_metadata.version("pacopt")
    except package_metadata.PackageNotFoundError:
        version = "unknown"
    commit = _git("rev-parse", "--short", "HEAD")
    if commit is None or _git("ls-files", "--error-unmatch", "__init__.py") is None:
        return f"{version} (git unknown)"  # no git, or a checkout that does not hold pacopt
    modified = _git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return f"{version} (git {commit}{', modified' if modified else ''})"


def _git(*args: str) -> str | None:
    """``git args`` run in the package's folder: its output, or None if it fails in any way."""
    try:
        done = subprocess.run(["git", "-C", str(_PACKAGE_DIR), *args], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def now_utc() -> str:
    """The current time, UTC, ISO 8601 to the second (``2026-11-24T13:34:12+00:00``)."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def run_metadata(state: dict, timesteps: int) -> dict:
    """The metadata of a checkpoint a training run writes now: from the run's ``state`` (as
    :func:`pacopt.learned.train.train` keeps it and ``run.json`` records it: ``config``,
    ``best_score``, ``rounds``, ``recipe``, ``recipe_overrides``) and PPO's step count."""
    config = state["config"]
    return {"format": format_of(config), "code_version": code_version(),
            "recipe": state.get("recipe"), "recipe_overrides": state.get("recipe_overrides") or {},
            "config": config,
            "seeds": {"training": config.get("seed"),
                      "validation": list(config.get("validation_seeds", []))},
            "rounds": int(state.get("rounds", 0)), "timesteps": int(timesteps),
            "validation": state.get("best_score"), "trained_at": now_utc()}


def format_of(config: dict) -> int:
    """The format of a checkpoint trained with ``config`` (``run.json``'s settings): 1 with the
    table of degrees, which pacopt before format 2 plays too; 2 with degree features."""
    return CHECKPOINT_FORMAT if config.get("degree_features", False) else 1


def embed_metadata(path: str | Path, metadata: dict) -> None:
    """Put ``metadata`` into the checkpoint ``path`` as its ``pacopt.json`` (replacing any),
    every other member unchanged, in place: for a file being written (a temporary file inside
    :func:`~pacopt.infra.safe_write.write_atomically`, as training's saves are); an existing
    checkpoint goes through :func:`set_metadata`."""
    text = json.dumps(metadata, indent=1, sort_keys=False, allow_nan=False)
    path = Path(path)
    with zipfile.ZipFile(path) as archive:
        present = MEMBER in archive.namelist()
    if not present:  # the usual case: append one member, the others stay byte for byte
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr(MEMBER, text, compress_type=zipfile.ZIP_DEFLATED)
        return
    with zipfile.ZipFile(path) as archive:  # replace it: rebuild the archive, members as they were
        members = [(info, archive.read(info)) for info in archive.infolist()
                   if info.filename != MEMBER]
    with zipfile.ZipFile(path, "w") as archive:
        for info, data in members:
            archive.writestr(info, data)
        archive.writestr(MEMBER, text, compress_type=zipfile.ZIP_DEFLATED)


def set_metadata(path: str | Path, metadata: dict) -> None:
    """Give the existing checkpoint ``path`` the metadata ``metadata``, atomically (a copy is
    given it, then replaces the file): every other member keeps its content."""
    path = Path(path)

    def write(tmp: Path) -> None:
        tmp.write_bytes(path.read_bytes())
        embed_metadata(tmp, metadata)

    write_atomically(path, write, what="checkpoint")


def read_metadata(path: str | Path, what: str = "checkpoint") -> dict | None:
    """The metadata of the checkpoint ``path`` (module doc), or None when it has none (written
    before metadata existed), or when it is no zip archive at all (for
    :func:`~pacopt.infra.checkpoint.check_checkpoint` to say so). A ``pacopt.json`` that is
    not a JSON object with an integer ``format`` is an :class:`InputError` naming ``what`` and
    the file."""
    path = Path(path)
    try:
        if not path.is_file() or not zipfile.is_zipfile(path):
            return None
        with zipfile.ZipFile(path) as archive:
            info = next((i for i in archive.infolist() if i.filename == MEMBER), None)
            if info is None:
                return None
            if info.file_size > MAX_METADATA_BYTES:
                raise InputError(f"{what} '{path}': its {MEMBER} is larger than "
                                 f"{MAX_METADATA_BYTES >> 20} MB")
            data = json.loads(archive.read(info).decode("utf-8"))
    except InputError:
        raise
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError, ValueError, EOFError,
            RecursionError) as err:
        raise InputError(f"{what} '{path}': its {MEMBER} cannot be read "
                         f"({type(err).__name__})") from None
    fmt = data.get("format") if isinstance(data, dict) else None
    if not isinstance(fmt, int) or isinstance(fmt, bool):
        raise InputError(f"{what} '{path}': its {MEMBER} is not pacopt checkpoint metadata "
                         "(no integer 'format')")
    return data


def check_format(path: str | Path, what: str = "checkpoint") -> dict | None:
    """The metadata of ``path`` (:func:`read_metadata`), after checking that this pacopt reads
    its format: a checkpoint of another format is one :class:`InputError` line naming the file,
    the code that wrote it, both formats and the recipe that rebuilds it. No metadata: None (an
    older file, whose spaces the loaders still check)."""
    meta = read_metadata(path, what)
    if meta is None or meta["format"] in READ_FORMATS:
        return meta
    recipe = meta.get("recipe")
    rebuild = (f"pacopt train --recipe {recipe}" if isinstance(recipe, str) and recipe
               else "pacopt train, with its settings")
    newer = "upgrade pacopt or " if meta["format"] > CHECKPOINT_FORMAT else ""
    raise InputError(f"{what} '{path}' was written by pacopt {meta.get('code_version', 'unknown')}"
                     f" in checkpoint format {meta['format']}; this pacopt reads formats "
                     f"{', '.join(map(str, READ_FORMATS))}: {newer}retrain it ({rebuild})")


#: The policy class and the name a pacopt agent checkpoint is checked as.
AGENT_POLICY, AGENT_KIND = "pacopt.learned.gnn:DegreePolicy", "pacopt agent checkpoint"


def check_agent_checkpoint(path: str | Path, what: str = "checkpoint") -> dict | None:
    """Everything checked before a pacopt agent checkpoint is loaded (``--init``, ``--resume``,
    ``solve --checkpoint``): a sound sb3 zip holding a ``DegreePolicy``
    (:func:`~pacopt.infra.checkpoint.check_checkpoint`), then a format this pacopt reads
    (:func:`check_format`); its metadata, or None."""
    check_checkpoint(path, what, policy=AGENT_POLICY, kind=AGENT_KIND)
    return check_format(path, what)


def summary(metadata: dict | None) -> dict | None:
    """What a result records of a checkpoint it played: the metadata without its ``config``
    (:data:`SUMMARY_KEYS`; the recipe and its overrides name the settings), or None."""
    if metadata is None:
        return None
    return {key: metadata.get(key) for key in SUMMARY_KEYS}
