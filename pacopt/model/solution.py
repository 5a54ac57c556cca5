"""The solution object every method returns, and its JSON result format (``docs/formats.md``).

A :class:`Solution` lists one :class:`JobRecord` per arrived job. Accepted jobs carry their degree,
their footprint (``workers``, names ``c-r-s``) and ``blocks``: one block label per forward op
(e.g. ``0-0-0:4x4x1``), from which anyone can re-derive the placement and so the JCT. Blocked jobs
carry a ``reason``: ``rejected`` (the method chose degree 0), ``no_placement``, ``deadline`` or
``horizon``. ``placement`` records where the jobs' footprints came from: the online simulator's
placer (``first-fit``, ``best-fit``, ``compact``), or ``offline`` for the methods that choose
every footprint themselves.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from pacopt.infra.errors import InputError
from pacopt.infra.safe_write import check_replaceable, write_atomically

STATUSES = ("optimal", "feasible", "infeasible", "heuristic", "error")
REASONS = ("rejected", "no_placement", "deadline", "horizon")


@dataclass
class JobRecord:
    """What happened to one job."""

    id: str
    graph: str
    arrival_ms: float
    max_jct_fraction: float
    deadline_ms: float
    accepted: bool
    degree: int = 0
    workers: list[str] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    start_ms: float | None = None
    jct_ms: float | None = None
    comm_overhead_ms: float | None = None
    reason: str | None = None

    @property
    def end_ms(self) -> float | None:
        return None if self.start_ms is None or self.jct_ms is None else self.start_ms + self.jct_ms

    def to_dict(self) -> dict:
        """The record as its JSON object: ``dataclasses.asdict``'s, without the deep copy that
        was most of a long result's writing."""
        return {name: list(value) if isinstance(value, list) else value
                for name, value in vars(self).items()}


@dataclass
class Solution:
    """A method's answer for one instance, in the result format."""

    method: str
    preset: str
    status: str
    jobs: list[JobRecord]
    instance: str | None = None
    placement: str | None = None  # the placer (online) or "offline"; None: not recorded
    bound_accepted: int | None = None
    gap: float | None = None
    solve_seconds: float = 0.0
    validated: bool = False
    seed: int | None = None
    #: Ctrl-C stopped the method: the solution is its incumbent then (still validated)
    interrupted: bool = False
    time_limit: float | None = None  # seconds the method was given (None: not time-limited)
    threads: int | None = None  # solver threads the method used (None: single-threaded)
    metrics: dict = field(default_factory=dict)

    @property
    def arrived(self) -> int:
        return len(self.jobs)

    @property
    def accepted(self) -> int:
        return sum(job.accepted for job in self.jobs)

    @property
    def blocking_rate(self) -> float:
        # blocked / arrived, not 1 - accepted / arrived: 19 / 100 is 0.19, not 0.18999999999999995
        return (self.arrived - self.accepted) / self.arrived if self.jobs else 0.0

    def to_dict(self) -> dict:
        """The JSON result: summary keys first, then metrics, then the per-job records."""
        return {"instance": self.instance, "method": self.method, "preset": self.preset,
                "placement": self.placement, "status": self.status, "accepted": self.accepted, "arrived": self.arrived,
                "blocking_rate": self.blocking_rate, "bound_accepted": self.bound_accepted,
                "gap": self.gap, "solve_seconds": self.solve_seconds, "validated": self.validated,
                "seed": self.seed, "interrupted": self.interrupted, "time_limit": self.time_limit,
                "threads": self.threads, "metrics": self.metrics,
                "jobs": [job.to_dict() for job in self.jobs]}

    def dumps(self) -> str:
        """The result JSON: the summary and metrics indented, then one line per job (compact:
        a long episode's file is a quarter smaller than with every field indented, and can be
        read job by job, ``grep`` included)."""
        data = _finite(self.to_dict())
        jobs = data.pop("jobs")
        head = json.dumps(data, indent=1)[:-2]  # without its closing "\n}"
        body = ",\n".join("  " + json.dumps(job, separators=(",", ":")) for job in jobs)
        return f'{head},\n "jobs": [\n{body}\n ]\n}}' if jobs else f'{head},\n "jobs": []\n}}'

    def save(self, path: str | Path) -> None:
        """Write the result JSON atomically (a partial file is never left behind); InputError
        if ``path`` cannot be written (see :func:`check_output_path`)."""
        write_atomically(check_output_path(path), self.dumps())

    @classmethod
    def from_dict(cls, data: dict) -> Solution:
        """Read a result JSON dict back, checking every field's type (InputError naming the
        first wrong one); the derived summary keys are recomputed, not trusted."""
        if not isinstance(data, dict):
            raise InputError("not a pacopt result: must be a JSON object")
        _check_fields(data, _SOLUTION_TYPES, "")
        if not isinstance(data["jobs"], list):
            raise InputError("not a pacopt result: jobs must be a list")
        for i, job in enumerate(data["jobs"]):
            if not isinstance(job, dict):
                raise InputError(f"not a pacopt result: jobs[{i}] must be an object")
            _check_fields(job, _JOB_TYPES, f"jobs[{i}].")
        jobs = [JobRecord(**{k: v for k, v in job.items() if k in _JOB_TYPES})
                for job in data["jobs"]]
        return cls(jobs=jobs, **{k: v for k, v in data.items()
                                 if k in _SOLUTION_TYPES and k != "jobs"})

    @classmethod
    def load(cls, path: str | Path) -> Solution:
        """Read a result file; InputError naming the file and why if it is not one."""
        from pacopt.model.instance import read_json_file

        data = read_json_file(path, "result")
        try:
            return cls.from_dict(data)
        except InputError as err:
            raise InputError(f"result '{path}': {err}") from None


