"""Randomised rounding of the offline LP (``--method lp-round``), after Yu et al. (TNSE 2021).

Yu, Liu, Wu, Ji and Bentley (arXiv 2108.02917) write joint resource allocation and locality as a
mixed packing and covering integer programme and round its LP relaxation. Only their abstract is
at hand; this is pacopt's own design on pacopt's offline problem
(:mod:`pacopt.formulations.offline`), a fast method with a worst-case guarantee next to the
exact search.

The LP has one column per option (a full configuration, so the covering side holds by
construction) and packing rows: at most one option per job and per conflict row. Each job takes
option k with probability ``alpha * x_k``; in arrival order a pick that meets one already kept
is dropped or re-placed (*alteration*), the jobs left out are re-placed and :func:`repair`
makes room for more; the best of ``rounds`` roundings is kept. With ``alpha = 1/(2W)`` (W the
widest footprint) the expected count is at least ``OPT (1 - EPS_COST) / (4W)`` for the whole
LP. By default the LP covers ``window`` consecutive arrivals at a time (windows overlap by half
and commit their first half), because the whole LP is slow to solve and rounds worse; the
guarantee then holds per window. The bound reported is the whole LP's floor when it was solved,
else the worker-count LP's (:mod:`pacopt.formulations.bound`).

The LP, the rounding, the guarantee's proof, the windows and the bound are described in
``docs/notes/lp_round.md``; what was measured, in ``docs/experiments.md`` (lp-round).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from pacopt.formulations.bound import worker_count_bound
from pacopt.formulations.offline import (
    OfflineProblem,
    Option,
    build_problem,
    check_choice,
    conflict_rows,
    to_solution,
)
from pacopt.formulations.packing_lp import solve_lp
from pacopt.infra.interrupt import OutOfTime, stop_requested
from pacopt.infra.progress import tqdm
from pacopt.model.episode_stats import episode_metrics
from pacopt.model.instance import Instance
from pacopt.model.jct import JctModel
from pacopt.model.solution import Solution
from pacopt.model.state import EPS_MS

#: Jobs per LP by default (windows overlap by half; see the module doc).
DEFAULT_WINDOW = 20
DEFAULT_ROUNDS = 48
#: Scaling factors of the rounds other than the guarantee's; they cycle.
SCALES = (1.0, 0.9, 0.75, 0.5)


# ----- conflict checks against what is taken ----------------------------------------------------
class Board:
    """The options taken so far (one per job), for fast conflict checks of many options of one
    job at once.

    Two options conflict when they share a server and one runs at the other's start (the rule
    of :func:`pacopt.formulations.offline.maximal_cliques`, with its tolerance): the same
    conflicts as the problem's clique rows, checked on footprint bitmasks.
    """

    def __init__(self, wide: bool):
        self.dtype = object if wide else np.int64  # masks beyond 63 servers stay Python ints
        self.taken: dict[int, tuple[float, float, int]] = {}  # job -> (start, end, mask)
        self._arrays = None

    def copy(self) -> Board:
        board = Board(self.dtype is object)
        board.taken = dict(self.taken)
        return board

    def take(self, job: int, start: float, end: float, mask: int) -> None:
        self.taken[job] = (start, end, mask)
        self._arrays = None

    def drop(self, job: int) -> None:
        del self.taken[job]
        self._arrays = None

    def _sorted(self):
        if self._arrays is None:
            jobs = np.fromiter(self.taken, dtype=np.int64, count=len(self.taken))
            values = list(self.taken.values())
            starts = np.array([v[0] for v in values], dtype=float)
            order = np.argsort(starts, kind="stable")
            self._arrays = (jobs[order], starts[order],
                            np.array([v[1] for v in values], dtype=float)[order],
                            np.array([v[2] for v in values], dtype=self.dtype)[order])
        return self._arrays

    def free(self, start: float, ends: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """Which of one job's options (all starting at ``start``; ``ends`` and ``masks`` per
        option) conflict with nothing taken."""
        if not self.taken:
            return np.ones(len(ends), dtype=bool)
        _, starts, taken_ends, taken_masks = self._sorted()
        head = np.searchsorted(starts, start, side="right")  # taken[:head] start at or before
        running = taken_ends[:head] > start + EPS_MS
        busy = np.bitwise_or.reduce(taken_masks[:head][running]) if running.any() else 0
        later = taken_masks[head:]
        after = 0
        if len(later):
            # a later start conflicts with an option still running then (end > its start + EPS)
            reach = np.searchsorted(starts[head:], ends - EPS_MS, side="left")
            cumulative = np.bitwise_or.accumulate(later)
            after = np.where(reach > 0, cumulative[np.maximum(reach - 1, 0)], 0)
        return (masks & (after | busy)) == 0

    def blockers(self, start: float, ends: np.ndarray, masks: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
        """For each of one job's options (as in :meth:`free`): how many taken jobs it conflicts
        with, and one of them (-1 if none)."""
        if not self.taken:
            return np.zeros(len(ends), dtype=int), np.full(len(ends), -1)
        jobs, starts, taken_ends, taken_masks = self._sorted()
        overlap = np.where(starts[None, :] <= start, (taken_ends > start + EPS_MS)[None, :],
                           starts[None, :] < ends[:, None] - EPS_MS)
        hit = overlap & ((taken_masks[None, :] & masks[:, None]) != 0)
        count = hit.sum(axis=1)
        return count, np.where(count > 0, jobs[hit.argmax(axis=1)], -1)


@dataclass
class _Columns:
    """Per-option arrays of one problem, for the rounding loops."""

    start: np.ndarray
    end: np.ndarray
    mask: np.ndarray
    worker_ms: np.ndarray
    degree: np.ndarray

    @classmethod
    def of(cls, options: list[Option], wide: bool) -> _Columns:
        return cls(start=np.array([o.start_ms for o in options], dtype=float),
                   end=np.array([o.end_ms for o in options], dtype=float),
                   mask=np.array([o.mask for o in options], dtype=object if wide else np.int64),
                   worker_ms=np.array([o.worker_ms for o in options], dtype=float),
                   degree=np.array([o.degree for o in options], dtype=int))


# ----- one rounding -----------------------------------------------------------------------------
def _take(board: Board, columns: _Columns, job: int, k: int) -> None:
    board.take(job, columns.start[k], columns.end[k], columns.mask[k])


def _fits(board: Board, columns: _Columns, ks: np.ndarray) -> np.ndarray:
    """Which of one job's options ``ks`` fit beside everything on ``board``."""
    return board.free(columns.start[ks[0]], columns.end[ks], columns.mask[ks])


