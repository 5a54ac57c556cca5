"""What every command shares: a parser whose bad flag is a one-line error, and the wrapper that
turns bad input and Ctrl-C into a one-line message and an exit code, never a traceback.

Exit codes: 0 success, 1 a solution failed validation, 2 bad input (one line on stderr naming the
field or file and why, before any work) or a machine fault (a full disk, a read-only folder, no
memory: one line naming the file), 130 interrupted (:data:`EXIT_INTERRUPTED`).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pacopt.infra.errors import InputError, PacoptWarning
from pacopt.infra.interrupt import EXIT_INTERRUPTED, own_process, own_process_done


class CommandParser(argparse.ArgumentParser):
    """argparse exits with its own usage text on a bad flag; make it a one-line InputError."""

    def error(self, message):
        raise InputError(message)


def command_parser(name: str, description: str, **kwargs) -> CommandParser:
    """The argument parser of ``pacopt`` subcommand ``name`` (``kwargs`` go to argparse)."""
    return CommandParser(prog=f"pacopt {name}", description=description, **kwargs)


def run_command(main: Callable[[list[str] | None], int], argv: list[str] | None) -> int:
    """Run ``main(argv)``; bad input, Ctrl-C and what the machine refuses (a full disk, a
    read-only folder, no memory) become a one-line message and an exit code, never a traceback.

    ``argv=None`` is a command's own process (:func:`pacopt.infra.interrupt.own_process`): a
    Ctrl-C raises at most once, and any later one (while the command saves what it has, or the
    interpreter shuts down, where a KeyboardInterrupt would land in a library's finalizer) ends
    the process at once with exit 130. Warnings of pacopt's own (:class:`PacoptWarning`) print
    as one ``warning: ...`` line."""
    if argv is None:
        own_process()
    try:
        with _warning_lines():
            code = main(argv)
    except InputError as err:
        print(f"error: {one_line(str(err))}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `pacopt profile cnn | head`: the reader left, nothing is lost
        sys.stderr.close()
        code = 0
    except OSError as err:  # the machine said no: a full disk, a read-only folder, a lost mount
        print(f"error: {one_line(machine_error(err))}", file=sys.stderr)
        code = 2
    except MemoryError:
        print("error: out of memory (see docs/faults.md for the sizes this machine can take)",
              file=sys.stderr)
        code = 2
    if argv is None:
        own_process_done()
    return code


def machine_error(err: OSError) -> str:
    """One line for an operating-system error: what failed, on which file, and why."""
    reason = ("no space left on the device" if err.errno in (errno.ENOSPC, errno.EDQUOT)
              else err.strerror or str(err) or type(err).__name__)
    files = [f"'{name}'" for name in (err.filename, err.filename2) if name is not None]
    return f"{' -> '.join(files) + ': ' if files else ''}{reason}"


@contextmanager
def _warning_lines() -> Iterator[None]:
    """Within the block, a :class:`PacoptWarning` prints as ``warning: MESSAGE`` on stderr."""
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, PacoptWarning):
            print(f"warning: {one_line(str(message))}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


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
