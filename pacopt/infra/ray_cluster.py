"""Ray as the commands' ``--ray [ADDRESS]`` uses it (``pacopt study``, ``pacopt train``): the
option itself, the address check (nothing there is one line, exit 2, in seconds, not a hang) and
one Ray session started (a local instance of N CPUs) or joined (a cluster) with the same settings
everywhere. Ray is imported only when a session starts."""

from __future__ import annotations

import argparse
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from pacopt.infra.errors import InputError

#: ``--ray``'s value when it is given without an address: a local Ray instance started here.
LOCAL = "local"
#: Environment variables a Ray worker needs to see as the driver does (graph and cache folders).
FORWARDED_ENV = ("PACOPT_PIPEDREAM_DIR", "PACOPT_TRACES_DIR", "PACOPT_CACHE_DIR")
#: Seconds to wait for a TCP answer at a ``--ray`` address before saying nothing is there.
RAY_PROBE_SECONDS = 5.0
#: Ray's own limits on joining a cluster, unless the user set them: its defaults retry for many
#: minutes when the address answers but is not a Ray head (measured: 41 s with these).
RAY_JOIN_LIMITS = {"RAY_gcs_server_port_wait_time_s": "1", "RAY_py_gcs_connect_timeout_s": "10"}


def add_ray_option(parser: argparse.ArgumentParser, help: str) -> None:
    """``--ray [ADDRESS]``: absent (None), given alone (:data:`LOCAL`) or with an address."""
    parser.add_argument("--ray", nargs="?", const=LOCAL, metavar="ADDRESS", help=help)


def ray_address(option: str | None) -> str | None:
    """The cluster address in a ``--ray`` value (None: no cluster, a local instance or no Ray),
    checked (:func:`check_ray_address`)."""
    if option in (None, LOCAL):
        return None
    check_ray_address(option)
    return option


def check_ray_address(address: str) -> None:
    """InputError unless something answers at ``address`` (``host:port`` or
    ``ray://host:port``; ``auto`` is Ray's to resolve) within :data:`RAY_PROBE_SECONDS`: Ray itself
    would wait forever for a head that is not there."""
    if address == "auto":
        return
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--ray: '{address}' is not an address: give HOST:PORT, "
                         "ray://HOST:PORT or auto")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_PROBE_SECONDS):
            pass
    except OSError as err:
        reason = "no answer" if isinstance(err, TimeoutError) else (err.strerror or str(err))
        raise InputError(f"--ray: cannot reach a Ray cluster at '{address}' ({reason}); is one "
                         "running there? (`ray start --head` prints its address)") from None


@contextmanager
def ray_session(address: str | None, num_cpus: int) -> Iterator:
    """The ``ray`` module, initialised for the block: joined to the cluster at ``address``
    (checked first), or a local instance of ``num_cpus`` CPUs; the workers see
    :data:`FORWARDED_ENV` as this process does. A Ray already initialised here (say, by a
    benchmark) is used as it is and left running; one started here is shut down after the block.
    Failing to start or join is an :class:`InputError` (one line)."""
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        if address:
            check_ray_address(address)
            for name, value in RAY_JOIN_LIMITS.items():  # a port that is not Ray: fail, not hang
                os.environ.setdefault(name, value)
        try:
            ray.init(address=address, num_cpus=None if address else num_cpus,
                     include_dashboard=False, log_to_driver=False,
                     logging_level=logging.ERROR,  # no token-auth notice, no "Started ..." line
                     runtime_env={"env_vars": env} if env else None)
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as err:
            where = f"the Ray cluster at '{address}'" if address else "a local Ray instance"
            raise InputError(f"--ray: cannot start or join {where}: "
                             f"{str(err).splitlines()[0] if str(err) else type(err).__name__}"
                             ) from None
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()