def round_once(by_job: dict[int, np.ndarray], x: np.ndarray, columns: _Columns, board: Board,
               alpha: float, rng: np.random.Generator, replace: bool = True,
               by_degree: bool = False) -> dict[int, int]:
    """One randomised rounding of ``x`` with scaling ``alpha``, alteration in arrival order and
    (if ``replace``) re-placement of the jobs left out; ``by_job`` maps each job to its option
    indices in order of preference (LP value, then worker-time); ``board`` holds what is already
    committed and receives what this round takes. Returns job -> option."""
    chosen: dict[int, int] = {}
    draws = rng.random(len(by_job))
    for (j, ks), u in zip(sorted(by_job.items()), draws):
        pick = int(np.searchsorted(np.cumsum(alpha * x[ks]), u, side="right"))
        if pick < len(ks):
            chosen[j] = int(ks[pick])
    for j in sorted(chosen):  # alteration: keep in arrival order unless it meets a kept one
        k = chosen[j]
        ks = np.array([k])
        if by_degree:
            ks = by_job[j][columns.degree[by_job[j]] == columns.degree[k]]
        ok = np.flatnonzero(_fits(board, columns, ks))
        if len(ok):
            chosen[j] = int(ks[ok[0]])
            _take(board, columns, j, chosen[j])
        else:
            del chosen[j]
    if replace:
        for j, ks in sorted(by_job.items()):
            if j not in chosen:
                ok = np.flatnonzero(_fits(board, columns, ks))
                if len(ok):
                    chosen[j] = int(ks[ok[0]])
                    _take(board, columns, j, chosen[j])
    return chosen


