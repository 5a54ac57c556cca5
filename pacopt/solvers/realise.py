"""Required-set realisation with drops: place a given set of jobs, dropping as few as it takes.

"Place all of these jobs" (every job *required*: exactly one option each, no objective) is by far
the backends' strongest primal step on this problem: it places, quickly, sets that the
objective search leaves short (``docs/experiments.md``, Exact search: the window search). When
a set does not fit, the question is which job to give up, and the answer comes from the order in
time:

1. Jobs go in arrival order, a *chunk* at a time, around the choices fixed so far (earlier
   chunks, or the incumbent's jobs around a window), each chunk with a look-ahead of the next
   jobs also required when there are any (so that it leaves room for them; if that fails, the
   chunk alone is tried).
2. When a chunk does not fit, the *first prefix that does not fit* is found by bisection (fitting
   is monotone: a subset of a placeable set is placeable), so its last job is one that cannot
   join the jobs before it.
3. One job of that prefix is dropped: the candidates are the jobs that still hold workers when
   that last job arrives (the last job included), the ones that free most first (fewest workers
   any option needs, times how long it still runs then); the first whose removal lets the prefix
   fit is dropped, else the one that frees most. Then the chunk is tried again.

A check that the backend leaves undecided within its budget counts as "does not fit", so the
result is always a placement the backend found, never a guess. Everything the realisation
returns fits together with the fixed choices; :func:`check_choice` is the judge in the tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pacopt.formulations.offline import ExactResult, OfflineProblem, restrict
from pacopt.infra.concurrency import Stop
from pacopt.model.state import EPS_MS

Backend = Callable[..., ExactResult]

CHUNK = 40  # jobs placed per step of a long realisation
LOOKAHEAD = 20  # jobs after a chunk that it must leave room for (when that fits)
SECONDS_PER_JOB = 0.1  # a check's time limit, per job in its model (fixed ones included)
FIRST_SECONDS_PER_JOB = 0.2  # ... for a chunk's first checks (the whole set at once)
MIN_CHECK_SECONDS = 1.0  # ... and at least this
DROP_TRIES = 3  # drop candidates tried before dropping the one that frees most anyway


@dataclass
class Realisation:
    """What :func:`realise` placed (job -> option of the full problem, the fixed choices not
    included), what it dropped, and whether it got through every job (``complete``; False when
    time, a stop or a target ended it early); ``interrupted``: a backend call was stopped by
    Ctrl-C."""

    placed: dict[int, int] = field(default_factory=dict)
    dropped: list[int] = field(default_factory=list)
    complete: bool = False
    checks: int = 0
    interrupted: bool = False


class _Placer:
    """One realisation's backend calls: "do these jobs fit, all required, around ``fixed``?"."""

    def __init__(self, problem: OfflineProblem, backend: Backend, threads: int | None,
                 deadline: float, stop: Stop | None) -> None:
        self.problem, self.backend, self.threads = problem, backend, threads
        self.deadline, self.stop = deadline, stop
        self.checks = 0
        self.interrupted = False
        self.largest: dict[int, int] = {}  # the largest placement found since the last reset
        self.hint: dict[int, int] = {}  # the last placement found: a head start for the next

    def set_hint(self, choice: dict[int, int]) -> None:
        """Options the next checks start from where they can (job -> option, feasible)."""
        self.hint = dict(choice)

    def out_of_time(self) -> bool:
        return self.interrupted or (self.stop is not None and self.stop.is_set()) or \
            self.deadline - time.perf_counter() < MIN_CHECK_SECONDS / 2

    def fit(self, jobs: list[int], fixed: dict[int, int],
            first: bool = False) -> dict[int, int] | None:
        """A placement (job -> option) of ``jobs`` around ``fixed``, or None when the backend
        proves there is none, cannot find one within its budget (longer for a ``first`` check
        of a whole chunk: most sets that fit need a while, and success saves every bisection
        step), or time is up."""
        if not jobs:
            return {}
        if self.out_of_time():
            return None
        around = _around(self.problem, jobs, fixed)
        group = set(jobs) | around.keys()
        sub, original = restrict(self.problem, group, required=group, fixed=around)
        per_job = FIRST_SECONDS_PER_JOB if first else SECONDS_PER_JOB
        limit = min(self.deadline - time.perf_counter(),
                    max(MIN_CHECK_SECONDS, per_job * len(group)))
        self.checks += 1
        answer = self.backend(sub, time_limit=limit, threads=self.threads, stop=self.stop,
                              warm_start=self._warm(sub, original, around))
        self.interrupted |= answer.interrupted
        if len(answer.chosen) != len(group):
            return None
        placed = {j: original[i] for j, i in answer.chosen.items() if j not in around}
        self.hint.update(placed)
        if len(placed) > len(self.largest):
            self.largest = placed
        return placed

    def _warm(self, sub: OfflineProblem, original: list[int],
              around: dict[int, int]) -> dict[int, int]:
        """The fixed choices and the hint's options that fit with them, in ``sub``'s indices."""
        to_sub = {k: i for i, k in enumerate(original)}
        rows_of = self.problem.option_rows
        warm, taken = {}, set()
        for j, k in [*around.items(), *self.hint.items()]:
            if j not in warm and k in to_sub and taken.isdisjoint(rows_of[k]):
                warm[j] = to_sub[k]
                taken.update(rows_of[k])
        return warm


