"""The online form of randomised rounding (``--method lp-online``): an LP at every arrival.

pacopt's own design after Yu et al. (TNSE 2021; only their abstract is at hand): at each arrival
the policy solves a small LP and rounds the arriving job's part of it.

**The LP.** Columns, as in :mod:`pacopt.formulations.lp_round`, are options (degree, footprint,
timing) with the offline LP's packing rows (one option per job, one per server at each maximal
instant):
- the arriving job: one column per degree first-fit can place now and whose JCT meets the
  deadline (and the horizon), with the placement first-fit will actually use;
- sampled future arrivals: ``samples`` independent scenarios of ``lookahead`` jobs each, arriving
  at the mean interarrival time seen so far, graph and beta drawn from the jobs seen so far (the
  instance keeps its jobs, not its workload spec, and an online policy may not read ahead, so
  the workload distribution is estimated from what has arrived). Their columns are every
  candidate footprint (:func:`pacopt.formulations.offline.footprints`) clear of the jobs running
  until then, each worth ``1 / samples``;
- the running jobs are constants: they hold their servers until their end.
Scenarios share the arriving job's columns and nothing else (a two-stage stochastic LP).

**Objective.** One per job (the future's scenarios weighted ``1 / samples``), less a tie-break
for a longer JCT: among equal counts the LP prefers the option that frees its servers soonest
(the offline LP's worker-time tie-break did worse here: ``docs/experiments.md``, lp-online).

**Rounding.** The arriving job takes degree d with probability equal to its LP mass on d, and is
rejected with the rest, with a generator seeded by ``reset(seed)``, so an episode is
reproducible. The LP is maximal in the arriving job's mass unless the sampled future is worth
more, so it rejects only jobs whose servers the future needs.

It lives in ``formulations`` (it solves LPs); ``cluster`` never imports it.
"""

from __future__ import annotations

import numpy as np

from pacopt.cluster.instance import Instance
from pacopt.cluster.placement import Placement
from pacopt.cluster.policies import Decision
from pacopt.cluster.state import EPS_MS
from pacopt.formulations.lp_round import EPS_COST, Board, solve_lp
from pacopt.formulations.offline import Option, conflict_rows, pattern_options
from pacopt.infra.errors import InputError

DEFAULT_LOOKAHEAD = 4
DEFAULT_SAMPLES = 2


def lp_online_policy(method: str, instance: Instance, checkpoint=None) -> LpOnline:
    """The registry's factory of ``lp-online`` (see :mod:`pacopt.solvers.registry`)."""
    return LpOnline(instance, checkpoint)