def repair(by_job: dict[int, np.ndarray], columns: _Columns, board: Board,
           chosen: dict[int, int]) -> int:
    """Re-place to make room: each job left out (arrival order) tries its options (preference
    order) that meet exactly one job of ``chosen``; it is accepted when that job can move to
    another option beside it. Repeats while it gains; returns the jobs gained. A stop request
    (Ctrl-C) ends it between jobs, the choice consistent with the board."""
    gained, improved = 0, True
    while improved:
        improved = False
        for j, ks in sorted(by_job.items()):
            if stop_requested():
                return gained
            if j in chosen:
                continue
            count, blocker = board.blockers(columns.start[ks[0]], columns.end[ks], columns.mask[ks])
            for k, c in zip(ks[count == 1], blocker[count == 1]):
                c = int(c)
                if c not in chosen:  # committed earlier (another window): stays
                    continue
                board.drop(c)
                _take(board, columns, j, int(k))
                ok = np.flatnonzero(_fits(board, columns, by_job[c]))
                if len(ok):
                    chosen[j], chosen[c] = int(k), int(by_job[c][ok[0]])
                    _take(board, columns, c, chosen[c])
                    gained, improved = gained + 1, True
                    break
                board.drop(j)
                _take(board, columns, c, chosen[c])
    return gained


def _preference(ks: list[int], x: np.ndarray, columns: _Columns) -> np.ndarray:
    """One job's options in order of preference: LP value, then worker-time, then index."""
    return np.array(sorted(ks, key=lambda k: (-x[k], columns.worker_ms[k], k)), dtype=np.int64)


def guarantee_scale(widths: np.ndarray) -> float:
    """The scaling factor of the guarantee, 1 / (2 W), W the widest footprint."""
    return 1.0 / (2.0 * max(int(widths.max()) if len(widths) else 1, 1))


def best_rounding(by_job: dict[int, np.ndarray], x: np.ndarray, columns: _Columns, board: Board,
                  widths: np.ndarray, rounds: int, seed_sequence: np.random.SeedSequence
                  ) -> tuple[dict[int, int], Board]:
    """The best of ``rounds`` roundings (most jobs, then least worker-time): round 0 at the
    guarantee's scale, the others cycling through :data:`SCALES`; each starts from a copy of
    ``board``. Returns the choice and the board holding it."""
    best: tuple[tuple[int, float], dict[int, int], Board] | None = None
    for r, child in enumerate(seed_sequence.spawn(max(rounds, 1))):
        alpha = guarantee_scale(widths) if r == 0 else SCALES[(r - 1) % len(SCALES)]
        trial = board.copy()
        chosen = round_once(by_job, x, columns, trial, alpha, np.random.default_rng(child),
                            by_degree=r > 0)
        repair(by_job, columns, trial, chosen)
        score = (len(chosen), -float(sum(columns.worker_ms[k] for k in chosen.values())))
        if best is None or score > best[0]:
            best = (score, chosen, trial)
        if stop_requested():
            break
    return best[1], best[2]


# ----- the method ---------------------------------------------------------------------------------
@dataclass
class RoundingResult:
    """lp-round's answer: ``chosen`` (job -> option), the LP bound (None when only windows were
    solved), the number of LPs solved and the seconds spent in them."""

    chosen: dict[int, int]
    lp_bound: int | None
    lps: int
    lp_seconds: float


