"""Mapping a picklable function over tasks: in this process, on a local process pool, or on Ray.

Each executor is a generator of ``(index, result)`` pairs, ``index`` being the task's place in
the list, yielded as the tasks finish (on a pool or on Ray, in any order). A task may ask for
several CPUs (``cpus``, one entry per task; default 1 each): the pool never runs more than its
workers' worth at once, and Ray reserves them (each capped at the pool's or the cluster's size).

Each honours the stop flag (:mod:`pacopt.infra.interrupt`): after a stop request no task starts;
on a pool, a task that raises KeyboardInterrupt (it was interrupted: its answer is not the
task's) yields nothing. :func:`in_turn` then returns; :func:`on_pool` sets the workers' stop
(:func:`~pacopt.infra.interrupt.follow_stop`) and yields what they still return within
:data:`STOP_GRACE_SECONDS`, after which :meth:`ProcessPool.shutdown` terminates the ones still
busy; :func:`on_ray` cancels its unfinished tasks. A caller that stops reading early (it closes
the generator) abandons the tasks not yielded: a pool's are told to stop, Ray's are cancelled.
The caller decides what a stop means (the study runner raises KeyboardInterrupt; training drops
the round).

The study runner (:mod:`pacopt.analysis.runner`) and the training's labelling
(:mod:`pacopt.learned.train`) both map their tasks through these.
"""

from __future__ import annotations

import copy
import multiprocessing
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

from pacopt.infra.interrupt import children_ignore_interrupts, follow_stop, stop_requested

#: Seconds a pool's busy workers get to end their task after a stop request before they are
#: terminated (a worker still importing torch, about 6 s, cannot look at the stop request
#: before then).
STOP_GRACE_SECONDS = 2.0
#: How often a waiting executor looks at the stop flag.
POLL_SECONDS = 0.25


def in_turn(function: Callable, tasks: Sequence) -> Iterator[tuple[int, Any]]:
    """``function`` of each task in this process, one after another; none starts after a stop
    request."""
    for index, task in enumerate(tasks):
        if stop_requested():
            return
        yield index, function(task)


class ProcessPool:
    """A local :class:`ProcessPoolExecutor` of ``workers`` processes (started by
    ``start_method``, e.g. ``"spawn"``; None: the platform's default) whose workers never see
    Ctrl-C themselves (they start with it ignored, so they print nothing) and follow
    :meth:`stop` instead. A context manager: leaving it shuts the pool down
    (:meth:`shutdown`). After a stop it runs nothing more."""

    def __init__(self, workers: int, start_method: str | None = None):
        context = multiprocessing.get_context(start_method)
        self.workers = workers
        self.stopped = context.Event()  # the workers' stop (follow_stop)
        self.grace_until: float | None = None  # set by the first stop: when to terminate
        self.executor = ProcessPoolExecutor(workers, mp_context=context, initializer=follow_stop,
                                            initargs=(self.stopped,))

    def stop(self) -> None:
        """Tell the workers to end their tasks (a task polling the stop flag ends early)."""
        if self.grace_until is None:
            self.grace_until = time.monotonic() + STOP_GRACE_SECONDS
        self.stopped.set()

    def shutdown(self) -> None:
        """Shut the pool down, waiting for its workers; after a stop request (or :meth:`stop`),
        a worker still busy :data:`STOP_GRACE_SECONDS` after the stop is terminated (its task
        is not wanted any more)."""
        if stop_requested() or self.grace_until is not None:
            self.stop()
            processes = list((getattr(self.executor, "_processes", None) or {}).values())
            self.executor.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                process.join(max(0.0, self.grace_until - time.monotonic()))
            for process in processes:
                if process.is_alive():
                    process.terminate()
        self.executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


def on_pool(pool: ProcessPool, function: Callable, tasks: Sequence,
            cpus: Sequence[int] | None = None) -> Iterator[tuple[int, Any]]:
    """``function`` of each task on ``pool``, at most the pool's workers' worth of CPUs at once,
    tasks started in their order (module doc)."""
    queue = list(enumerate(tasks))
    running: dict = {}  # future -> (index, CPUs)
    free = pool.workers
    try:
        while queue or running:
            while queue and not stop_requested():
                need = min(cpus[queue[0][0]] if cpus else 1, pool.workers)
                if need > free:
                    break
                index, task = queue.pop(0)
                free -= need
                with children_ignore_interrupts():  # a worker may start here
                    running[pool.executor.submit(function, task)] = (index, need)
            done, _ = wait(running, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
            if stop_requested():
                pool.stop()
                queue.clear()
                if time.monotonic() >= pool.grace_until:
                    return
            for future in done:
                index, need = running.pop(future)
                free += need
                try:
                    result = future.result()
                except KeyboardInterrupt:  # the task was interrupted
                    continue
                yield index, result
    finally:
        if running or stop_requested():  # abandoned or stopped: the workers stop their tasks
            pool.stop()


def on_ray(ray, function: Callable, tasks: Sequence,
           cpus: Sequence[int] | None = None) -> Iterator[tuple[int, Any]]:
    """``function`` of each task as a Ray task (``ray``: the module of an open session,
    :func:`~pacopt.infra.ray_cluster.ray_session`), each asking for its CPUs (default 1). The
    results are copied out of Ray's object store (its arrays are read-only views that must not
    outlive the session)."""
    remote = ray.remote(function)
    if cpus:
        total = int(ray.cluster_resources().get("CPU", 1))
        refs = {remote.options(num_cpus=min(cpus[index], total)).remote(task): index
                for index, task in enumerate(tasks)}
    else:
        refs = {remote.remote(task): index for index, task in enumerate(tasks)}
    try:
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1, timeout=POLL_SECONDS)
            if stop_requested():
                return
            if done:
                index = refs.pop(done[0])
                yield index, copy.deepcopy(ray.get(done[0]))
    finally:
        for ref in refs:  # on a stop, or when the caller stops reading
            ray.cancel(ref)
