"""The one exception type pacopt raises for bad user input (instances, graphs, results), and
the one warning category for what pacopt repaired or ignored on its own (a corrupt cache line)."""

import warnings


class InputError(ValueError):
    """Bad user input. The message names the offending field or file and says why."""


class PacoptWarning(UserWarning):
    """Something pacopt ignored or repaired and the user should know about (the commands print
    it as one ``warning: ...`` line; :mod:`warnings` filters apply as usual)."""


def warn(message: str) -> None:
    """Issue ``message`` as a :class:`PacoptWarning`."""
    warnings.warn(message, PacoptWarning, stacklevel=2)
