"""What one machine can take, checked before the work: the size of a result, and the memory of
the offline methods' candidate enumeration.

The instance format allows up to :data:`~pacopt.model.input_spec.MAX_JOBS` jobs, but a result
records every op's block of every accepted job, so its size is jobs x ops, and it is read back
whole (``pacopt validate``, studies, notebooks). :func:`check_result_size` therefore refuses, in
one line and before any work, an instance whose result could exceed :data:`MAX_RESULT_BYTES`,
the most any pacopt reader takes (:data:`~pacopt.model.input_spec.MAX_FILE_BYTES`): so
``validate`` can read anything ``solve`` writes. The estimate is an upper bound (every job
accepted, every worker named); on the paper's graphs it allows about 190,000 jobs, whose run
(measured on 2 cores: 100,000 jobs in 40 s and 1.1 GB with ``min-feasible``, a 77 MB result,
validated in 18 s and 0.6 GB) stays within a few GB.

The offline methods (``milp``, ``cpsat``, ``bound``, ``lp-round``) enumerate every job's
candidate footprints; 1001 paper jobs give 183,000 of them, 10,000 jobs 1.9 million in 1.5 GB.
:func:`option_budget` is what the memory available now allows (half of it, at
:data:`OPTION_BYTES` each); the enumeration stops with one line when it would go beyond.
"""

from __future__ import annotations

import os

from pacopt.infra.errors import InputError
from pacopt.model.input_spec import MAX_FILE_BYTES

#: The largest result ``solve`` writes: the size every reader accepts.
MAX_RESULT_BYTES = MAX_FILE_BYTES
#: A job record's bytes besides its block labels and worker names (measured: 180 to 250).
RECORD_BYTES = 320
#: Memory per candidate footprint of the offline problem, everything around it included
#: (measured: 1.5 GB for 1.9 million on the paper workload).
OPTION_BYTES = 800
#: The option budget when the available memory cannot be read.
DEFAULT_OPTION_BUDGET = 5_000_000


def result_bytes_estimate(instance) -> int:
    """An upper bound on the bytes of ``instance``'s result (compact layout, every job
    accepted)."""
    cluster = instance.cluster
    name = len(cluster.server_name(cluster.num_servers - 1))
    label = 2 * name + 4  # "c-r-s:GxRxS" with quotes and a comma
    workers_cap = cluster.num_servers
    per_graph = {}
    for key, graph in instance.graphs.items():
        workers = min(workers_cap, graph.num_ops * instance.model.max_partitions_per_op)
        per_graph[key] = RECORD_BYTES + graph.num_ops * label + workers * (name + 3)
    return sum(per_graph[job.graph] for job in instance.jobs)


def check_result_size(instance) -> None:
    """InputError (one line, before any work) if ``instance``'s result could exceed
    :data:`MAX_RESULT_BYTES` (module doc)."""
    estimate = result_bytes_estimate(instance)
    if estimate > MAX_RESULT_BYTES:
        raise InputError(
            f"{len(instance.jobs)} jobs: the result could reach {estimate / 2**20:,.0f} MB, more "
            f"than the {MAX_RESULT_BYTES >> 20} MB pacopt reads back (validate, studies); run "
            "the episode in parts (fewer jobs each, e.g. consecutive arrival windows)")


def available_memory_bytes() -> int | None:
    """The memory available now (Linux's ``MemAvailable``; else the free pages), or None."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def option_budget() -> int:
    """How many candidate footprints the offline problem may hold (module doc)."""
    available = available_memory_bytes()
    if available is None:
        return DEFAULT_OPTION_BUDGET
    return max(1_000_000, available // 2 // OPTION_BYTES)


def options_too_many(count: int, jobs_done: int, jobs: int) -> InputError:
    """The one-line error of an enumeration that reached ``count`` options after ``jobs_done``
    of ``jobs`` jobs (the budget: :func:`option_budget`)."""
    projected = count * jobs // max(jobs_done, 1)
    return InputError(
        f"the offline problem of {jobs} jobs would hold about {projected:,} candidate "
        f"footprints, more than this machine's memory takes now ({count:,} reached after "
        f"{jobs_done} jobs); use an online method, or fewer jobs")
