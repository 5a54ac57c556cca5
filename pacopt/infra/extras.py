"""pacopt's optional dependencies (its extras), imported where a feature needs them.

``pip install pacopt`` is the core: the model, the online and exact methods, ``pac-ml``'s play
of the shipped agents, ``solve``, ``validate``, studies on a local pool, ``trace``. The rest is
in extras (``pyproject.toml``):

- ``learned``: torch, torch-geometric, stable-baselines3, sb3-contrib (training, the models
  pacopt profiles itself, ``pac-ml`` on a graph no shipped export embeds);
- ``ray``: Ray (``--ray``);
- ``plots``: matplotlib (a study's plots);
- ``parquet``: pyarrow (a study's ``results.parquet``; ``results.csv`` is always written).

Code that needs one imports it through :func:`require`: the module, or a :class:`MissingExtra`
that says in one line which extra to install (an :class:`InputError`, so a command prints it
and exits 2; also an ``ImportError``, for code that falls back when a module is missing).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from pacopt.infra.errors import InputError

#: Each optional top-level module -> the extra that installs it.
EXTRA_OF = {
    "torch": "learned", "torch_geometric": "learned", "stable_baselines3": "learned",
    "sb3_contrib": "learned", "ray": "ray", "matplotlib": "plots", "pyarrow": "parquet",
}


class MissingExtra(InputError, ModuleNotFoundError):
    """A feature ran whose extra is not installed: ``name`` is the missing module."""

    def __init__(self, what: str, extra: str, module: str):
        super().__init__(f"{what} needs the {extra} extra: pip install 'pacopt[{extra}]'")
        self.name, self.extra = module, extra


def require(extra: str, module: str, what: str | None = None) -> ModuleType:
    """``module`` imported, or a :class:`MissingExtra` naming ``extra``: "``what`` needs the
    ``extra`` extra: pip install 'pacopt[extra]'" (``what``: the feature, e.g. "pac-ml
    training"). A module that is there but fails to import for another reason raises as it
    does."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if isinstance(err, MissingExtra) or not _optional(err.name):
            raise
        raise MissingExtra(what or f"'{module}'", extra, err.name or module) from err


def available(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (a module already imported:
    True; one a test blocks: False)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_extra(err: ModuleNotFoundError, what: str) -> MissingExtra | None:
    """The :class:`MissingExtra` of ``err`` (an optional module missing, found deep in a
    feature's imports) as ``what``'s, or None for any other missing module."""
    if isinstance(err, MissingExtra):
        return err
    root = _optional(err.name)
    return None if root is None else MissingExtra(what, EXTRA_OF[root], root)


def _optional(name: str | None) -> str | None:
    """The optional top-level module ``name`` belongs to, if any."""
    root = (name or "").partition(".")[0]
    return root if root in EXTRA_OF else None