# ----- reading results back: field types ------------------------------------------------------
_NUMBER, _INT, _TEXT, _FLAG = "a number", "an integer", "a string", "true or false"
#: field -> (kind, may be null, required); the result format of ``docs/formats.md``.
_SOLUTION_TYPES = {
    "method": (_TEXT, False, True), "preset": (_TEXT, False, True),
    "placement": (_TEXT, True, False),
    "status": (_TEXT, False, True), "jobs": ("a list", False, True),
    "instance": (_TEXT, True, False), "bound_accepted": (_INT, True, False),
    "gap": (_NUMBER, True, False), "solve_seconds": (_NUMBER, False, False),
    "validated": (_FLAG, False, False), "seed": (_INT, True, False),
    "interrupted": (_FLAG, False, False), "time_limit": (_NUMBER, True, False),
    "threads": (_INT, True, False), "metrics": ("an object", False, False),
}
_JOB_TYPES = {
    "id": (_TEXT, False, True), "graph": (_TEXT, False, True),
    "arrival_ms": (_NUMBER, False, True), "max_jct_fraction": (_NUMBER, False, True),
    "deadline_ms": (_NUMBER, False, True), "accepted": (_FLAG, False, True),
    "degree": (_INT, False, False), "workers": ("a list of strings", False, False),
    "blocks": ("a list of strings", False, False), "start_ms": (_NUMBER, True, False),
    "jct_ms": (_NUMBER, True, False), "comm_overhead_ms": (_NUMBER, True, False),
    "reason": (_TEXT, True, False),
}


def _is(kind: str, value) -> bool:
    if kind == _NUMBER:
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value))
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _TEXT:
        return isinstance(value, str)
    if kind == _FLAG:
        return isinstance(value, bool)
    if kind == "a list":
        return isinstance(value, list)
    if kind == "an object":
        return isinstance(value, dict)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _check_fields(data: dict, types: dict, where: str) -> None:
    """InputError naming the first field of ``data`` missing or of the wrong type."""
    for key, (kind, nullable, required) in types.items():
        if key not in data:
            if required:
                raise InputError(f"not a pacopt result: missing key '{where}{key}'")
            continue
        value = data[key]
        if not (value is None and nullable) and not _is(kind, value):
            raise InputError(f"not a pacopt result: {where}{key} must be {kind}"
                             f"{' or null' if nullable else ''}, got {json.dumps(value)[:40]}")


def check_output_path(path: str | Path, inputs: tuple[str | Path, ...] = ()) -> Path:
    """``path`` as a Path if a result can be written there: its folder exists and is writable,
    it is not a folder, a device or any other non-regular file, and it is none of ``inputs``
    (the instance a result must never overwrite); else InputError. Called before any work, so a
    bad ``--out`` costs nothing, and again when saving."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"--out '{path}' is a folder; give a file name")
    check_replaceable(path)
    for source in inputs:
        if path.exists() and Path(source).exists() and os.path.samefile(path, source):
            raise InputError(f"--out '{path}' is the input '{source}'; a result would replace it")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"--out '{path}': folder '{folder}' does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(f"--out '{path}': not writable")
    return path


def _finite(value):
    """JSON has no NaN/inf: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
