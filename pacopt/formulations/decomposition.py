"""How the exact methods search: relax, realise, then search the full model.

1. **Relax.** The worker-count relaxation (:mod:`pacopt.formulations.bound`) is small. Its dual
   bound bounds the offline optimum, and its best solution names a set S of jobs that fit by
   worker count at every instant.
2. **Realise.** The full placement model, restricted to the jobs of S, first must place all of
   them (exactly one option per job, which propagates far better than an objective), then, if
   that fails in its time, places as many as it can, hinted greedily with the relaxation's
   degrees. If all of S is placed and |S| equals the bound, the optimum is proven
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
from pacopt.formulations.offline import ExactResult, OfflineProblem
from pacopt.formulations.warm import greedy_choice

Backend = Callable[..., ExactResult]
Progress = Callable[[float, int | None, int | None], None]
# shares of the time limit; the full search gets whatever is left
RELAX_SHARE, REQUIRE_SHARE, PARTIAL_SHARE = 0.2, 0.4, 0.1
MIN_STEP = 1.0  # seconds: a step with less time left than this cannot build its model


def restrict(problem: OfflineProblem, jobs: set[int],
             required: bool = False) -> tuple[OfflineProblem, list[int]]:
    """The problem with only the options of ``jobs`` (job indices unchanged; all of them must be
    accepted if ``required``), and for each of its options the index of the same option in
    ``problem``."""
    original = [k for k, option in enumerate(problem.options) if option.job in jobs]
    new_index = {k: i for i, k in enumerate(original)}
    by_job = [[new_index[k] for k in ks] if j in jobs else [] for j, ks in enumerate(problem.by_job)]
    rows = []
    for row in problem.rows:
        kept = [new_index[k] for k in row if k in new_index]
        if len({problem.options[original[i]].job for i in kept}) >= 2:
            rows.append(kept)
    sub = OfflineProblem(instance=problem.instance, model=problem.model,
                         options=[problem.options[k] for k in original], by_job=by_job, rows=rows,
                         late=problem.late, required=frozenset(jobs) if required else frozenset())
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
        selected = relaxation.selection
        # First ask for all of S: exactly one option each propagates strongly, and an unhinted
        # search finds it fastest (a greedy hint that cannot be completed misleads it).
        sub, original = restrict(problem, set(selected), required=True)
        realised = backend(sub, time_limit=min(REQUIRE_SHARE * time_limit, left()),
                           threads=threads)
        if len(realised.chosen) < len(selected) and left() > MIN_STEP:
            # Not found in time: keep as many of S as the maximising model places, hinted with
            # each job's relaxation degree first, then its other options, least worker-time.
            sub, original = restrict(problem, set(selected))
            hint = greedy_choice(sub, {j: sorted(ks, key=lambda k: (
                sub.options[k].degree != selected[j], sub.options[k].worker_ms))
                for j, ks in enumerate(sub.by_job) if ks})
            realised = backend(sub, time_limit=min(PARTIAL_SHARE * time_limit, left()),
                               threads=threads, warm_start=hint)
        if len(realised.chosen) > len(incumbent):
            incumbent = {j: original[k] for j, k in realised.chosen.items()}
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