def place(problem: OfflineProblem, backend: Backend, jobs: list[int], *,
          fixed: dict[int, int] | None = None, deadline: float, threads: int | None = None,
          stop: Stop | None = None, hint: dict[int, int] | None = None) -> Realisation:
    """One check, no drops: place every job of ``jobs`` around ``fixed`` (``complete`` when it
    did; nothing is placed when there is no placement or none was found by ``deadline``). The
    arguments are those of :func:`realise`."""
    placer = _Placer(problem, backend, threads, deadline, stop)
    placer.set_hint(hint or {})
    placed = placer.fit([j for j in jobs if problem.by_job[j]], dict(fixed or {}), first=True)
    return Realisation(placed=placed or {}, complete=placed is not None, checks=placer.checks,
                       interrupted=placer.interrupted)


def realise(problem: OfflineProblem, backend: Backend, jobs: list[int], *,
            fixed: dict[int, int] | None = None, deadline: float, threads: int | None = None,
            stop: Stop | None = None, chunk: int | None = None, lookahead: int | None = None,
            better_than: int = -1, hint: dict[int, int] | None = None) -> Realisation:
    """Place as many of ``jobs`` (in arrival order) as the drops allow around ``fixed`` (job ->
    option, kept as they are), by the steps of the module doc, until ``deadline``
    (``time.perf_counter()`` seconds) or ``stop``; ``chunk`` and ``lookahead`` default to
    :data:`CHUNK` and :data:`LOOKAHEAD`.

    ``better_than``: give up (``complete`` False) as soon as the jobs not yet dropped are no more
    than this many. Whenever it stops early, what was placed so far is returned, with the
    largest placement found in the chunk it was working on. ``hint`` (job -> option, feasible with
    ``fixed``, such as the incumbent's choices) gives the checks a head start.
    """
    chunk = CHUNK if chunk is None else chunk
    lookahead = LOOKAHEAD if lookahead is None else lookahead
    placer = _Placer(problem, backend, threads, deadline, stop)
    placer.set_hint(hint or {})
    fixed = dict(fixed or {})
    out = Realisation()
    pending = [j for j in jobs if problem.by_job[j]]

    def give_up() -> bool:
        out.checks, out.interrupted = placer.checks, placer.interrupted
        return len(out.placed) + len(pending) <= better_than or placer.out_of_time()

    while pending:
        if give_up():
            return out
        window = pending[:chunk]
        ahead = pending[chunk:chunk + lookahead]
        placer.largest = {}
        placed = placer.fit(window + ahead, fixed, first=True) if ahead else None
        placed = placed if placed is not None else placer.fit(window, fixed, first=True)
        fits = 0  # how many first jobs of the window are known to fit
        while placed is None:
            if give_up():
                out.placed.update(placer.largest)  # the chunk's best prefix so far: it fits
                return out
            failing = _first_failing_prefix(placer, window, fixed, fits)
            drop, rest = _drop(placer, window[:failing], fixed)
            window.remove(drop)
            pending.remove(drop)
            out.dropped.append(drop)
            # the failing prefix without the drop fits if ``rest`` was found; the shorter prefix
            # that fitted before, without the drop, fits anyway
            fits = failing - 1 if rest is not None else max(0, failing - 2)
            placed = rest if rest is not None and fits == len(window) else placer.fit(window, fixed)
        fixed.update({j: placed[j] for j in window})
        out.placed.update({j: placed[j] for j in window})
        pending = pending[len(window):]
    out.complete = True
    out.checks, out.interrupted = placer.checks, placer.interrupted
    return out


def _first_failing_prefix(placer: _Placer, window: list[int], fixed: dict[int, int],
                          fits: int) -> int:
    """The length of the shortest prefix of ``window`` that does not fit (the whole window does
    not, the first ``fits`` jobs do)."""
    low, high = fits, len(window)
    while high - low > 1:
        middle = (low + high) // 2
        if placer.fit(window[:middle], fixed) is not None:
            low = middle
        else:
            high = middle
    return high


def _drop(placer: _Placer, prefix: list[int],
          fixed: dict[int, int]) -> tuple[int, dict[int, int] | None]:
    """The job of ``prefix`` to drop (module doc, step 3), and a placement of the rest when one
    was found."""
    options = placer.problem.options
    by_job = placer.problem.by_job
    last = prefix[-1]
    arrives = placer.problem.instance.jobs[last].arrival_ms

    def frees(j: int) -> float:
        if j == last:
            return min(options[k].workers * options[k].jct_ms for k in by_job[j])
        return min(options[k].workers * max(0.0, options[k].end_ms - arrives) for k in by_job[j])

    candidates = sorted((j for j in prefix if j == last or frees(j) > 0), key=frees, reverse=True)
    for j in candidates[:DROP_TRIES]:
        rest = [i for i in prefix if i != j]
        placed = placer.fit(rest, fixed)
        if placed is not None:
            return j, placed
        if placer.out_of_time():
            break
    return candidates[0], None


def _around(problem: OfflineProblem, jobs: list[int], fixed: dict[int, int]) -> dict[int, int]:
    """The fixed choices that overlap in time some option of ``jobs`` (the rest cannot clash)."""
    options = problem.options
    begins = min(problem.instance.jobs[j].arrival_ms for j in jobs)
    ends = max(options[k].end_ms for j in jobs for k in problem.by_job[j])
    return {j: k for j, k in fixed.items() if j not in jobs
            and options[k].end_ms > begins + EPS_MS and options[k].start_ms < ends}
