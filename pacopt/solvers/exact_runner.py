"""Running the exact methods: build the offline problem, warm-start it from the best cheap method
(the offline best-fit rules and a rollout over the best of them, every online heuristic and
baseline and a hindsight rollout over the best of them, the shipped learned agent), solve with
a backend, and tighten the reported bound with the worker-count relaxation.

Methods: ``milp`` (Pyomo + HiGHS), ``cpsat`` (OR-Tools CP-SAT), ``bound`` (no search: the best
warm start as incumbent and the worker-count relaxation as the bound, for instances too large
to search).
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from typing import Self

from pacopt.formulations.bound import solve_relaxation
from pacopt.formulations.offline import (
    ExactResult,
    build_problem,
    decidable_jobs,
    to_solution,
)
from pacopt.infra.concurrency import available_cores
from pacopt.infra.errors import InputError, PacoptWarning, warn
from pacopt.infra.interrupt import OutOfTime, out_of_time, stop_requested
from pacopt.model.episode_stats import episode_metrics
from pacopt.model.instance import Instance
from pacopt.model.jct import JctModel
from pacopt.model.simulator import simulate
from pacopt.model.solution import Solution
from pacopt.model.tiles import tiling
from pacopt.solvers.decomposition import BEAM_SHARE, ONLINE_SHARE, solve_decomposed
from pacopt.solvers.warm import best_warm_start, online_policies

DEFAULT_TIME_LIMIT = 120.0
#: What every exact result says about repeating it (``metrics["reproducibility"]``).
NOT_REPRODUCIBLE = ("not reproducible: time-limited search (the beam, the window steps and the "
                    "solvers stop on the clock), so the same --seed and --threads can give "
                    "another solution, usually with the same accepted count; online methods and "
                    "lp-round are reproducible from their seed")
BOUND_TIME_LIMIT = 10.0  # seconds the bound method gives the relaxation's integer search
#: Share of the time limit building the offline problem may take; past it the method returns
#: the best online episode instead (:func:`online_fallback`).
BUILD_SHARE = 0.5
#: Share of the time limit the online episodes a capped problem's result is checked against
#: may take (:func:`best_online_episode`, played before the search, within the limit).
CHECK_SHARE = 0.05
#: Share of the time limit kept back from the search for what follows it (the solution, its
#: metrics and validation: seconds on a 2001-job instance of 1024 servers).
FINISH_SHARE = 0.02


def learned_policies(instance: Instance):
    """The shipped learned agent for ``instance``, if one can play it: a generator, so torch is
    imported only when the warm start's time share reaches the agent (it is played last)."""
    from pacopt.learned.agent import LearnedPolicy

    try:
        # which shipped checkpoint plays which distribution is the agent's user's business, not
        # a warm start's: its note on checkpoints trained for another cluster is not shown here
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "the shipped fine-tune", PacoptWarning)
            agent = LearnedPolicy(instance)
    except InputError:  # no checkpoint shipped for this preset, or not for these degrees
        return
    yield agent


