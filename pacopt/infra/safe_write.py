"""Writing a file so that nothing is lost: the new content goes to a temporary file of its own
(unique per process, beside the target, so the final rename stays on one file system) and then
replaces the target in one step. A failed write (a full disk, a folder that went away) leaves the
old file as it was and no temporary file behind, and is one :class:`InputError` line."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from pacopt.infra.errors import InputError


def check_replaceable(path: Path, what: str = "--out") -> None:
    """InputError unless ``path`` is absent or a regular file: a write must never replace a
    device, a pipe or a socket (``--out /dev/null`` as root would turn the device into a file)."""
    if path.exists() and not path.is_file():
        raise InputError(f"{what} '{path}' exists and is not a regular file")


def check_output_folder(path: str | Path, what: str = "--out") -> None:
    """InputError unless the output folder ``path`` could be made and written: it is a folder (or
    absent), and it (or its nearest existing parent) is writable. Creates nothing: a command
    checks this before its expensive imports, and makes the folder only once work starts
    (:func:`prepare_folder`)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{what} '{path}' exists and is not a folder")
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        raise InputError(f"{what} '{path}': '{existing}' is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):  # also EROFS, even for root
        raise InputError(f"{what} '{path}': cannot write in '{existing}'")


def prepare_folder(path: str | Path, what: str = "--out") -> bool:
    """Create the output folder ``path`` (and its parents) if needed and check that a file can be
    written in it (a real probe file: permission bits say nothing to root, and a read-only mount
    is only found by writing); InputError naming ``what`` otherwise. Returns whether it was
    created."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{what} '{path}' exists and is not a folder")
    created = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=".pacopt-probe-", dir=path)
        os.close(handle)
        os.unlink(name)
    except OSError as err:
        if created and path.is_dir() and not any(path.iterdir()):
            path.rmdir()  # nothing half-made left behind
        raise InputError(f"{what} '{path}': cannot write in this folder: {_reason(err)}") from None
    return created


def write_atomically(path: str | Path, content: str | Callable[[Path], None],
                     what: str = "--out") -> None:
    """Write ``content`` (a text, or a function that writes the file it is given) to ``path``
    through a unique temporary file beside it; see the module doc."""
    path = Path(path)
    check_replaceable(path, what)
    try:
        handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise InputError(f"cannot write '{path}': {_reason(err)}") from None
    os.close(handle)
    tmp = Path(name)
    try:
        if isinstance(content, str):
            tmp.write_text(content)
        else:
            content(tmp)
        with tmp.open("rb+") as written:  # on the disk before it replaces anything
            os.fsync(written.fileno())
        if path.exists():  # keep the target's permissions, not mkstemp's 0600
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        tmp.replace(path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write '{path}': {_reason(err)}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _reason(err: OSError) -> str:
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device"
    return err.strerror or str(err)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
