"""How the exact methods search: warm starts, the relaxation's bound, then a large-neighbourhood
search over windows of jobs in arrival order, in two lanes sharing one incumbent.

Why: a backend's search of the whole model of a large episode stalls far below what re-deciding
small windows of jobs around a fixed incumbent reaches, and "place every job of this set" is the
backends' strongest primal step. :func:`solve_decomposed` runs four steps with either backend:

1. **Warm starts** (:func:`~pacopt.solvers.warm.best_warm_start`): best-fit rules, the beam
   search (:data:`BEAM_SHARE` of the time), online methods and rollouts; the best is the first
   incumbent.
2. **Relax**: the worker-count relaxation (:mod:`pacopt.formulations.bound`) gives the proven
   bound and a selection of jobs.
3. **Realise with drops** (:mod:`pacopt.solvers.realise`): the selection is placed with every
   job required, chunk by chunk in arrival order; where a chunk does not fit, one job of the
   first prefix that does not is dropped.
4. **Improve by windows**: re-decide half-overlapping windows of jobs around the incumbent's
   other choices, by maximising over the window (*objective* move) or by placing all its jobs
   (*required* move); windows grow after stale passes, up to a search of the whole model.

With two or more threads an objective lane and a required lane run side by side and commit to
the shared incumbent only what still fits. Each step's model is the backend's own; only the
relaxation is shared, and its bound is valid for both. Ctrl-C ends both lanes with the best
solution so far. The full description is ``docs/notes/decomposition.md``; what was measured and
left out, ``docs/experiments.md`` (Exact search: the window search).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from pacopt.formulations.bound import solve_relaxation
from pacopt.formulations.offline import (
    ExactResult,
    OfflineProblem,
    Progress,
    check_choice,
    choice_value,
    greedy_choice,
    restrict,
)
from pacopt.infra.concurrency import Stop, available_cores
from pacopt.infra.interrupt import run_stoppable
from pacopt.model.decision import Policy
from pacopt.model.state import EPS_MS
from pacopt.solvers.realise import place, realise
from pacopt.solvers.warm import best_warm_start, online_policies

Backend = Callable[..., ExactResult]
BEAM_SHARE = 0.25  # of the time limit, for the beam search, the first warm start after the rules
ONLINE_SHARE = 0.1  # of the time limit, at most, for the other warm starts, after the beam
RELAX_SHARE, RELAX_MAX_SECONDS = 0.1, 30.0  # the relaxation's time: a share, capped
FULL_SEARCH_OPTIONS = 5000  # models up to this size are searched whole
REALISE_SHARE = 0.3  # of the time left after the relaxation, at most, for the realisation
FIRST_WINDOW = 15  # jobs per window of the objective move in the first passes
REQUIRED_WINDOW = 20  # jobs per window of the required move in the first passes
SECONDS_PER_WINDOW_JOB = 0.1  # an objective step's time limit, per job in the window
REQUIRED_SECONDS_PER_WINDOW_JOB = 0.25  # a required step's (its drops need several checks)
STALE_GAIN = 0.005  # a pass gaining fewer accepted jobs than this share of them is stale
GROWTH = 1.5  # window growth after two stale passes in a row
MIN_STEP = 1.0  # seconds: a step with less time left than this cannot build its model


def solve_decomposed(problem: OfflineProblem, backend: Backend, *, time_limit: float,
                     threads: int | None = None, warm_start: dict[int, int] | None = None,
                     progress: Progress | None = None,
                     online: Sequence[Policy] | None = None) -> ExactResult:
    """Warm-start, relax, realise, improve (module doc) within ``time_limit`` seconds with
    ``backend``, on at most ``threads`` threads in all (default: every core).

    ``warm_start`` (job -> option) must be feasible. ``online``: the online policies whose
    episodes are warm starts, after the offline best-fit rules (default
    :func:`online_policies`; ``[]``: no warm-start phase, as when the caller played it). The
    status is
    ``optimal`` when the incumbent meets a proven bound (the relaxation's or a whole-model
    search's), else ``feasible``.
    """
    total = threads or available_cores()
    lanes = 2 if total >= 2 else 1
    search = _WindowSearch(problem, backend, max(1, total // lanes), time_limit, warm_start or {},
                     progress)
    helpers: list[threading.Thread] = []
    try:
        if online is None or online:
            policies = online_policies(problem.instance) if online is None else online
            beam_until = search.started + BEAM_SHARE * time_limit
            _, start = best_warm_start(problem, policies, best_fit=True, rollout=True,
                                       beam_until=beam_until,
                                       deadline=beam_until + ONLINE_SHARE * time_limit)
            search.offer(start)
        search.note()
        if lanes == 2:
            helpers.append(threading.Thread(target=search.guarded, args=(("objective",),),
                                            name="objective-lane", daemon=True))
            helpers[0].start()
        selection = search.relax()
        if not search.done():
            def main_lane() -> None:
                search.realise(sorted(selection))
                search.lane(("required",) if lanes == 2 else ("required", "objective"))
                for helper in helpers:
                    helper.join()

            _, interrupted = run_stoppable(main_lane, search.stop.set)
            search.interrupted |= interrupted
    except KeyboardInterrupt:  # between backend calls: keep what was found
        search.interrupted = True
    finally:
        search.stop.set()
        for helper in helpers:
            helper.join()
    if search.error is not None:
        raise search.error
    return search.result()


class _WindowSearch:
    """The shared incumbent, the bound and the clock of one :func:`solve_decomposed` call.

    Lanes read the incumbent freely (a dict is replaced, never changed in place) and change it
    only through :meth:`commit`, under the lock.
    """

    def __init__(self, problem: OfflineProblem, backend: Backend, threads: int,
                 time_limit: float, warm_start: dict[int, int], progress: Progress | None):
        self.problem, self.backend, self.threads = problem, backend, threads
        self.started = time.perf_counter()
        self.deadline = self.started + time_limit
        self.incumbent = dict(warm_start)
        self.jobs = [j for j, ks in enumerate(problem.by_job) if ks]  # arrival order
        self.bound = problem.trivial_bound
        self.progress = progress
        self.trace: list[tuple[float, int | None, int | None]] = []
        self.interrupted = False
        self.failed = False  # the whole-model step ended in error
        self.settled: set[tuple] = set()  # objective steps proven optimal, keyed by their input
        self.stop = Stop()  # ends every lane's backend call: proven, interrupted or failed
        self.lock = threading.RLock()
        self.error: BaseException | None = None  # raised in a helper lane, re-raised at the end

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def done(self) -> bool:
        if self.interrupted or len(self.incumbent) >= self.bound:
            self.stop.set()
        return self.stop.is_set() or self.left() < MIN_STEP

    def note(self) -> None:
        """Record and report the incumbent's count and the bound, if either changed."""
        with self.lock:
            if self.trace and self.trace[-1][1:] == (len(self.incumbent), self.bound):
                return
            entry = (time.perf_counter() - self.started, len(self.incumbent), self.bound)
            self.trace.append(entry)
            if self.progress:
                self.progress(*entry)

    def offer(self, choice: dict[int, int]) -> bool:
        """Take ``choice`` (feasible, for every job) as the incumbent if it is better."""
        return self.commit(set(self.jobs), choice)

    def commit(self, window: set[int], chosen: dict[int, int]) -> bool:
        """Replace the incumbent's choices for the jobs of ``window`` by ``chosen`` if that is
        better there and still fits with the incumbent's other choices; return whether it did."""
        rows_of = self.problem.option_rows
        with self.lock:
            here = {j: k for j, k in self.incumbent.items() if j in window}
            if choice_value(self.problem, chosen) <= choice_value(self.problem, here):
                return False
            taken: set[int] = set()
            for j, k in self.incumbent.items():
                if j not in window:
                    taken.update(rows_of[k])
            for k in chosen.values():
                if not taken.isdisjoint(rows_of[k]):
                    return False  # the other lane took these servers meanwhile
                taken.update(rows_of[k])
            incumbent = {j: k for j, k in self.incumbent.items() if j not in window}
            incumbent.update(chosen)
            self.incumbent = incumbent
            self.note()
            return True

    def relax(self) -> dict[int, int]:
        """Take the relaxation's bound; return its best selection (job -> degree)."""
        budget = min(RELAX_SHARE * self.left(), RELAX_MAX_SECONDS)
        relaxation = solve_relaxation(self.problem, budget)
        with self.lock:
            if self.problem.relaxation_bounds_all:  # else it bounds the capped problem only
                self.bound = min(self.bound, relaxation.bound)
            self.interrupted |= relaxation.interrupted
            self.note()
        return relaxation.selection

    def realise(self, jobs: list[int]) -> None:
        """Place the relaxation's selection ``jobs`` with drops (module doc, step 3) within
        :data:`REALISE_SHARE` of the time left; what it placed (all of it, or the jobs up to
        where time ran out), completed greedily with the incumbent's other choices, replaces the
        incumbent if it accepts more."""
        if len(jobs) <= len(self.incumbent) or self.done():
            return
        answer = realise(self.problem, self.backend, jobs, threads=self.threads,
                         deadline=time.perf_counter() + REALISE_SHARE * self.left(),
                         stop=self.stop, hint=self.incumbent)
        self.interrupted |= answer.interrupted
        check_choice(self.problem, answer.placed)  # the steps' answers, merged: a bug if it fails
        incumbent = self.incumbent
        candidates = {j: [k] for j, k in incumbent.items()}
        candidates.update({j: [k] for j, k in answer.placed.items()})
        self.offer(greedy_choice(self.problem, candidates))

    def guarded(self, moves: tuple[str, ...]) -> None:
        """:meth:`lane` in a helper thread: Ctrl-C there ends the search like anywhere else;
        any other error stops every lane and is kept for the caller's thread to raise."""
        try:
            self.lane(moves)
        except KeyboardInterrupt:
            self.interrupted = True
        except BaseException as err:  # noqa: BLE001 -- re-raised by solve_decomposed
            self.error = err
        finally:
            if self.interrupted or self.error is not None:
                self.stop.set()

    def lane(self, moves: tuple[str, ...]) -> None:
        """Window passes (module doc, step 4) with ``moves`` until proven, stopped or out of
        time."""
        count = len(self.jobs)
        whole = len(self.problem.options) <= FULL_SEARCH_OPTIONS
        size = count if whole else (REQUIRED_WINDOW if moves[0] == "required" else FIRST_WINDOW)
        shifted, stale = False, 0
        while not self.done():
            before = len(self.incumbent)
            stride = max(1, size // 2)
            offset = stride // 2 if shifted else 0
            firsts = sorted({max(0, first)
                             for first in range(offset - stride, count - stride, stride)})
            improved = False
            for first in [0] if size >= count else firsts:
                window = set(self.jobs[first:first + size])
                for move in moves:
                    if self.done():
                        return
                    if self.required_step(window) if move == "required" else self.step(window):
                        improved = True
                        break
            if size >= count and not improved:
                return  # the whole model was searched as long as the step allowed
            # Single jobs keep trickling in long after small windows have done their work on
            # large episodes, so a pass counts as stale below a share (docs/experiments.md).
            gain = len(self.incumbent) - before
            stale = stale + 1 if gain < max(1.0, STALE_GAIN * count) else 0
            shifted = not shifted  # the next pass cuts between this pass's cuts
            if stale == 2:
                size, shifted, stale = min(count, int(size * GROWTH)), False, 0

    def _kept(self, window: set[int]) -> tuple[dict[int, int], dict[int, int]]:
        """The incumbent now, and its choices outside ``window`` that overlap its jobs' time."""
        options, by_job = self.problem.options, self.problem.by_job
        incumbent = self.incumbent
        begins = min(options[k].start_ms for j in window for k in by_job[j])
        ends = max(options[k].end_ms for j in window for k in by_job[j])
        return incumbent, {j: k for j, k in incumbent.items() if j not in window
                           and options[k].start_ms < ends and options[k].end_ms > begins + EPS_MS}

    def required_step(self, window: set[int]) -> bool:
        """The required move on ``window``: place all its jobs around the incumbent's choices
        there; failing that, with drops: the incumbent's jobs of the window and one job it
        rejects, for each such job in arrival order. Keep the first that fits; return whether
        one did."""
        incumbent, kept = self._kept(window)
        here = {j: k for j, k in incumbent.items() if j in window}
        rejected = sorted(window - here.keys())
        if not rejected:
            return False
        whole = len(window) == len(self.jobs)
        limit = self.left() if whole else min(self.left(),
                                              REQUIRED_SECONDS_PER_WINDOW_JOB * len(window))
        deadline = time.perf_counter() + limit
        for jobs in [sorted(window)] + ([sorted([*here, j]) for j in rejected]
                                        if len(rejected) > 1 else []):
            if self.done() or time.perf_counter() >= deadline:
                return False
            answer = place(self.problem, self.backend, jobs, fixed=kept, deadline=deadline,
                           threads=self.threads, stop=self.stop, hint=here)
            self.interrupted |= answer.interrupted
            if answer.complete:
                return self.commit(window, answer.placed)
        return False

    def step(self, window: set[int]) -> bool:
        """The objective move on ``window``: re-decide its jobs around the incumbent's choices
        running at the same time; keep the result if it is better. Returns whether it was."""
        problem = self.problem
        incumbent, kept = self._kept(window)
        key = (frozenset(window), frozenset(kept.items()))
        if key in self.settled:
            return False
        whole = len(window) == len(self.jobs)
        sub, original = restrict(problem, window | kept.keys(), required=set(kept), fixed=kept)
        to_sub = {k: i for i, k in enumerate(original)}
        warm = {j: to_sub[k] for j, k in incumbent.items() if k in to_sub}
        limit = self.left() if whole else min(self.left(), SECONDS_PER_WINDOW_JOB * len(window))
        answer = self.backend(sub, time_limit=limit, threads=self.threads, warm_start=warm,
                              progress=self._forward if whole else None, stop=self.stop)
        self.interrupted |= answer.interrupted
        if answer.status in ("error", "infeasible"):
            self.failed |= whole
            return False
        # a capped problem's search bounds only the capped problem (offline module doc)
        if whole and answer.bound_accepted is not None and not problem.capped:
            with self.lock:
                self.bound = min(self.bound, answer.bound_accepted)
                self.note()
        if answer.status == "optimal":
            self.settled.add(key)
        chosen = {j: original[i] for j, i in answer.chosen.items() if j in window}
        return self.commit(window, chosen)

    def _forward(self, seconds: float, accepted: int | None, bound: int | None) -> None:
        """Progress of a whole-model step, with the shared incumbent and bound folded in."""
        if self.progress:
            shown = self.bound if bound is None or self.problem.capped else min(self.bound,
                                                                                  bound)
            best = max(accepted or 0, len(self.incumbent))
            self.progress(time.perf_counter() - self.started, best, shown)

    def result(self) -> ExactResult:
        status = "error" if self.failed and not self.incumbent else (
            "optimal" if len(self.incumbent) >= self.bound else "feasible")
        return ExactResult(chosen=self.incumbent, status=status, bound_accepted=self.bound,
                           seconds=time.perf_counter() - self.started, trace=self.trace,
                           interrupted=self.interrupted)