def run_exact(instance: Instance, method: str, model: JctModel, *, time_limit: float | None,
              threads: int | None, seed: int | None = None, progress: bool = False) -> Solution:
    """Solve the offline problem of ``instance`` with ``method`` (``milp``, ``cpsat`` or ``bound``).

    A stop request (Ctrl-C, :mod:`pacopt.infra.interrupt`) ends the search with its
    incumbent and bound; one made before the search starts skips it, keeping the warm start and
    the trivial bound (the jobs that have any option). ``seed`` is accepted for a uniform runner
    signature; the backends are seeded by their defaults. ``progress`` shows a live line.
    """
    started = time.perf_counter()
    limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    with LiveLine(started, enabled=progress, method=method) as live:
        live.stage("building the problem")
        try:
            problem = build_problem(instance, model, stop_at=started + BUILD_SHARE * limit)
        except OutOfTime as err:
            return online_fallback(instance, method, model, started, limit, str(err))
        # capped candidates need not hold the online episodes' placements: the best one is
        # kept to compare with, played now so that the time limit covers it
        played: dict[str, Solution] = {}  # online episodes, played once for both uses
        episode = (best_online_episode(instance, model, time.perf_counter() + CHECK_SHARE * limit,
                                       played) if problem.capped else None)
        # every online method's episode, cheapest first, within a share of the time
        live.stage("warm starts")
        beam_until = time.perf_counter() + BEAM_SHARE * limit
        warm_method, start = best_warm_start(
            problem, online_policies(instance), best_fit=True, rollout=True,
            extra=learned_policies(instance), beam_until=beam_until,
            deadline=beam_until + ONLINE_SHARE * limit, played=played)
        trivial = problem.trivial_bound
        live(time.perf_counter() - started, len(start), trivial)
        if stop_requested():
            result = ExactResult(chosen=start, status="feasible", bound_accepted=trivial,
                                 seconds=time.perf_counter() - started)
        elif method == "bound":
            live.stage("relaxation")
            relaxed, interrupted = trivial, False  # capped physical: it would bound those only
            if problem.relaxation_bounds_all:
                relaxation = solve_relaxation(problem, min(BOUND_TIME_LIMIT, limit))
                relaxed, interrupted = min(trivial, relaxation.bound), relaxation.interrupted
            result = ExactResult(chosen=start, status="feasible", bound_accepted=relaxed,
                                 seconds=time.perf_counter() - started, interrupted=interrupted)
            live(result.seconds, len(start), relaxed)
        else:
            live.stage("search")
            remaining = max(1.0, (1 - FINISH_SHARE) * limit - (time.perf_counter() - started))
            result = solve_decomposed(problem, _backend(method), time_limit=remaining,
                                      threads=threads, warm_start=start, progress=live,
                                      online=[])  # played above
    bound = result.bound_accepted
    chosen = result.chosen if len(result.chosen) >= len(start) else start
    if episode is not None and episode.accepted > len(chosen):
        return _online_result(instance, method, episode, bound, started, limit,
                              "the capped candidates held fewer jobs than an online episode",
                              quiet=True)
    status = "error" if result.status == "error" else (
        "optimal" if bound == len(chosen) else "feasible")
    solution = to_solution(problem, chosen, method=method, status=status, bound_accepted=bound,
                           solve_seconds=time.perf_counter() - started)
    solution.time_limit, solution.threads = limit, threads or available_cores()
    solution.metrics = episode_metrics(instance, solution)
    solution.metrics["warm_start_accepted"] = len(start)
    solution.metrics["warm_start_method"] = warm_method
    solution.metrics["trace"] = result.trace
    # Said plainly in every result: the search is cut by the clock (the beam widens while time
    # is left, each window step has a time limit, CP-SAT's workers race), so the same seed and
    # thread count can end elsewhere; the accepted count and the bound are what to compare.
    solution.metrics["reproducible"] = False
    solution.metrics["reproducibility"] = NOT_REPRODUCIBLE
    return solution


def run_lp_round(instance: Instance, method: str, model: JctModel, *,
                 time_limit: float | None, threads: int | None, seed: int | None,
                 progress: bool) -> Solution:
    """``lp-round`` (:func:`pacopt.solvers.lp_round.run_lp_round`); when Ctrl-C stops the
    building of its problem, the best online episode (:func:`online_fallback`), as for the exact
    methods. On a tiled cluster its candidates are capped (offline module doc), so its result
    is compared with the first online episode (``tuned``'s, one episode: the seed still gives
    one answer) and the better one is returned, as the exact methods do."""
    from pacopt.solvers.lp_round import run_lp_round as rounding

    started = time.perf_counter()
    limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    try:
        solution = rounding(instance, method, model, time_limit=time_limit, threads=threads,
                            seed=seed, progress=progress)
    except OutOfTime as err:
        return online_fallback(instance, method, model, started, limit, str(err))
    if tiling(instance.cluster) is None or stop_requested():
        return solution
    episode = best_online_episode(instance, model, deadline=started)  # past: one episode
    if episode.accepted <= solution.accepted:
        return solution
    source = solution.metrics["lp_bound_source"]
    solution = _online_result(instance, method, episode, solution.bound_accepted, started, limit,
                              "the capped candidates held fewer jobs than an online episode",
                              quiet=True, clocked=False)  # one episode at seed 0
    solution.time_limit = time_limit
    solution.metrics["lp_bound_source"] = source
    return solution


def online_fallback(instance: Instance, method: str, model: JctModel, started: float,
                    limit: float, stage: str) -> Solution:
    """What an exact method returns when its problem could not be built in time (or Ctrl-C
    came first): the best online episode (:func:`best_online_episode`, until the time limit),
    status ``feasible``, and as bound the jobs that
    some degree can run within their deadline (``ddls``: one JCT per degree; ``physical``: every
    decidable job). ``metrics["stopped"]`` says where it stopped; one warning line says so too,
    and, when Ctrl-C came before any episode could be played (which then rejects every job),
    that nothing was reached."""
    before = stop_requested()  # then the episode rejects every job: no incumbent
    episode = best_online_episode(instance, model, started + limit)
    bound = decidable_jobs(instance, model)
    return _online_result(instance, method, episode, bound, started, limit,
                          f"stopped while {stage}", reached=not before)


