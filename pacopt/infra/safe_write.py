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


def write_atomically(path: str | Path, content: str | Callable[[Path], None],
                     what: str = "--out") -> None:
    """Write ``content`` (a text, or a function that writes the file it is given) to ``path``
    through a unique temporary file beside it; see the module doc."""
    path = Path(path)
    check_replaceable(path, what)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    tmp = Path(name)
    try:
        if isinstance(content, str):
            tmp.write_text(content)
        else:
            content(tmp)
        if path.exists():  # keep the target's permissions, not mkstemp's 0600
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        tmp.replace(path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        reason = "no space left on the device" if err.errno == errno.ENOSPC else err.strerror
        raise InputError(f"cannot write '{path}': {reason}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
