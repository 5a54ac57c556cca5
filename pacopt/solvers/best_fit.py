"""Offline constructive heuristics: a degree rule that places each job on its best-fitting
footprint, and a hindsight rollout over it. The exact search's strongest cheap warm starts.

Offline, the exact models may give a job any of its candidate footprints
(:mod:`pacopt.formulations.offline`), and where it goes matters as much as its degree: RAMP's
blocks nest like a buddy allocator's (on 4x4x2 a 4x4x1 half holds two 4x2x1 blocks of 8, each two
2x2x1 blocks of 4, ...), and first-fit breaks the large ones up early. :class:`BestFit` decides
the jobs in arrival order by a ``fixed-or-min:K`` rule over the footprints free at each arrival
(K if one of degree K is free, else the smallest degree that has one, else reject) and puts each
job on the free footprint of its degree that leaves the most free blocks, large sizes weighted
most. The score is the online best-fit placer's (:class:`~pacopt.model.placers.FreeBlockScore`,
:data:`~pacopt.model.placers.WEIGHTS`): this rule is the online ``fixed-or-min:K`` under
``--placement best-fit``, played on the offline problem's options (which leave out footprints
that miss the deadline or end past the horizon, as the online rule's degrees do), and both give
the same choices job for job.

:func:`rollout_best_fit` improves on a rule by hindsight (every arrival is known offline): at
each arrival it tries every degree with a free footprint, and reject, by letting the rule play
the next ``horizon`` arrivals, and keeps the degree whose play accepts the most of them (ties go
to the rule's own degree), as :mod:`pacopt.online.rollout` does for online policies.

What best fit gains over first-fit on the paper workload, and what the rollout adds:
``docs/experiments.md`` (Warm starts).
"""

from __future__ import annotations

import heapq

import numpy as np

from pacopt.formulations.offline import OfflineProblem
from pacopt.infra.interrupt import out_of_time
from pacopt.model.placers import WEIGHTS, as_mask, free_block_score, mask_array
from pacopt.model.state import EPS_MS

#: Arrivals each rollout play covers after the job it decides.
ROLLOUT_HORIZON = 50