def best_online_episode(instance: Instance, model: JctModel, deadline: float,
                        played: dict[str, Solution] | None = None) -> Solution:
    """The episode of :func:`online_policies` (in their order, at least one, more until
    ``deadline`` or a stop request) that accepts the most jobs; each one played goes into
    ``played`` too (policy name -> episode), if given. Once a stop was requested an episode
    rejects every job still to come (:func:`~pacopt.model.simulator.simulate`): what is
    returned then is valid and says that nothing was reached."""
    best = None
    for policy in online_policies(instance):
        if best is not None and out_of_time(deadline):
            break
        solution = simulate(instance, policy, seed=0, model=model)
        if played is not None:
            played[policy.name] = solution
        if best is None or solution.accepted > best.accepted:
            best = solution
    return best


def _online_result(instance: Instance, method: str, episode: Solution, bound: int,
                   started: float, limit: float, why: str, quiet: bool = False,
                   reached: bool = True, clocked: bool = True) -> Solution:
    """``episode`` reported as ``method``'s result with ``bound`` (``metrics["stopped"]``:
    ``why``; a warning line too unless ``quiet``; ``reached`` False: the episode was stopped
    before its first decision, so the line says no incumbent was reached; ``clocked``: the
    method's search was cut by the clock, so the result says it is not reproducible)."""
    if not quiet and not reached:
        warn(f"{method}: {why}, before any incumbent; returning every job rejected (valid, "
             f"nothing reached) and the bound {bound}")
    elif not quiet:
        warn(f"{method}: {why}; returning the best online episode ({episode.method}, "
             f"{episode.accepted} accepted) and the bound {bound}")
    played = episode.method
    episode.method = method
    episode.status = "optimal" if episode.accepted >= bound else "feasible"
    episode.bound_accepted = bound
    episode.gap = (bound - episode.accepted) / max(bound, 1)
    episode.solve_seconds = time.perf_counter() - started
    episode.time_limit = limit
    episode.metrics = episode_metrics(instance, episode)
    episode.metrics["stopped"] = why
    episode.metrics["warm_start_method"] = played
    episode.metrics["warm_start_accepted"] = episode.accepted
    if clocked:
        episode.metrics["reproducible"] = False
        episode.metrics["reproducibility"] = NOT_REPRODUCIBLE
    return episode


def _backend(method: str):
    """The backend's solve function, imported on demand (each pulls in a solver library)."""
    if method == "milp":
        from pacopt.formulations.milp import solve_milp
        return solve_milp
    from pacopt.formulations.cpsat import solve_cpsat
    return solve_cpsat


class LiveLine:
    """Exact methods' progress on stderr: ``[elapsed] METHOD STAGE  incumbent I  bound B  gap G``.

    Call it with ``(seconds, incumbent, bound)`` on every improvement (from any thread), and
    :meth:`stage` when the method moves on (building the problem, warm starts, the search). On a
    terminal one line is redrawn twice a second from the start, so the clock and the stage show
    while the solver is silent; elsewhere (a log file, a pipe) a line is printed per improvement
    only.
    """

    def __init__(self, started: float, enabled: bool = True, stream=None, method: str = ""):
        self.started, self.enabled, self.method = started, enabled, method
        self.stream = stream or sys.stderr
        self.incumbent: int | None = None
        self.bound: int | None = None
        self.current = ""
        self.live = enabled and self.stream.isatty()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._ticker = threading.Thread(target=self._tick, name="live-line", daemon=True)

    def __enter__(self) -> Self:
        if self.live:
            self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.live:
            self._done.set()
            self._ticker.join()
            self._write(f"\r{self.line(time.perf_counter() - self.started)}\n")

    def __call__(self, seconds: float, incumbent: int | None, bound: int | None) -> None:
        with self._lock:
            changed = (incumbent, bound) != (self.incumbent, self.bound)
            self.incumbent, self.bound = incumbent, bound
        if self.enabled and not self.live and changed:  # seconds since the run started
            self._write(self.line(time.perf_counter() - self.started) + "\n")

    def stage(self, name: str) -> None:
        """The method moves on to ``name``: the terminal's line shows it until the next stage,
        and the next line printed elsewhere names it (a stage alone prints nothing there, so
        that a bad input stays one line)."""
        self.current = name

    def line(self, seconds: float) -> str:
        """The progress line at ``seconds`` after the start."""
        incumbent, bound = self.incumbent, self.bound
        gap = "" if not incumbent or bound is None else f"  gap {(bound - incumbent) / bound:6.2%}"
        # padded, so that a redrawn line covers a longer one before it
        head = f"{self.method} {self.current}".strip()
        return (f"[{seconds:8.1f} s] {head:<28} incumbent "
                f"{incumbent if incumbent is not None else '-':>5}  "
                f"bound {bound if bound is not None else '-':>5}{gap:<13}")

    def _tick(self) -> None:
        while not self._done.wait(0.5):
            self._write(f"\r{self.line(time.perf_counter() - self.started)}")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: progress is not worth a crash
            self.enabled = self.live = False
