"""The on-disk timing cache (``$PACOPT_CACHE_DIR/timings/*.jsonl``), which cannot lie.

A cached step timing is only a shortcut: a wrong one would make every method, and a validator
that trusted it, accept jobs that miss their deadlines. So every line says what it was computed
from and carries a checksum:

- a file holds the timings of one **provenance**: :data:`TIMING_VERSION`, a digest of the source
  of the modules that compute timings (:func:`code_version`: any change to the timing code
  starts a new file), the graph's content fingerprint, the cluster and the model settings (all
  but the online placer, which chooses placements but does not time them). The file name ends in
  the provenance's digest;
- a line is ``{"key": placement class, "step_ms": ..., "exposed_ms": ..., "from": provenance
  digest, "sum": checksum}``, the checksum a digest of the provenance digest, the key and both
  numbers, so a line edited by hand, cut short, copied from another file or written by other
  code does not check.

On reading, a line that does not check (not UTF-8, not JSON, a wrong field, another provenance,
a wrong checksum) is ignored, so its timing is recomputed; a warning names the file and the count,
and the file is rewritten (atomically) with its good lines only. A file that is not a regular
file (a folder, a FIFO: reading one would hang) or is larger than :data:`MAX_CACHE_BYTES` is
ignored with a warning. The validator does not read this cache at all
(:mod:`pacopt.solvers.validate`). A cache that cannot be written (read-only home, full disk) is
not an error: the timings stay in memory.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import re
from functools import lru_cache
from pathlib import Path

from pacopt.infra.errors import InputError, warn
from pacopt.infra.safe_write import write_atomically

#: Bump when the timing rules change in a way :func:`code_version` cannot see (a dependency's).
TIMING_VERSION = 2
#: A cache file larger than this is ignored (and rebuilt): a timing line is ~170 bytes.
MAX_CACHE_BYTES = 256 * 2**20
#: The modules whose source decides a step timing: the provenance includes their digest.
TIMING_MODULES = ("pacopt.model.step", "pacopt.model.communication",
                  "pacopt.model.partition", "pacopt.model.first_fit",
                  "pacopt.model.topology", "pacopt.model.graph",
                  "pacopt.model.timing_cache")
_FIELDS = ("key", "step_ms", "exposed_ms", "from", "sum")


def cache_dir() -> Path:
    """Where timings persist: ``$PACOPT_CACHE_DIR`` or ``~/.cache/pacopt``."""
    return Path(os.environ.get("PACOPT_CACHE_DIR") or Path.home() / ".cache" / "pacopt")


@lru_cache(maxsize=1)
def code_version() -> str:
    """A digest of the source of :data:`TIMING_MODULES` (and :data:`TIMING_VERSION`)."""
    digest = hashlib.blake2b(str(TIMING_VERSION).encode(), digest_size=8)
    for name in TIMING_MODULES:
        try:
            digest.update(Path(importlib.import_module(name).__file__).read_bytes())
        except (OSError, TypeError):  # no source (a frozen install): the version number alone
            digest.update(name.encode())
    return digest.hexdigest()


def _digest(value) -> str:
    return hashlib.blake2b(json.dumps(value, sort_keys=True).encode(), digest_size=10).hexdigest()


def _checksum(origin: str, key: str, step_ms: float, exposed_ms: float) -> str:
    return _digest([origin, key, step_ms, exposed_ms])[:16]


class TimingFile:
    """One provenance's file of step timings (module doc): ``key -> (step_ms, exposed_ms)``."""

    def __init__(self, name: str, provenance: dict):
        self.provenance = {"version": TIMING_VERSION, "code": code_version(), **provenance}
        self.origin = _digest(self.provenance)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:60] or "graph"  # a name is no path
        self.path = cache_dir() / "timings" / f"{safe}-{self.origin}.jsonl"

    def line(self, key: str, step_ms: float, exposed_ms: float) -> str:
        """The checked line of one timing (with its newline)."""
        step_ms, exposed_ms = float(step_ms), float(exposed_ms)
        return json.dumps({"key": key, "step_ms": step_ms, "exposed_ms": exposed_ms,
                           "from": self.origin,
                           "sum": _checksum(self.origin, key, step_ms, exposed_ms)}) + "\n"

    def _parse(self, raw: bytes) -> tuple[str, float, float] | None:
        """The timing of one line, or None when it does not check."""
        try:
            entry = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None
        if not isinstance(entry, dict) or tuple(sorted(entry)) != tuple(sorted(_FIELDS)):
            return None
        key, step, exposed = entry["key"], entry["step_ms"], entry["exposed_ms"]
        if not (isinstance(key, str) and len(key) <= 64 and all(
                isinstance(v, float) and math.isfinite(v) and v >= 0 for v in (step, exposed))):
            return None
        if entry["from"] != self.origin or entry["sum"] != _checksum(self.origin, key, step,
                                                                      exposed):
            return None
        return key, step, exposed

    def load(self) -> dict[str, tuple[float, float]] | None:
        """The timings that check; None when the file must not be used or written (module
        doc). Warns, and rewrites the file with its good lines, when some did not check."""
        path = self.path
        try:
            if not path.exists():
                return {}
            if not path.is_file():
                warn(f"timing cache '{path}' is not a regular file: ignored (timings are kept in "
                     "memory only)")
                return None
            if path.stat().st_size > MAX_CACHE_BYTES:
                warn(f"timing cache '{path}' is larger than {MAX_CACHE_BYTES >> 20} MB: ignored "
                     "and rebuilt")
                self._rewrite([])
                return {}
            data = path.read_bytes()
        except OSError as err:
            warn(f"timing cache '{path}' cannot be read ({err.strerror}): ignored")
            return None
        store: dict[str, tuple[float, float]] = {}
        good: list[str] = []
        bad = 0
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            parsed = self._parse(raw)
            if parsed is None:
                bad += 1
                continue
            key, step, exposed = parsed
            if key not in store:
                good.append(self.line(key, step, exposed))
            store[key] = (step, exposed)
        if bad:
            warn(f"timing cache '{path}': {bad} line{'s' if bad > 1 else ''} corrupt or not "
                 "computed from this graph, cluster, model and code: ignored (recomputed)")
            self._rewrite(good)
        return store

    def _rewrite(self, lines: list[str]) -> None:
        try:
            write_atomically(self.path, "".join(lines), what="timing cache")
        except (InputError, OSError):  # a cache that cannot be cleaned is still not trusted
            return

    def append(self, timings: list[tuple[str, float, float]]) -> bool:
        """Append timings, each ``(key, step_ms, exposed_ms)`` (one ``write`` of their lines with
        ``O_APPEND``: safe across processes; a line cut short before them by a killed writer
        stays on its own line). False when the cache cannot be written."""
        path = self.path
        text = "".join(self.line(*timing) for timing in timings).encode()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and not path.is_file():
                return False
            # non-blocking: a FIFO put there since the check fails instead of waiting
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    text = b"\n" + text
                while text:  # a regular file takes it in one write, unless it fills up
                    text = text[os.write(fd, text):]
            finally:
                os.close(fd)
        except OSError:
            return False
        return True