class BestFit:
    """The ``fixed-or-min:K`` rule with best-fit footprints on one offline problem (module doc).

    :meth:`play` decides a run of arrivals from a given cluster state: the occupancy bitmask and
    a heap of (end, option) of the options still running. Footprints are numpy arrays of
    bitmasks: ``uint64`` on clusters of up to 64 servers, Python integers beyond.
    """

    def __init__(self, problem: OfflineProblem, degree: int, weights: dict[int, float] = WEIGHTS,
                 shared: dict | None = None):
        self.problem = problem
        self.degree = degree
        self.name = f"best-fit fixed-or-min:{degree}"
        self.cluster = problem.instance.cluster
        self.scorer = free_block_score(self.cluster, tuple(weights.items()))
        # the options' arrays do not depend on K: rules with the same weights may share them
        # (``shared``), which on a large cluster saves a copy of every option's hits per rule
        self._jobs: dict[int, tuple[np.ndarray, ...]] = {} if shared is None else shared

    def options(self, job: int) -> tuple[np.ndarray, ...]:
        """Job ``job``'s options (built once): indices, degrees, footprints, workers, and the
        blocks each footprint hits (:meth:`~pacopt.model.placers.FreeBlockScore.hits`)."""
        if job not in self._jobs:
            options = self.problem.options
            ks = self.problem.by_job[job]
            masks = mask_array((options[k].mask for k in ks), self.cluster)
            self._jobs[job] = (np.asarray(ks, dtype=np.int64),
                               np.asarray([options[k].degree for k in ks], dtype=np.int64),
                               masks,
                               np.asarray([options[k].workers for k in ks], dtype=np.int64),
                               self.scorer.hits(masks))
        return self._jobs[job]

    def free(self, job: int, occupied: int) -> np.ndarray:
        """Which of the job's options are free under ``occupied``."""
        masks = self.options(job)[2]
        return (masks & as_mask(occupied, self.cluster)) == 0

    def rule(self, job: int, free: np.ndarray) -> int:
        """``fixed-or-min:K`` over the degrees with a free footprint (0: reject)."""
        degrees = self.options(job)[1][free]
        if not len(degrees):
            return 0
        return self.degree if (degrees == self.degree).any() else int(degrees.min())

    def place(self, job: int, degree: int, free: np.ndarray, occupied: int) -> int:
        """The free option of ``degree`` that leaves the most free blocks (weighted), then the
        fewest workers; ``degree`` must have a free option."""
        index, degrees = self.options(job)[:2]
        candidates = np.flatnonzero(free & (degrees == degree))
        return int(index[candidates[int(np.argmax(self._score(job, candidates, occupied)))]])

    def placements(self, job: int, free: np.ndarray, occupied: int) -> list[tuple[int, int]]:
        """(degree, option) for each degree with a free option: the option :meth:`place` picks
        for it, all degrees scored at once."""
        index, degrees = self.options(job)[:2]
        candidates = np.flatnonzero(free)
        if not len(candidates):
            return []
        # by degree, then best score first; the sort is stable, so ties go to the first option
        # as in place's argmax
        order = np.lexsort((-self._score(job, candidates, occupied), degrees[candidates]))
        ranked = candidates[order]
        firsts = np.unique(degrees[ranked], return_index=True)[1]
        best = ranked[firsts]
        return list(zip(degrees[best].tolist(), index[best].tolist()))

    def _score(self, job: int, candidates: np.ndarray, occupied: int) -> np.ndarray:
        """The best-fit score (:class:`~pacopt.model.placers.FreeBlockScore`) of each of
        ``candidates`` (positions in the job's options) placed on top of ``occupied``."""
        workers, hits = self.options(job)[3:]
        return self.scorer.score(hits[candidates], workers[candidates], occupied)

    def play(self, first: int = 0, stop: int | None = None, occupied: int = 0,
             running: list[tuple[float, int]] | None = None,
             forced: int | None = None) -> dict[int, int]:
        """Decide jobs ``first`` .. ``stop - 1`` (default: to the end) from the state
        (``occupied``, ``running``), the first one at degree ``forced`` if given (0 = reject; it
        must have a free option); returns job -> option of those it accepted."""
        options, jobs = self.problem.options, self.problem.instance.jobs
        stop = len(jobs) if stop is None else stop
        running = list(running or [])
        chosen: dict[int, int] = {}
        for j in range(first, stop):
            occupied = _release(running, occupied, jobs[j].arrival_ms, options)
            free = self.free(j, occupied)
            degree = forced if forced is not None and j == first else self.rule(j, free)
            if degree:
                occupied = self.admit(j, degree, free, occupied, running, chosen)
        return chosen

    def admit(self, job: int, degree: int, free: np.ndarray, occupied: int,
              running: list[tuple[float, int]], chosen: dict[int, int]) -> int:
        """Start ``job`` at ``degree`` on its best-fitting free option: record it in ``chosen``
        and ``running``; returns the occupancy with it."""
        k = self.place(job, degree, free, occupied)
        chosen[job] = k
        option = self.problem.options[k]
        heapq.heappush(running, (option.end_ms, k))
        return occupied | option.mask


def _release(running: list[tuple[float, int]], occupied: int, now_ms: float, options) -> int:
    """Pop the options ending by ``now_ms`` (within :data:`EPS_MS`) and free their servers."""
    while running and running[0][0] <= now_ms + EPS_MS:
        occupied &= ~options[heapq.heappop(running)[1]].mask
    return occupied


def rollout_best_fit(rule: BestFit, horizon: int = ROLLOUT_HORIZON,
                     deadline: float | None = None) -> dict[int, int]:
    """The hindsight rollout over ``rule`` (module doc): a feasible choice (job -> option). From
    ``deadline`` (a ``time.perf_counter()`` value) on, the rule decides the remaining jobs
    alone."""
    problem = rule.problem
    options, jobs = problem.options, problem.instance.jobs
    occupied, running, chosen = 0, [], {}
    for j in range(len(jobs)):
        if out_of_time(deadline):  # the deadline, or Ctrl-C
            chosen.update(rule.play(j, occupied=occupied, running=running))
            break
        occupied = _release(running, occupied, jobs[j].arrival_ms, options)
        free = rule.free(j, occupied)
        degree = rule.rule(j, free)
        if degree:
            stop = min(len(jobs), j + horizon + 1)
            candidates = [0, *sorted(set(rule.options(j)[1][free].tolist()))]
            accepted = {d: len(rule.play(j, stop, occupied, running, forced=d))
                        for d in candidates}
            best = max(accepted.values())
            if accepted[degree] < best:
                degree = next(d for d in candidates if accepted[d] == best)
        if degree:
            occupied = rule.admit(j, degree, free, occupied, running, chosen)
    return chosen
