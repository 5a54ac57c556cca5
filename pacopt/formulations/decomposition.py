"""How the exact methods search: a portfolio of two lanes sharing one incumbent.

1. **Warm starts** (:func:`~pacopt.formulations.warm.best_warm_start`): the offline best-fit
   rules at every legal K, then the beam search over them (:mod:`pacopt.formulations.beam`),
   widening for up to :data:`BEAM_SHARE` of the time, then within :data:`ONLINE_SHARE` more a
   hindsight rollout over the best rule (:mod:`pacopt.formulations.best_fit`), every registered
   online method (:func:`~pacopt.formulations.warm.online_policies`: ``tuned``,
   ``fixed-or-min:K`` and ``fixed:K`` at every legal K, the heuristics; callers may add the
   learned agent) and a hindsight rollout over the best of them
   (:mod:`pacopt.cluster.rollout`); the best of them and the caller's warm start is the first
   incumbent. On large episodes the beam is by far the strongest of them, and at least as strong
   as anything the steps below found from the others (paper workload, beta A, seed 0: 194 of 200
   within its 15 s share of a 60 s search, where the steps reached 193 in 60 s; 921 of 1001
   within its 150 s share of a 600 s search, where they reached 888-894 in 600 s and 896 in 30
   minutes), so it gets its own share first. From its choice the steps below gained in only 2 of
   the README's 20 benchmark rows (two jobs each, beta B at 500 and 1001 jobs), but they still
   prove optima (the relaxation's bound) and improve weaker starts.

2. **Relax.** The worker-count relaxation (:mod:`pacopt.formulations.bound`) gives the proven
   bound and a selection of jobs it could accept. It gets a capped share of the time.
3. **Realise with drops** (:mod:`pacopt.formulations.realise`): the relaxation's selection is
   placed with every job required, chunk by chunk in arrival order; where a chunk does not fit,
   the first prefix that does not is found and one job of it dropped. The result replaces the
   incumbent when it accepts more (with the incumbent's other jobs added where they fit). When
   the selection meets the bound and nothing is dropped, that proves the optimum (how the
   previous search proved 50-job paper episodes in 10 s on an idle machine).
4. **Improve by windows**, a large-neighbourhood search in time: jobs in arrival order are cut
   into half-overlapping windows; a step re-decides one window's jobs around the incumbent's
   choices that run at the same time (kept as they are) and replaces them when it accepts more
   jobs (or as many with less worker-time). Two moves: the *objective* move asks the backend to
   maximise over the window (warm-started with the incumbent); the *required* move asks it to
   place every job of the window, then with drops (step 3), stopping once no more than the
   incumbent's jobs of the window are left. Each pass cuts between the previous pass's cuts;
   after two passes in a row that each gain fewer accepted jobs than :data:`STALE_GAIN` of all
   jobs (and at least one) the windows grow by half, and once a window spans every job the
   objective move is the backend's search of the whole model for the time left (its bound may
   prove the optimum). Small models (up to :data:`FULL_SEARCH_OPTIONS` options) start there.

**The portfolio.** ``threads`` bounds the total: with two or more, two *lanes* run side by side
in threads, each with half of them for its backend calls. The *objective lane* starts at once
from the warm start and runs objective windows; the main lane relaxes, realises, then runs
required windows. They share the incumbent: a step commits only if its choices still fit with
the incumbent's other jobs at that moment (the other lane may have changed them) and are better
than what the incumbent has there now. Whichever lane proves the optimum (incumbent = bound)
stops the other. With one thread a single lane does it all, a required then an objective step per
window. The solver calls release the GIL, so the lanes really run side by side (two CP-SAT calls
with a 4 s limit, 100 jobs, on a loaded machine: 6.2 s side by side, 11.1 s one after the other).

Why windows: on a 100-job paper episode (20k options) CP-SAT's own search of the whole model,
warm-started, went from 76 to 93 accepted jobs in about 9 minutes; the window search reaches 93
in one to two minutes, and most of its steps are proven optimal within a second. Why required
sets: a 20-job window that the objective move leaves at 19 of 20 after 20 s is placed whole in
0.7 s.

The measurements below were made before the beam search existed, from the rollout's warm
starts (189 of 200, 870 of 1001): they say what the steps above can and cannot do on their own.

Measured and left out, *space-time windows*: the jobs of a longer run of arrivals (40-100)
whose footprint lies inside one region (a layer of 16 servers, or a block of 8), plus the
rejected ones there, re-decided around everything else, so that a region can be reorganised over
a longer time than a window spans. On a 600 s search's final 1001-job incumbent (889): +1 in
150 s (halves, 40 or 100 arrivals), +0 in 120 s (blocks of 8, 60 arrivals); most steps were
proven optimal with no gain.

Measured and left out, *segments first*. On the 1001-job paper episode (beta A, seed 0, 2
threads) this search stalls at 888-890 accepted jobs in 600 s, while the same search on each of
its five 200-job segments alone (as if no other job existed), 60 s each, accepts 188, 180,
178-179, 179-180 and 178: 904-906 in all. 300 s on one segment alone gave no more than 60 s
(178 against 179), so the whole search is stuck in a worse local optimum, not short of time.
But the segments do not join: each assumes an empty cluster where it begins, and dropping the
jobs that clash with the previous segment's running ones leaves 860. From there the whole search
won back most of them, ending at 893 and 891 (scratch runs: segments 300 s, then the whole 300
s), and 890 built into this search (warm starts, segments with half the time left, restart from
the join, keeping the better incumbent): within the plain search's run-to-run spread, so not
worth the machinery. Searching the segments in turn *with* the previous segment's running jobs
fixed (nothing to drop) ended lower: 887 (880 after the segments) in one run, 883 in
another.

Measured and left out, an *insertion* move. For each job the incumbent rejects, the required
move runs on that job plus the incumbent's jobs arriving from one longest JCT (about 20 s) before
it to the end of its longest run, so every job running when it arrives is free to move. On a
600 s search's final 1001-job incumbent (889), one sweep inserted 2 jobs in 150 s. With twice
the reach before (and 15 s more after), a sweep inserted 1 job on a 200-job incumbent (191) in
57 s, but none in 300 s at 1001 jobs, where its checks ran out of time undecided. Run as a step
of the required lane after each stale pass, it took time that the growing required windows use
better: 190 and 191 of 200 in 60 s, against 192 and 193 without it.

Where 194 of 200 comes from (paper workload, beta A, seed 0, 2 threads). Started from a 193-job
incumbent, this search found 194 after 465 s and after 480 s (two runs), the second time
(traced) by the required move on the last 75 jobs, once the required windows had grown to 100.
That one move, run alone on each of two 193-job incumbents (one of them a 60 s run's), gains a
job in 6.3-6.5 s on one thread, and so does jobs 120-194 (9.4 s); shorter tails (the last 50-70
jobs) gain nothing, and five other 75-job windows and three of 100 jobs ran out of their time
(19 s, 25 s) with no gain. A 60 s run reaches 193 after 52-54 s with its required windows at 30
jobs, and no schedule tried got further: required windows starting at 30, 40 or 75 jobs (191
twice, 190, 189), growing twofold (189 twice), or growing after one stale pass instead of two
(193 four times, reached after 43-50 s). At 1001 jobs the same move finds nothing: ten 75-job
required windows spread over an 889-job incumbent each used its 19 s with no gain, and so did
six of them with the drops alone (no all-required attempt), each drop given an equal share of
the time (that variant gains the 200-job tail's job in 4.2 s).

Where a 600 s run at 1001 jobs spends its time (traced, 889 at the end): the warm start (870)
after 13 s; then the relaxation's 30 s and the realisation's 170 s, which gave nothing: its
input is the relaxation's best selection after 30 s (896 jobs, against the bound's 971), and
realised alone to the end (217 s, 52 drops) it places 844. Meanwhile the objective lane takes
the incumbent to 888 by 252 s. The required lane starts at 211 s and gains 3 jobs with 20- and
30-job windows. With :data:`REALISE_SHARE` 0.05 one run reached 889 at 263 s instead of 472 s
but ended at 890, within the spread, so the share stayed. Larger windows do gain there, given
time: 50-job required windows at ten places on the 889-job incumbent gained a job at two of
them (3.0 s and 8.4 s), and the 890 of the run with the smaller share, searched 1200 s more
with windows from 50 jobs (objective windows from 33), reached 896 after 466 s, the best known,
with nothing more in the last 734 s.

Also measured and left out on the 200-job episode (60 s, 193 for the search as it is): only
options inside one of the two 16-server layers when a job has any (190); a tie-break that packs
footprints into one layer and towards low positions, keeping the other free for the large jobs
(190, 190, 192); instead of windows, CP-SAT's interleaved search of the whole model on 2
workers from a 193-job hint (193 after 300 s; its neighbourhood searches never ran); and
required windows in both lanes, the second one's from the last window back (from 20, 50 or 100
jobs: 192 each) or forwards from 45 jobs (191). The objective lane gains no job in a 60 s run
here, yet every run without it ended lower. Nor did one lane whose backend calls each get both
threads (191, 191 with required windows alone; 190, 190 with both moves in turn), although a
check on 2 workers places more sets (:data:`~pacopt.formulations.cpsat.LARGE_MODEL_OPTIONS`).
Variants of the required move, on the 30-job windows of the 189-job warm start (the move as it
is gains at 2 of them in 42 s):

- a *cardinality* move, one CP-SAT call asking for a placement of at least one more of the
  window's jobs than the incumbent holds (no objective; the solver picks which to drop): gains
  at none of the 11 windows it ran on, each out of its 7.5 s;
- the "incumbent's jobs plus one" tries given equal shares of the step's time, instead of the
  first taking what it needs: the same 2 windows, in 37 s;
- the rejected jobs tried cheapest first (least worker-time) instead of in arrival order: the
  same 2 windows, in 42 s. On seven 50-job windows of a 193-job incumbent it gains at none,
  like the move as it is (64 s each).

The proven bound, though, is the relaxation's, and where jobs go binds on this workload: of the
138 maximal instants of the relaxation's best 200-job selection, 7 cannot hold their jobs even
on their own, and a placement must also stay put over each job's run. So on large episodes the
bound stays a few per cent above the best known solution (how far any placement-blind bound can
go: :mod:`pacopt.formulations.bound`).

Each step's model is the backend's own (``milp``: Pyomo + HiGHS; ``cpsat``: CP-SAT); only the
relaxation is shared, and its bound is valid for both. Ctrl-C ends the whole search (both
lanes) with the best solution so far.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from pacopt.cluster.policies import Policy
from pacopt.cluster.simulator import EPS_MS
from pacopt.formulations.bound import solve_relaxation
from pacopt.formulations.interrupt import run_stoppable
from pacopt.formulations.offline import (
    ExactResult,
    OfflineProblem,
    Progress,
    Stop,
    available_cores,
    restrict,
)
from pacopt.formulations.realise import place, realise
from pacopt.formulations.warm import (
    best_warm_start,
    check_choice,
    choice_value,
    greedy_choice,
    online_policies,
)

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
    search = _Search(problem, backend, max(1, total // lanes), time_limit, warm_start or {},
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


class _Search:
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
        self.bound = len(self.jobs)
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
            # Single jobs keep trickling in long after small windows have done their work (a
            # 1001-job episode: +2 per 40 s pass), so a pass counts as stale below a share.
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
        if whole and answer.bound_accepted is not None:
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
            shown = self.bound if bound is None else min(self.bound, bound)
            best = max(accepted or 0, len(self.incumbent))
            self.progress(time.perf_counter() - self.started, best, shown)

    def result(self) -> ExactResult:
        status = "error" if self.failed and not self.incumbent else (
            "optimal" if len(self.incumbent) >= self.bound else "feasible")
        return ExactResult(chosen=self.incumbent, status=status, bound_accepted=self.bound,
                           seconds=time.perf_counter() - self.started, trace=self.trace,
                           interrupted=self.interrupted)
