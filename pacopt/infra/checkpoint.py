"""Checkpoints a user hands over, checked before use: ``solve --checkpoint``, ``train --init``,
``train --resume``'s ``latest.zip`` and ``hetero --checkpoint`` (stable-baselines3 ``.zip``
files).

:func:`check_checkpoint` looks at the file itself, cheaply and without unpickling anything: it
exists and is a regular file of at most :data:`MAX_CHECKPOINT_BYTES`, it is a zip archive whose
members pass their CRC checks, it holds ``data`` (JSON naming the policy class and the spaces) and
``policy.pth``, nothing in it unpacks to more than :data:`MAX_MEMBER_BYTES`, it was saved by the
installed stable-baselines3's major version, and its policy is the expected class.
:func:`load_checked` then loads it, and any error the loader still raises on a damaged file
becomes the same kind of one-line :class:`InputError`. The shape (spaces) is checked by each
caller against what it will feed the policy.

Loading unpickles the spaces and classes in ``data`` (as any stable-baselines3 or torch
checkpoint does): load only checkpoints from a source you trust.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import TypeVar

from pacopt.infra.errors import InputError

T = TypeVar("T")

MAX_CHECKPOINT_BYTES = 512 * 2**20
MAX_MEMBER_BYTES = 1024 * 2**20  # what any one member unpacks to (a zip bomb stops here)
REQUIRED_MEMBERS = ("data", "policy.pth")
_DAMAGED = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, zlib.error,
            UnicodeDecodeError, ValueError, RuntimeError, NotImplementedError, KeyError)


def check_checkpoint(path: str | Path, what: str = "checkpoint",
                     policy: str | None = None,
                     kind: str = "stable-baselines3 checkpoint") -> dict:
    """Check the file at ``path`` (module doc) and return its ``data`` member (parsed JSON).
    ``policy`` (``module:Class``) is the policy class it must hold. Raises :class:`InputError`
    naming ``what`` and the file, and saying it is not a ``kind`` and why."""
    path = Path(path)
    where = f"{what} '{path}'"
    if not path.exists():
        raise InputError(f"{where} not found")
    if not path.is_file():
        raise InputError(f"{where} is not a regular file")
    if path.stat().st_size > MAX_CHECKPOINT_BYTES:
        raise InputError(f"{where} is larger than {MAX_CHECKPOINT_BYTES >> 20} MB")
    try:
        if not zipfile.is_zipfile(path):
            raise InputError(f"{where} is not a {kind}: not a zip archive (cut short, or "
                             "another kind of file)")
        with zipfile.ZipFile(path) as archive:
            members = {info.filename: info for info in archive.infolist()}
            missing = [name for name in REQUIRED_MEMBERS if name not in members]
            if missing:
                raise InputError(f"{where} is not a {kind}: no {', '.join(missing)} in the "
                                 "archive")
            big = [name for name, info in members.items() if info.file_size > MAX_MEMBER_BYTES]
            if big:
                raise InputError(f"{where}: member '{big[0]}' unpacks to more than "
                                 f"{MAX_MEMBER_BYTES >> 20} MB")
            damaged = archive.testzip()
            if damaged is not None:
                raise InputError(f"{where} is damaged: member '{damaged}' fails its CRC check")
            data = json.loads(archive.read("data").decode("utf-8"))
            version = (archive.read("_stable_baselines3_version").decode("utf-8").strip()
                       if "_stable_baselines3_version" in members else None)
    except InputError:
        raise
    except _DAMAGED as err:
        raise InputError(f"{where} is damaged: {_first_line(err)}") from None
    if not isinstance(data, dict) or not all(
            isinstance(data.get(key), dict) for key in ("policy_class", "observation_space",
                                                        "action_space")):
        raise InputError(f"{where} is not a {kind}: its 'data' lacks the policy class and "
                         "spaces")
    installed = _installed_sb3()
    if version is not None and installed is not None and (
            version.split(".")[0] != installed.split(".")[0]):
        raise InputError(f"{where} was saved by stable-baselines3 {version}; the installed "
                         f"{installed} cannot load it")
    if policy is not None:
        module, _, name = policy.partition(":")
        found = data["policy_class"]
        if found.get("__module__") != module or not _names_class(found, name):
            raise InputError(f"{where} is not a {kind}: its policy comes from "
                             f"{found.get('__module__', 'an unknown module')}, not {policy}")
    return data


def load_checked(path: str | Path, loader: Callable[[Path], T], what: str = "checkpoint",
                 policy: str | None = None,
                 kind: str = "stable-baselines3 checkpoint") -> T:
    """:func:`check_checkpoint`, then ``loader(path)``; anything the loader raises on the file
    is one :class:`InputError` line naming it."""
    path = Path(path)
    check_checkpoint(path, what, policy, kind)
    try:
        return loader(path)
    except Exception as err:  # noqa: BLE001 -- the loaders raise every kind on a bad file
        raise InputError(f"{what} '{path}' cannot be loaded: {type(err).__name__}: "
                         f"{_first_line(err)}") from None


def _names_class(found: dict, name: str) -> bool:
    """Whether the serialised policy class entry names class ``name`` (the ``__module__`` entry
    sb3 writes is the class's module; the name is inside the pickle, which is not opened)."""
    import base64

    try:
        return name.encode() in base64.b64decode(found.get(":serialized:", ""), validate=False)
    except ValueError:
        return False


def _installed_sb3() -> str | None:
    try:
        return metadata.version("stable_baselines3")
    except metadata.PackageNotFoundError:
        return None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return (text.splitlines()[0] if text else type(err).__name__)[:200]