def lp_round(problem: OfflineProblem, *, seed: int = 0, rounds: int = DEFAULT_ROUNDS,
             window: int | None = DEFAULT_WINDOW, progress: bool = False) -> RoundingResult:
    """Round the LP of ``problem`` (module doc). ``window``: jobs per LP, consecutive windows
    overlapping by half (None: one LP over the whole problem, which has the guarantee and gives
    the bound). The same seed always gives the same answer. ``progress`` shows a bar over the
    windows (on a terminal)."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    if window is not None and window < 1:
        raise ValueError("window must be >= 1 job")
    wide = problem.instance.cluster.num_servers > 62
    columns = _Columns.of(problem.options, wide)
    widths = np.array([o.workers for o in problem.options], dtype=int)
    board = Board(wide)
    chosen: dict[int, int] = {}
    jobs = [j for j in range(problem.num_jobs) if problem.by_job[j]]
    window = len(jobs) if window is None else window
    step = max(1, window // 2) if window < len(jobs) else window
    starts = range(0, max(len(jobs) - window, 0) + step, step)
    seeds = np.random.SeedSequence(seed).spawn(len(starts))
    lp_bound, lps, lp_seconds = None, 0, 0.0
    x = np.zeros(len(problem.options))  # each option's value in the last LP that had it
    for w, first in enumerate(tqdm(starts, desc="lp-round", unit="window", leave=False,
                                   disable=None if progress else True)):
        if stop_requested():
            break
        members = jobs[first:first + window]
        last = first + window >= len(jobs)
        # the options of this window that avoid everything committed so far
        local: list[int] = []
        for j in members:
            ks = np.asarray(problem.by_job[j])
            free = board.free(columns.start[ks[0]], columns.end[ks], columns.mask[ks])
            local += ks[free].tolist()
        if not local:
            continue
        options = [problem.options[k] for k in local]
        local_by_job: dict[int, list[int]] = {}
        for i, option in enumerate(options):
            local_by_job.setdefault(option.job, []).append(i)
        try:
            rows = (problem.rows if len(local) == len(problem.options)
                    else conflict_rows(options))
        except OutOfTime:  # Ctrl-C: the windows committed so far stand
            break
        started = time.perf_counter()
        point = solve_lp(options, list(local_by_job.values()), rows)
        lp_seconds += time.perf_counter() - started
        lps += 1
        if len(local) == len(problem.options):
            lp_bound = point.accepted_bound
        x[local] = point.x
        preference = {j: _preference([local[i] for i in ids], x, columns)
                      for j, ids in local_by_job.items()}
        picked, trial = best_rounding(preference, x, columns, board, widths, rounds, seeds[w])
        if last:
            chosen.update(picked)
            board = trial
            break
        for j in members[:step]:  # commit the first half; the rest is decided again
            if j in picked:
                chosen[j] = picked[j]
                _take(board, columns, j, picked[j])
    if len(starts) > 1:  # re-place across window borders, every job's options again
        repair({j: _preference(problem.by_job[j], x, columns) for j in jobs}, columns, board,
               chosen)
    check_choice(problem, chosen)
    return RoundingResult(chosen=chosen, lp_bound=lp_bound, lps=lps, lp_seconds=lp_seconds)


def run_lp_round(instance: Instance, method: str, model: JctModel, *, time_limit: float | None,
                 threads: int | None, seed: int | None, progress: bool,
                 rounds: int = DEFAULT_ROUNDS, window: int | None = DEFAULT_WINDOW) -> Solution:
    """``solve``'s runner for ``lp-round``: build the offline problem, round its LP, report the
    best rounding (status ``feasible`` with a valid bound; ``time_limit``, ``threads`` and
    ``progress`` are not used: the method runs to completion, in seconds to a few minutes)."""
    started = time.perf_counter()
    problem = build_problem(instance, model)
    result = lp_round(problem, seed=0 if seed is None else seed, rounds=rounds, window=window,
                      progress=progress)
    # the whole LP's floor when it was solved, else the worker-count LP: both relax the
    # problem; of capped candidates (offline module doc) the LP bounds them only
    source = "lp" if result.lp_bound is not None and not problem.capped else "worker-count"
    if source == "lp":
        bound = result.lp_bound
    elif problem.relaxation_bounds_all:
        bound = min(problem.trivial_bound, worker_count_bound(problem, integral=False))
    else:
        bound, source = problem.trivial_bound, "decidable jobs"
    status = "optimal" if bound == len(result.chosen) else "feasible"
    solution = to_solution(problem, result.chosen, method=method, status=status,
                           bound_accepted=bound, solve_seconds=time.perf_counter() - started)
    solution.metrics = episode_metrics(instance, solution)
    solution.metrics.update(lp_count=result.lps, lp_seconds=result.lp_seconds,
                            lp_bound_source=source,
                            rounds=rounds)
    return solution
