"""The base of the instance format's pydantic models, and one-line error messages from them.

Every model of the format (``docs/formats.md``) derives from :class:`SpecModel`, whose
:meth:`SpecModel.parse` turns any validation failure into one :class:`InputError` naming the
field path (``jobs[2].arrival_ms: ...``).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Self, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from pacopt.infra.errors import InputError

# ----- size limits --------------------------------------------------------------------------------
# Far above real use (the paper: 1001 jobs on 32 servers, graphs of tens to hundreds of ops), and
# checked before anything is allocated, so that a typo (num_jobs 1e12, a 100000 x 1000 x 2
# cluster) is one line of error instead of minutes of work and an out-of-memory crash.
MAX_JOBS = 1_000_000  # explicit and generated jobs together
MAX_SERVERS = 4096  # communication_groups x racks_per_group x servers_per_rack
MAX_OPS = 100_000  # forward ops of one graph
MAX_DEPS = 1_000_000  # forward dependencies of one graph
MAX_FILE_BYTES = 256 * 2**20  # an instance, graph or result file
MAX_MS = 1e12  # any time: an op, an arrival, the horizon (about 30 years)
MAX_BYTES = 1e18  # any size: an activation, parameters, a worker's memory (an exabyte)
MIN_QUANTUM_MS = 1e-9  # op time / quantum stays a finite split count

# ----- instance-format models ---------------------------------------------------------------------
_TAGS: set[str] = set()  # union-member tags: pydantic puts them in error locations; we drop them


def field_path(parts: Iterable[str | int]) -> str:
    """``("jobs", 2, "arrival_ms")`` -> ``jobs[2].arrival_ms``; other keys are quoted:
    ``graphs["a b"]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][\w]*", part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out


def _got(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."  # one readable line


#: Problems one error line lists; the rest are counted (a file with a million bad jobs must
#: still give a line a terminal can show).
LISTED_PROBLEMS = 20


def _describe(err: ValidationError, loc: tuple = ()) -> str:
    """One line for a pydantic error: every problem's field path and reason (JSON terms), up to
    :data:`LISTED_PROBLEMS` of them."""
    errors = err.errors(include_url=False)
    shown = [_problem(error, loc) for error in errors[:LISTED_PROBLEMS]]
    extra = len(errors) - len(shown)
    return "; ".join(shown) + (f" (and {extra} more problem{'s' if extra > 1 else ''})"
                               if extra else "")


def _problem(first: dict, loc: tuple) -> str:
    """``path: reason`` for one pydantic error."""
    parts = loc + tuple(p for p in first["loc"] if p not in _TAGS)
    kind = first["type"]
    if kind == "unknown_field":
        parts += (first["ctx"]["field"],)
        reason = first["msg"]
    elif kind == "missing":
        reason = "required field is missing"
    elif kind == "value_error":
        reason = str(first["ctx"]["error"])
    elif kind == "form":
        reason = f"{first['msg']}, got {_got(first['input'])}"
    elif kind in ("too_short", "too_long"):
        bound = "at least" if kind == "too_short" else "at most"
        limit = first["ctx"]["min_length" if kind == "too_short" else "max_length"]
        reason = f"must have {bound} {limit} entries, got {first['ctx']['actual_length']}"
    else:
        reason = ("must be an object" if kind in ("model_type", "dict_type")
                  else first["msg"].replace("Input should be", "must be", 1))
        reason += f", got {_got(first['input'])}"
    return f"{field_path(parts) or 'instance'}: {reason}"


class SpecModel(BaseModel):
    """Base of the instance-format models.

    Strict (JSON types only: no ``"1"`` for 1), finite numbers, unknown fields rejected with the
    closest known name. Validate user data with :meth:`parse`, which turns every failure into one
    :class:`InputError` line. (``__init__`` is not overridden for that: pydantic would then call it
    for nested models too.)
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    @classmethod
    def parse(cls, data: Any, loc: tuple[str | int, ...] = ()) -> Self:
        """Validate ``data`` (parsed JSON) found at field path ``loc``; raises :class:`InputError`."""
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            raise InputError(_describe(err, loc)) from None

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        # Checked here rather than by extra="forbid" alone, to suggest the field meant.
        if isinstance(data, dict):
            for key in data:
                if key not in cls.model_fields:
                    close = difflib.get_close_matches(str(key), list(cls.model_fields), n=1)
                    hint = f"did you mean '{close[0]}'?" if close else \
                        "known fields: " + ", ".join(cls.model_fields)
                    raise PydanticCustomError("unknown_field", "unknown field ({hint})",
                                              {"field": key, "hint": hint})
        return data


def tagged_union(members: Mapping[str, Any], choose: Callable[[Any], str | None], error: str):
    """A union type validated only as the member ``choose(raw value)`` names.

    Plain unions report every member's complaint; this reports the one the user meant, or
    ``error`` when ``choose`` returns None. Tags are dropped from error paths.
    """
    _TAGS.update(members)
    by_type = {t: tag for tag, t in members.items() if isinstance(t, type)}

    def discriminate(value: Any) -> str | None:
        return by_type[type(value)] if type(value) in by_type else choose(value)

    return Annotated[Union[tuple(Annotated[t, Tag(tag)] for tag, t in members.items())],
                     Discriminator(discriminate, custom_error_type="form",
                                   custom_error_message=error)]


def check_file(path: str | Path, what: str = "file") -> Path:
    """``path`` if it is a readable file of at most :data:`MAX_FILE_BYTES` (checked before
    reading it); else InputError saying which ``what`` and why."""
    path = Path(path)
    try:
        if path.is_dir():
            raise InputError(f"{what} '{path}' is a folder, not a file")
        if path.exists() and not path.is_file():  # a FIFO with no writer would block for ever
            raise InputError(f"{what} '{path}' is not a regular file")
        size = path.stat().st_size
    except OSError as err:
        raise InputError(f"cannot read {what} '{path}': {err.strerror}") from None
    if size > MAX_FILE_BYTES:
        raise InputError(f"{what} '{path}' is {size / 2**20:.0f} MB; pacopt reads files of at "
                         f"most {MAX_FILE_BYTES // 2**20} MB")
    return path
