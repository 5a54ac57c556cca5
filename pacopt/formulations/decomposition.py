"""How the exact methods search: relax, realise, then improve by windows or search in full.

1. **Relax.** The worker-count relaxation (:mod:`pacopt.formulations.bound`) is small, and its
   dual bound bounds the offline optimum. It settles within seconds on the paper workload (the
   same bound after 5 s as after 60 s at 200 jobs), so it gets a capped share of the time.
2. **Realise.** On larger models, when the relaxation's best selection meets its bound (it is
   then optimal for the relaxation), the full model tries to place every job of it, window by
   window with each window's jobs required (see :meth:`_Search.realise`). If that works, the
   optimum is proven without any search (50-job paper episodes: in 10 s). A selection below the
   bound could not prove anything, and realising one failed on every paper episode measured
   (100, 200 and 1001 jobs, after 16, 16 and 170 s of trying), so it is not attempted.
3. **Improve.** Models of up to :data:`FULL_SEARCH_OPTIONS` options (the size of one window
   step) are searched whole by the backend, warm-started. Larger ones are improved by a *window
   search*, a large-neighbourhood search in time: jobs in arrival order are cut into
   half-overlapping windows of :data:`FIRST_WINDOW` jobs. For each window the backend re-decides
   its jobs (any option, or reject) around the incumbent's choices that run at the same time
   (kept as they are), warm-started with the incumbent, and the result replaces the incumbent
   when it accepts more jobs or the same with less worker-time. Each pass cuts between the
   previous pass's cuts; after two passes in a row that each gain fewer accepted jobs than
   :data:`STALE_GAIN` of all jobs (and at least one) the windows grow by half, and once a window
   spans every job the step is the full search for the time left. A window step proven optimal
   is not repeated while its jobs and surroundings stay the same.

Why windows: on a 100-job paper episode (20k options) CP-SAT's own search of the whole model,
warm-started, went from 76 to 93 accepted jobs in about 9 minutes; the window search reaches 93
in one to two minutes, and most of its steps are proven optimal within a second. Searching a
1001-job episode as 200-job segments in turn (each with its share of the time, then the whole)
did not help: 883 accepted in 600 s, against 888 for plain passes.

The proven bound, though, is the relaxation's, and where jobs go binds on this workload: of the
138 maximal instants of the relaxation's best 200-job selection, 7 cannot hold their jobs even
on their own, and a placement must also stay put over each job's run. So on large episodes the
bound stays a few per cent above the best known solution (how far any placement-blind bound can
go: :mod:`pacopt.formulations.bound`).

Each step's model is the backend's own (``milp``: Pyomo + HiGHS; ``cpsat``: CP-SAT); only the
relaxation is shared, and its bound is valid for both. Ctrl-C (or a backend interrupted by it)
ends the whole search with the best solution so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pacopt.cluster.simulator import EPS_MS
from pacopt.formulations.bound import solve_relaxation
from pacopt.formulations.offline import ExactResult, OfflineProblem, Progress
from pacopt.formulations.warm import check_choice

Backend = Callable[..., ExactResult]
RELAX_SHARE, RELAX_MAX_SECONDS = 0.1, 30.0  # the relaxation's time: a share, capped
FULL_SEARCH_OPTIONS = 5000  # models up to this size are searched whole
REALISE_SHARE = 0.3  # of the time left after the relaxation, at most, for the realisation
REALISE_WINDOW = 40  # jobs placed per realisation step
LOOKAHEAD = 20  # jobs after them each realisation step must leave room for
FIRST_WINDOW = 15  # jobs per window in the first passes
SECONDS_PER_WINDOW_JOB = 0.1  # a window step's time limit, per job in the window
STALE_GAIN = 0.005  # a pass gaining fewer accepted jobs than this share of them is stale
GROWTH = 1.5  # window growth after two stale passes in a row
MIN_STEP = 1.0  # seconds: a step with less time left than this cannot build its model


def restrict(problem: OfflineProblem, jobs: set[int], required: set[int] = frozenset(),
             fixed: dict[int, int] | None = None) -> tuple[OfflineProblem, list[int]]:
    """The problem with only the options of ``jobs`` (job indices unchanged; those in
    ``required`` must be accepted), and for each of its options the index of the same option in
    ``problem``. Jobs in ``fixed`` (job -> option, included in ``jobs``) keep only that option."""
    fixed = fixed or {}
    original = sorted(k for j in jobs for k in ([fixed[j]] if j in fixed else problem.by_job[j]))
    new_index = {k: i for i, k in enumerate(original)}
    by_job: list[list[int]] = [[] for _ in problem.by_job]
    for i, k in enumerate(original):
        by_job[problem.options[k].job].append(i)
    rows = []
    for r in sorted({r for k in original for r in problem.option_rows[k]}):
        kept = [new_index[k] for k in problem.rows[r] if k in new_index]
        if len({problem.options[original[i]].job for i in kept}) >= 2:
            rows.append(kept)
    sub = OfflineProblem(instance=problem.instance, model=problem.model,
                         options=[problem.options[k] for k in original], by_job=by_job, rows=rows,
                         late=problem.late, required=frozenset(required))
    return sub, original


def solve_decomposed(problem: OfflineProblem, backend: Backend, *, time_limit: float,
                     threads: int | None = None, warm_start: dict[int, int] | None = None,
                     progress: Progress | None = None) -> ExactResult:
    """Relax, realise, improve (module doc) within ``time_limit`` seconds with ``backend``.

    ``warm_start`` (job -> option) must be feasible. The status is ``optimal`` when the
    incumbent meets a proven bound (the relaxation's or the full search's), else ``feasible``.
    """
    search = _Search(problem, backend, threads, time_limit, warm_start or {}, progress)
    try:
        selection = search.relax()
        if search.done():  # proven already (or interrupted, or out of time)
            return search.result()
        if len(problem.options) <= FULL_SEARCH_OPTIONS:
            search.step(set(search.jobs))
            return search.result()
        if len(search.incumbent) < len(selection) == search.bound:
            search.realise(sorted(selection))
        search.windows()
    except KeyboardInterrupt:  # between backend calls: keep what was found
        search.interrupted = True
    return search.result()


class _Search:
    """The incumbent, the bound and the clock of one :func:`solve_decomposed` call."""

    def __init__(self, problem: OfflineProblem, backend: Backend, threads: int | None,
                 time_limit: float, warm_start: dict[int, int], progress: Progress | None):
        self.problem, self.backend, self.threads = problem, backend, threads
        self.started = time.perf_counter()
        self.deadline = self.started + time_limit
        self.incumbent = dict(warm_start)
        self.jobs = [j for j, ks in enumerate(problem.by_job) if ks]  # arrival order
        self.bound = len(self.jobs)
        self.progress = progress
        self.trace: list[tuple[float, int | None, int | None]] = []
        self.interrupted = False
        self.failed = False  # the whole-model step ended in error
        self.settled: set[tuple] = set()  # window steps proven optimal, keyed by their input

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def done(self) -> bool:
        return (self.interrupted or len(self.incumbent) >= self.bound
                or self.left() < MIN_STEP)

    def note(self) -> None:
        """Record and report the incumbent's count and the bound, if either changed."""
        if self.trace and self.trace[-1][1:] == (len(self.incumbent), self.bound):
            return
        entry = (time.perf_counter() - self.started, len(self.incumbent), self.bound)
        self.trace.append(entry)
        if self.progress:
            self.progress(*entry)

    def relax(self) -> dict[int, int]:
        """Take the relaxation's bound; return its best selection (job -> degree)."""
        budget = min(RELAX_SHARE * self.left(), RELAX_MAX_SECONDS)
        relaxation = solve_relaxation(self.problem, budget)
        self.bound = min(self.bound, relaxation.bound)
        self.interrupted |= relaxation.interrupted
        self.note()
        return relaxation.selection

    def realise(self, jobs: list[int]) -> None:
        """Try to place all of ``jobs`` (the relaxation's selection, in arrival order); on
        success they become the incumbent.

        Each step requires the next :data:`REALISE_WINDOW` jobs and the :data:`LOOKAHEAD` after
        them (exactly-one constraints propagate far better than an objective) around the
        choices fixed so far that still run then, and fixes the window; a step that fails is
        retried without the lookahead, and a second failure ends the attempt.
        """
        options = self.problem.options
        stop_at = time.perf_counter() + REALISE_SHARE * self.left()
        fixed: dict[int, int] = {}
        for first in range(0, len(jobs), REALISE_WINDOW):
            window = jobs[first:first + REALISE_WINDOW]
            begins = self.problem.instance.jobs[window[0]].arrival_ms
            running = {j: k for j, k in fixed.items() if options[k].end_ms > begins + EPS_MS}
            for ahead in (jobs[first + REALISE_WINDOW:first + REALISE_WINDOW + LOOKAHEAD], []):
                if self.interrupted or stop_at - time.perf_counter() < MIN_STEP:
                    return
                group = set(window) | set(ahead) | running.keys()
                sub, original = restrict(self.problem, group, required=group, fixed=running)
                answer = self.backend(sub, time_limit=stop_at - time.perf_counter(),
                                      threads=self.threads)
                self.interrupted |= answer.interrupted
                if len(answer.chosen) == len(group):
                    fixed.update({j: original[answer.chosen[j]] for j in window})
                    break
            else:
                return
        if len(fixed) > len(self.incumbent):
            check_choice(self.problem, fixed)  # the steps' answers, merged: a bug if it fails
            self.incumbent = fixed
            self.note()

    def windows(self) -> None:
        """Window passes (module doc) until proven, interrupted or out of time."""
        size, shifted, stale = FIRST_WINDOW, False, 0
        count = len(self.jobs)
        while not self.done():
            before = len(self.incumbent)
            stride = max(1, size // 2)
            offset = stride // 2 if shifted else 0
            firsts = sorted({max(0, first)
                             for first in range(offset - stride, count - stride, stride)})
            improved = False
            for first in [0] if size >= count else firsts:
                if self.done():
                    return
                improved |= self.step(set(self.jobs[first:first + size]))
            if size >= count and not improved:
                return  # the whole model was searched as long as the step allowed
            # Single jobs keep trickling in long after small windows have done their work (a
            # 1001-job episode: +2 per 40 s pass), so a pass counts as stale below a share.
            gain = len(self.incumbent) - before
            stale = stale + 1 if gain < max(1.0, STALE_GAIN * count) else 0
            shifted = not shifted  # the next pass cuts between this pass's cuts
            if stale == 2:
                size, shifted, stale = min(count, int(size * GROWTH)), False, 0

    def step(self, window: set[int]) -> bool:
        """Re-decide the jobs of ``window`` around the incumbent's choices running at the same
        time; keep the result if it is better. Returns whether it was."""
        problem, options = self.problem, self.problem.options
        begins = min(options[k].start_ms for j in window for k in problem.by_job[j])
        ends = max(options[k].end_ms for j in window for k in problem.by_job[j])
        kept = {j: k for j, k in self.incumbent.items() if j not in window
                and options[k].start_ms < ends and options[k].end_ms > begins}
        key = (frozenset(window), frozenset(kept.items()))
        if key in self.settled:
            return False
        whole = len(window) == len(self.jobs)
        sub, original = restrict(problem, window | kept.keys(), required=set(kept), fixed=kept)
        to_sub = {k: i for i, k in enumerate(original)}
        warm = {j: to_sub[k] for j, k in self.incumbent.items() if k in to_sub}
        limit = self.left() if whole else min(self.left(), SECONDS_PER_WINDOW_JOB * len(window))
        answer = self.backend(sub, time_limit=limit, threads=self.threads, warm_start=warm,
                              progress=self._forward if whole else None)
        self.interrupted |= answer.interrupted
        if answer.status in ("error", "infeasible"):
            self.failed |= whole
            return False
        if whole and answer.bound_accepted is not None:
            self.bound = min(self.bound, answer.bound_accepted)
        if answer.status == "optimal":
            self.settled.add(key)
        chosen = {j: original[i] for j, i in answer.chosen.items()}
        if self._value(chosen) <= self._value({j: k for j, k in self.incumbent.items()
                                               if j in window or j in kept}):
            if whole:
                self.note()
            return False
        self.incumbent = {j: k for j, k in self.incumbent.items() if j not in window}
        self.incumbent.update({j: k for j, k in chosen.items() if j in window})
        self.note()
        return True

    def _value(self, chosen: dict[int, int]) -> tuple[int, float]:
        """What the search maximises: accepted jobs, then less worker-time."""
        return len(chosen), -sum(self.problem.options[k].worker_ms for k in chosen.values())

    def _forward(self, seconds: float, accepted: int | None, bound: int | None) -> None:
        """Progress of a whole-model step, with the relaxation's bound folded in."""
        if self.progress:
            shown = self.bound if bound is None else min(self.bound, bound)
            self.progress(time.perf_counter() - self.started, accepted, shown)

    def result(self) -> ExactResult:
        status = "error" if self.failed and not self.incumbent else (
            "optimal" if len(self.incumbent) >= self.bound else "feasible")
        return ExactResult(chosen=self.incumbent, status=status, bound_accepted=self.bound,
                           seconds=time.perf_counter() - self.started, trace=self.trace,
                           interrupted=self.interrupted)
