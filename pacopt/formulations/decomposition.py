"""How the exact methods search: relax, realise, then search the full model.

1. **Relax.** The worker-count relaxation (:mod:`pacopt.formulations.bound`) is small. Its dual
   bound bounds the offline optimum, and its best solution names a set S of jobs that fit by
   worker count at every instant.
2. **Realise.** The full placement model places the jobs of S window by window in arrival
   order, each window required in full (exactly one option per job, which propagates far better
   than an objective) around the choices already fixed; a realisation that stops early is
   completed greedily, preferring the relaxation's degrees. If all of S is placed and |S| equals the bound, the optimum is proven
   without ever searching the full model. On the paper's workloads this is the usual case: where jobs go rarely binds once
   the worker counts fit, because RAMP's blocks nest.
3. **Search.** Otherwise the backend searches the full model for the remaining time, warm-started
   with the best choice so far. The reported bound is the smaller of the two proven bounds.

Each step's model is the backend's own (``milp``: Pyomo + HiGHS; ``cpsat``: CP-SAT); only the
relaxation is shared, and its bound is valid for both.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pacopt.formulations.bound import solve_relaxation
from pacopt.cluster.simulator import EPS_MS
from pacopt.formulations.offline import ExactResult, OfflineProblem
from pacopt.formulations.warm import greedy_choice

Backend = Callable[..., ExactResult]
Progress = Callable[[float, int | None, int | None], None]
# shares of the time limit; the full search gets whatever is left
RELAX_SHARE, REALISE_SHARE = 0.2, 0.5
WINDOW, LOOKAHEAD = 40, 20  # jobs placed per realisation step, and jobs it must leave room for
MIN_STEP = 1.0  # seconds: a step with less time left than this cannot build its model


def restrict(problem: OfflineProblem, jobs: set[int], required: set[int] = frozenset(),
             fixed: dict[int, int] | None = None) -> tuple[OfflineProblem, list[int]]:
    """The problem with only the options of ``jobs`` (job indices unchanged; those in
    ``required`` must be accepted), and for each of its options the index of the same option in
    ``problem``. Jobs in ``fixed`` (job -> option, included in ``jobs``) keep only that option."""
    fixed = fixed or {}
    original = [k for k, option in enumerate(problem.options)
                if option.job in jobs and fixed.get(option.job, k) == k]
    new_index = {k: i for i, k in enumerate(original)}
    by_job = [[new_index[k] for k in ks if k in new_index] for ks in problem.by_job]
    rows = []
    for row in problem.rows:
        kept = [new_index[k] for k in row if k in new_index]
        if len({problem.options[original[i]].job for i in kept}) >= 2:
            rows.append(kept)
    sub = OfflineProblem(instance=problem.instance, model=problem.model,
                         options=[problem.options[k] for k in original], by_job=by_job, rows=rows,
                         late=problem.late, required=frozenset(required))
    return sub, original


def solve_decomposed(problem: OfflineProblem, backend: Backend, *, time_limit: float,
                     threads: int | None = None, warm_start: dict[int, int] | None = None,
                     progress: Progress | None = None) -> ExactResult:
    """Relax, realise, search (module doc) within ``time_limit`` seconds with ``backend``."""
    started = time.perf_counter()
    incumbent = dict(warm_start or {})
    trace: list[tuple[float, int | None, int | None]] = []

    def note(bound: int | None) -> None:
        entry = (time.perf_counter() - started, len(incumbent), bound)
        trace.append(entry)
        if progress:
            progress(*entry)

    def left() -> float:
        return time_limit - (time.perf_counter() - started)

    relaxation = solve_relaxation(problem, RELAX_SHARE * time_limit)
    bound = relaxation.bound
    note(bound)
    if len(incumbent) < bound and len(relaxation.selection) > len(incumbent) and left() > MIN_STEP:
        selection = relaxation.selection
        realised = _realise(problem, backend, selection, threads,
                            stop_at=started + (RELAX_SHARE + REALISE_SHARE) * time_limit)
        if len(realised) < len(selection):  # complete a partial realisation greedily
            realised = greedy_choice(problem, {j: sorted(ks, key=lambda k: (
                problem.options[k].degree != selection.get(j), problem.options[k].worker_ms))
                for j, ks in enumerate(problem.by_job) if ks}, start=realised)
        if len(realised) > len(incumbent):
            incumbent = realised
            note(bound)
    status = "optimal"
    if len(incumbent) < bound and left() > MIN_STEP:
        def forward(seconds, accepted, solver_bound):
            if progress:
                shown = bound if solver_bound is None else min(bound, solver_bound)
                progress(time.perf_counter() - started, accepted, shown)

        searched = backend(problem, time_limit=left(), threads=threads, warm_start=incumbent,
                           progress=forward)
        if searched.status == "error":
            status = "error"
        if searched.bound_accepted is not None:
            bound = min(bound, searched.bound_accepted)
        if len(searched.chosen) > len(incumbent):
            incumbent = searched.chosen
        note(bound)
    if status != "error":
        status = "optimal" if len(incumbent) >= bound else "feasible"
    return ExactResult(chosen=incumbent, status=status, bound_accepted=bound,
                       seconds=time.perf_counter() - started, trace=trace)


def _realise(problem: OfflineProblem, backend: Backend, selection: dict[int, int],
             threads: int | None, stop_at: float) -> dict[int, int]:
    """Place the selected jobs window by window, in arrival order, and return what was placed.

    Conflicts only reach as far as a job runs, so each step asks the backend to place the next
    :data:`WINDOW` selected jobs together with the :data:`LOOKAHEAD` after them (all required:
    exactly-one constraints propagate far better than an objective) around the choices already
    fixed that still run then, and fixes the window. A step that fails with its lookahead is
    retried without it; one that still fails places as many of its window as it can (the fixed
    choices required, the window's jobs optional) and moves on.
    """
    jobs = sorted(selection)
    fixed: dict[int, int] = {}
    for first in range(0, len(jobs), WINDOW):
        window = jobs[first:first + WINDOW]
        begins = problem.instance.jobs[window[0]].arrival_ms
        running = {j: k for j, k in fixed.items() if problem.options[k].end_ms > begins + EPS_MS}
        attempts = [(jobs[first + WINDOW:first + WINDOW + LOOKAHEAD], True), ([], True), ([], False)]
        for ahead, whole in attempts:
            remaining = stop_at - time.perf_counter()
            if remaining < MIN_STEP:
                return fixed
            group = set(window) | set(ahead) | set(running)
            sub, original = restrict(problem, group, required=group if whole else set(running),
                                     fixed=running)
            placed = backend(sub, time_limit=remaining, threads=threads).chosen
            if len(placed) == len(group) or (not whole and running.keys() <= placed.keys()):
                fixed.update({j: original[placed[j]] for j in window if j in placed})
                break
    return fixed
