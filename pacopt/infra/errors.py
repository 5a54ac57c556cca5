"""The one exception type pacopt raises for bad user input (instances, graphs, results)."""


class InputError(ValueError):
    """Bad user input. The message names the offending field or file and says why."""
