"""What every command shares: a parser whose bad flag is a one-line error, and the wrapper that
turns bad input and Ctrl-C into a one-line message and an exit code, never a traceback.

Exit codes: 0 success, 1 a solution failed validation, 2 bad input (one line on stderr naming the
field or file and why, before any work), 130 interrupted (:data:`EXIT_INTERRUPTED`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable

from pacopt.infra.errors import InputError
from pacopt.infra.interrupt import EXIT_INTERRUPTED


class CommandParser(argparse.ArgumentParser):
    """argparse exits with its own usage text on a bad flag; make it a one-line InputError."""

    def error(self, message):
        raise InputError(message)


def command_parser(name: str, description: str, **kwargs) -> CommandParser:
    """The argument parser of ``pacopt`` subcommand ``name`` (``kwargs`` go to argparse)."""
    return CommandParser(prog=f"pacopt {name}", description=description, **kwargs)


def run_command(main: Callable[[list[str] | None], int], argv: list[str] | None) -> int:
    """Run ``main(argv)``; bad input and Ctrl-C become a one-line message and an exit code.

    ``argv=None`` is a command's own process: once it ends interrupted, further Ctrl-Cs are
    ignored, since all that is left is interpreter shutdown, where a KeyboardInterrupt would land
    in a library's finalizer (torch's then aborts in C++, "terminate called")."""
    try:
        code = main(argv)
    except InputError as err:
        print(f"error: {one_line(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `pacopt profile cnn | head`: the reader left, nothing is lost
        sys.stderr.close()
        return 0
    if argv is None and code == EXIT_INTERRUPTED:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


def one_line(text: str) -> str:
    """``text`` with control characters escaped: a value quoted from the input (an op id with a
    newline, say) cannot split the one error line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def emit_lines(lines: list[str]) -> None:
    """Print ``lines``; if the reader has gone (``| head``), stop printing quietly, so that the
    command still returns its own exit code."""
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's exit-time flush must not fail again
        os.close(devnull)