class LpOnline:
    """Online policy: at each arrival, an LP over the running jobs, the arriving job and sampled
    future arrivals; the arriving job's degree is rounded from it (module doc)."""

    name = "lp-online"

    def __init__(self, instance: Instance, checkpoint=None, *, lookahead: int = DEFAULT_LOOKAHEAD,
                 samples: int = DEFAULT_SAMPLES):
        if checkpoint is not None:
            raise InputError("--checkpoint applies to the learned method only, not 'lp-online'")
        if lookahead < 0 or samples < 1:
            raise ValueError("lookahead must be >= 0 and samples >= 1")
        self.instance = instance
        self.lookahead, self.samples = lookahead, samples
        self.wide = instance.cluster.num_servers > 62
        self.patterns: dict[tuple[str, int], list[tuple[Placement, float, float]]] = {}
        self.reset(None)

    def reset(self, seed: int | None) -> None:
        """Forget the jobs seen and reseed the sampling and rounding."""
        self.rng = np.random.default_rng(seed)
        self.seen: list[tuple[str, float]] = []  # (graph, beta) of every arrival so far
        self.scales: list[float] = []  # and its work scale (a trace job's own amount of work)
        self.arrivals: list[float] = []

    def choose(self, decision: Decision) -> int:
        job = self.instance.jobs[decision.job_index]
        self.seen.append((job.graph, job.max_jct_fraction))
        self.scales.append(self.instance.work_scale(job))
        self.arrivals.append(job.arrival_ms)
        now = decision.state.now_ms
        options = self._arriving(decision, now)
        if not options:
            return 0
        if len(self.arrivals) > 1 and self.lookahead:
            gap = (self.arrivals[-1] - self.arrivals[0]) / (len(self.arrivals) - 1)
            options += self._futures(decision, now, max(gap, EPS_MS))
        point = solve_lp(options, _by_job(options), self._rows(options), self._costs(options))
        mass = {options[i].degree: point.x[i] for i in range(len(options)) if options[i].job == 0}
        degrees = sorted(mass)
        cumulative = np.cumsum([mass[d] for d in degrees])
        pick = int(np.searchsorted(cumulative, self.rng.random(), side="right"))
        return degrees[pick] if pick < len(degrees) else 0

    # ----- the LP's columns -----------------------------------------------------------------------
    def _arriving(self, decision: Decision, now: float) -> list[Option]:
        """The arriving job's columns (job 0): each degree first-fit places now in time."""
        live, horizon = decision.options(), decision.horizon_ms
        out = []
        for d in range(1, decision.max_degree + 1):
            jct = float(live.jct_ms[d])
            if jct > decision.deadline_ms or (horizon is not None and now + jct > horizon + EPS_MS):
                continue
            out.append(Option(job=0, degree=d, placement=decision.placement(d), jct_ms=jct,
                              comm_overhead_ms=0.0, start_ms=now))
        return out

    def _futures(self, decision: Decision, now: float, gap: float) -> list[Option]:
        """Columns of ``samples`` x ``lookahead`` sampled future jobs (jobs 1, 2, ...), each
        clear of the running jobs."""
        state, model, instance = decision.state, decision.model, self.instance
        running = Board(self.wide)
        for j, end in state.running.items():
            mask = 0
            for server in np.flatnonzero(state.owner == j):
                mask |= 1 << int(server)
            running.take(j, now, end, mask)
        out: list[Option] = []
        draws = self.rng.integers(len(self.seen), size=(self.samples, self.lookahead))
        for s in range(self.samples):
            for i in range(self.lookahead):
                graph_name, beta = self.seen[draws[s, i]]
                scale = self.scales[draws[s, i]]
                graph = instance.graphs[graph_name]
                table = model.table(graph)
                start = now + (i + 1) * gap
                if instance.horizon_ms is not None and start >= instance.horizon_ms:
                    continue
                deadline = beta * table.seq_jct_ms  # in the graph's times: both scale alike
                candidates = [
                    Option(job=1 + s * self.lookahead + i, degree=d, placement=placement,
                           jct_ms=jct * scale, comm_overhead_ms=comm * scale, start_ms=start)
                    for d in range(1, table.max_degree + 1) if table.placed[d]
                    for placement, jct, comm in self._pattern(graph, table, d, model)
                    if jct <= deadline and (instance.horizon_ms is None
                                            or start + jct * scale <= instance.horizon_ms + EPS_MS)]
                if not candidates:
                    continue
                free = running.free(start, np.array([o.end_ms for o in candidates]),
                                    np.array([o.mask for o in candidates],
                                             dtype=object if self.wide else np.int64))
                out += [o for o, ok in zip(candidates, free) if ok]
        return out

    def _pattern(self, graph, table, degree: int, model) -> list[tuple[Placement, float, float]]:
        """Every candidate footprint of ``graph`` at ``degree`` with its timing (cached)."""
        key = (graph.name, degree)
        if key not in self.patterns:
            self.patterns[key] = pattern_options(graph, table.counts[degree], model,
                                                  self.instance.cluster)
        return self.patterns[key]

    # ----- rows and costs -------------------------------------------------------------------------
    def _rows(self, options: list[Option]) -> list[list[int]]:
        """Conflict rows of each scenario together with the arriving job (scenarios never
        meet each other)."""
        arriving = [i for i, o in enumerate(options) if o.job == 0]
        rows: list[list[int]] = []
        for s in range(self.samples):
            members = arriving + [i for i, o in enumerate(options)
                                  if o.job and (o.job - 1) // max(self.lookahead, 1) == s]
            rows += [[members[i] for i in row]
                     for row in conflict_rows([options[i] for i in members],
                                               self.instance.cluster.num_servers)]
        return rows

    def _costs(self, options: list[Option]) -> np.ndarray:
        """1 per job less a tie-break of at most :data:`EPS_COST` for a longer JCT (a job that
        ends sooner frees its servers sooner), the future's columns weighted ``1 / samples``."""
        weight = np.array([1.0 if o.job == 0 else 1.0 / self.samples for o in options])
        jct = np.array([o.jct_ms for o in options])
        return (1.0 - EPS_COST * jct / jct.max()) * weight


def _by_job(options: list[Option]) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for i, option in enumerate(options):
        groups.setdefault(option.job, []).append(i)
    return list(groups.values())
