"""Beam search over the jobs in arrival order: pacopt's strongest constructive heuristic for the
offline problem, and the exact search's first incumbent.

Offline every arrival is known, so a choice can be built job by job in arrival order. A job
conflicts only with the jobs already started and still running when it arrives: a footprint free
then stays free for its whole run, since later jobs are placed around it. A *state* after
deciding a job holds the accepted count, the occupied servers and the running jobs. Its children
are: reject the next job, or start it at each degree that has a free footprint, on its
best-fitting one (:meth:`~pacopt.solvers.best_fit.BestFit.place`, the footprint that leaves
the most free blocks). Children with the same count whose running jobs hold the same footprints
until the same times are the same state for the future; one of them is kept. Of all children the
``width`` best by

    value = accepted - FUTURE_WEIGHT * (worker-time the running jobs still hold) / (a job's worth)

survive, where a job's worth is the mean over jobs of their options' least worker-time. Without
the second term a state that took one more job by tying up servers far into the future always
wins, and the beam fills with such states.

:func:`beam_search` widens the beam (:data:`FIRST_WIDTH`, then doubling) while the next width is
expected to finish before its deadline, and keeps the best choice: a beam is not monotone in its
width (which of several equal choices survives decides much), hence the best of all widths is
kept. What each width accepts and costs, and how :data:`FUTURE_WEIGHT` was chosen:
``docs/experiments.md`` (Beam search).
"""

from __future__ import annotations

import heapq
import time
from bisect import insort
from typing import NamedTuple

import numpy as np

from pacopt.infra.interrupt import out_of_time
from pacopt.model.state import EPS_MS
from pacopt.solvers.best_fit import BestFit

FUTURE_WEIGHT = 0.5  # jobs' worth of value per job's worth of worker-time held into the future
FIRST_WIDTH = 50  # the first beam's width; each next one is twice as wide
WIDENING_COST = 2.2  # a beam twice as wide takes about this many times as long (measured)


class _State(NamedTuple):
    """A partial choice after deciding jobs in arrival order (module doc)."""

    accepted: int
    occupied: int  # bitmask of busy servers
    running: tuple[tuple[float, int, int, int], ...]  # (end, mask, workers, option), by end
    held: float  # sum of workers * end over ``running``
    workers: int  # sum of workers over ``running``
    chosen: tuple | None  # (job, option, the parent's chosen): the choice as a linked list

    def released(self, now_ms: float) -> _State:
        """This state once the jobs ending by ``now_ms`` have left."""
        done = 0
        while done < len(self.running) and self.running[done][0] <= now_ms + EPS_MS:
            done += 1
        if not done:
            return self
        occupied, held, workers = self.occupied, self.held, self.workers
        for end, mask, count, _ in self.running[:done]:
            occupied &= ~mask
            held -= count * end
            workers -= count
        return self._replace(occupied=occupied, running=self.running[done:], held=held,
                             workers=workers)

    def started(self, job: int, option: int, end: float, mask: int, workers: int) -> _State:
        """This state with ``job`` running on ``option``."""
        running = list(self.running)
        insort(running, (end, mask, workers, option))
        return _State(self.accepted + 1, self.occupied | mask, tuple(running),
                      self.held + workers * end, self.workers + workers,
                      (job, option, self.chosen))

    def key(self) -> tuple:
        """What the future depends on: states with equal keys are interchangeable."""
        return self.accepted, tuple(entry[:2] for entry in self.running)

    def choice(self) -> dict[int, int]:
        """The accepted jobs' options (job -> option)."""
        out, link = {}, self.chosen
        while link is not None:
            out[link[0]], link = link[1], link[2]
        return out


def beam_search(rule: BestFit, *, width: int = FIRST_WIDTH,
                deadline: float | None = None) -> dict[int, int]:
    """The best choice (job -> option, feasible) found by beams over ``rule``'s problem (module
    doc): one of ``width``, then, while the next is expected to end before ``deadline`` (a
    ``time.perf_counter()`` value), each twice as wide as the last. The first beam always runs
    to the end; a later one that the deadline cuts short anyway is completed from its best
    state by ``rule`` alone."""
    problem = rule.problem
    worth = float(np.mean([min(problem.options[k].worker_ms for k in ks)
                           for ks in problem.by_job if ks] or [1.0]))
    started = time.perf_counter()
    best, _ = _beam(rule, width, worth, None)
    took = time.perf_counter() - started
    while (deadline is not None and not out_of_time(deadline)
           and time.perf_counter() + WIDENING_COST * took < deadline):
        width *= 2
        started = time.perf_counter()
        choice, finished = _beam(rule, width, worth, deadline)
        took = time.perf_counter() - started
        if len(choice) > len(best):
            best = choice
        if not finished:
            break
    return best


def _beam(rule: BestFit, width: int, worth: float,
          deadline: float | None) -> tuple[dict[int, int], bool]:
    """One beam of ``width`` (``worth``: a job's worth of worker-time, module doc): its best
    choice, and whether it got through every job before ``deadline`` (if not, the best state so
    far is completed by ``rule`` alone)."""
    problem = rule.problem
    options, jobs = problem.options, problem.instance.jobs
    beam = [_State(0, 0, (), 0.0, 0, None)]
    for j, job in enumerate(jobs):
        now = job.arrival_ms
        if out_of_time(deadline):  # the deadline, or Ctrl-C (even for the first beam)
            state = max(beam, key=lambda s: _value(s, now, worth))
            running = [(end, k) for end, _, _, k in state.running]
            heapq.heapify(running)
            rest = rule.play(j, occupied=state.occupied, running=running)
            return {**state.choice(), **rest}, False
        children: dict[tuple, _State] = {}
        for parent in beam:
            here = parent.released(now)
            children.setdefault(here.key(), here)  # the job rejected
            if not problem.by_job[j]:
                continue
            for _, k in rule.placements(j, rule.free(j, here.occupied), here.occupied):
                option = options[k]
                child = here.started(j, k, option.end_ms, option.mask, option.workers)
                children.setdefault(child.key(), child)
        beam = heapq.nlargest(width, children.values(), key=lambda s: _value(s, now, worth))
    return max(beam, key=lambda s: s.accepted).choice(), True


def _value(state: _State, now_ms: float, worth: float) -> float:
    """The module doc's value: accepted jobs, less the worker-time still held after ``now_ms``."""
    return state.accepted - FUTURE_WEIGHT * (state.held - state.workers * now_ms) / worth
