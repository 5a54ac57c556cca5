"""The online form of randomised rounding (``--method lp-online``): an LP at every arrival.

pacopt's own design after Yu et al. (TNSE 2021; only their abstract is at hand): at each arrival
the policy solves a small LP and rounds the arriving job's part of it.

**The LP.** Columns, as in :mod:`pacopt.solvers.lp_round`, are options (degree, footprint,
timing) with the offline LP's packing rows (one option per job, one per server at each maximal
instant):
- the arriving job: one column per degree first-fit can place now and whose JCT meets the
  deadline (and the horizon), with the placement first-fit will actually use;
- sampled future arrivals: ``samples`` independent scenarios of ``lookahead`` jobs each, arriving
  at the mean interarrival time seen so far, graph and beta drawn from the jobs seen so far (the
  instance keeps its jobs, not its workload spec, and an online policy may not read ahead, so
  the workload distribution is estimated from what has arrived). Their columns are every
  candidate footprint (:func:`pacopt.formulations.offline.footprints`) clear of the jobs running
  until then, each worth ``1 / samples`` (a degree with too many footprints to enumerate, on a
  large cluster without tiles, is left out);
- the running jobs are constants: they hold their servers until their end.
Scenarios share the arriving job's columns and nothing else (a two-stage stochastic LP).

**Objective.** One per job (the future's scenarios weighted ``1 / samples``), less a tie-break
for a longer JCT: among equal counts the LP prefers the option that frees its servers soonest
(the offline LP's worker-time tie-break did worse here: ``docs/experiments.md``, lp-online).

**Rounding.** The arriving job takes degree d with probability equal to its LP mass on d, and is
rejected with the rest, with a generator seeded by ``reset(seed)``, so an episode is
reproducible. The LP is maximal in the arriving job's mass unless the sampled future is worth
more, so it rejects only jobs whose servers the future needs.

It is an online policy that solves the packing LP of :mod:`pacopt.formulations.packing_lp`; the
world model never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from pacopt.formulations.offline import ColumnSet, pattern_options
from pacopt.formulations.packing_lp import EPS_COST, solve_packing_lp
from pacopt.infra.errors import InputError
from pacopt.model.decision import Decision
from pacopt.model.instance import Instance
from pacopt.model.placers import TooManyFootprints
from pacopt.model.state import EPS_MS
from pacopt.model.topology import mask_words, servers_of

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
        self.menus: dict[str, _FutureMenu] = {}
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
        columns = [self._arriving(decision, now)]
        if not len(columns[0].job):
            return 0
        if len(self.arrivals) > 1 and self.lookahead:
            gap = (self.arrivals[-1] - self.arrivals[0]) / (len(self.arrivals) - 1)
            columns += self._futures(decision, now, max(gap, EPS_MS))
        lp = _Columns.join(columns)
        costs = self._costs(lp)
        arriving = list(range(len(columns[0].job)))  # the arriving job's columns come first
        x = _clearly_best(lp, arriving, costs)
        if x is None:
            rows = self._rows(lp)
            x = _split_off(len(costs), arriving, rows, costs)
            if x is None:
                x = solve_packing_lp(costs, _by_job(lp.job), rows).x
        mass = {int(lp.degree[i]): x[i] for i in arriving}
        degrees = sorted(mass)
        cumulative = np.cumsum([mass[d] for d in degrees])
        pick = int(np.searchsorted(cumulative, self.rng.random(), side="right"))
        return degrees[pick] if pick < len(degrees) else 0

    # ----- the LP's columns -----------------------------------------------------------------------
    def _arriving(self, decision: Decision, now: float) -> _Columns:
        """The arriving job's columns (job 0): each degree first-fit places now in time."""
        live, horizon = decision.options(), decision.horizon_ms
        degrees = []
        for d in range(1, decision.max_degree + 1):
            jct = float(live.jct_ms[d])
            if jct > decision.deadline_ms or (horizon is not None and now + jct > horizon + EPS_MS):
                continue
            degrees.append(d)
        return _Columns(job=np.zeros(len(degrees), dtype=np.int64),
                        degree=np.array(degrees, dtype=np.int64),
                        start=np.full(len(degrees), now), jct=live.jct_ms[degrees].astype(float),
                        servers=[servers_of(live.masks[d]) for d in degrees])

    def _futures(self, decision: Decision, now: float, gap: float) -> list[_Columns]:
        """Columns of ``samples`` x ``lookahead`` sampled future jobs (jobs 1, 2, ...), each
        clear of the running jobs."""
        state, model, instance = decision.state, decision.model, self.instance
        # the servers busy at a time: the masks of the jobs running past it, or-ed (by end)
        ends = sorted(state.running.items(), key=lambda item: item[1])
        end_ms = np.array([end for _, end in ends])
        held = np.array([state.held[j] for j, _ in ends] + [0], dtype=object)
        busy_after = np.bitwise_or.accumulate(held[::-1])[::-1]  # [i]: the jobs ends[i:]
        # which of a menu's footprints are clear at a start, by (footprints, position in
        # ``ends``): the scenarios share starts, and graphs often share footprints
        clear: dict[tuple[bytes, int], np.ndarray] = {}
        busy_words: dict[int, np.ndarray] = {}
        jobs, starts, degrees, jcts, servers = [], [], [], [], []  # the columns, by future job
        draws = self.rng.integers(len(self.seen), size=(self.samples, self.lookahead)).tolist()
        starts_at = [now + (i + 1) * gap for i in range(self.lookahead)]
        # a running job conflicts while it runs past the start (tolerance as the rows')
        ats = np.searchsorted(end_ms, np.array(starts_at) + EPS_MS, side="right").tolist()
        for s in range(self.samples):
            for i in range(self.lookahead):
                graph_name, beta = self.seen[draws[s][i]]
                scale = self.scales[draws[s][i]]
                graph = instance.graphs[graph_name]
                table = model.table(graph)
                start, at = starts_at[i], ats[i]
                if instance.horizon_ms is not None and start >= instance.horizon_ms:
                    continue
                deadline = beta * table.seq_jct_ms  # in the graph's times: both scale alike
                menu = self._menu(graph, table, model)
                ok = menu.jct_ms <= deadline
                if instance.horizon_ms is not None:
                    ok &= start + menu.jct_ms * scale <= instance.horizon_ms + EPS_MS
                free = clear.get((menu.key, at))
                if free is None:
                    busy = busy_words.get(at)
                    if busy is None:
                        busy = busy_words[at] = mask_words([busy_after[at]],
                                                           menu.words.shape[1])[0]
                    free = clear[menu.key, at] = ~(menu.words & busy).any(1)
                keep = np.flatnonzero(ok & free)
                if len(keep):
                    jobs.append((1 + s * self.lookahead + i, len(keep)))
                    starts.append(start)
                    degrees.append(menu.degrees[keep])
                    jcts.append(menu.jct_ms[keep] * scale)
                    servers += [menu.servers[k] for k in keep.tolist()]
        if not jobs:
            return []
        ids, sizes = np.array(jobs, dtype=np.int64).T
        return [_Columns(job=np.repeat(ids, sizes), degree=np.concatenate(degrees),
                         start=np.repeat(np.array(starts), sizes), jct=np.concatenate(jcts),
                         servers=servers)]

    def _menu(self, graph, table, model) -> _FutureMenu:
        """Every candidate footprint of ``graph`` at every degree placeable on an empty cluster,
        with its timing, as arrays (cached): what a sampled future job of it may take."""
        if graph.name not in self.menus:
            columns = []
            for d in range(1, table.max_degree + 1):
                if not table.placed[d]:
                    continue
                try:
                    options = pattern_options(graph, table.counts[d], model, self.instance.cluster)
                except TooManyFootprints:  # a large cluster without tiles: left out of futures
                    continue
                columns += [(d, placement, jct) for placement, jct, _ in options]
            width = -(-self.instance.cluster.num_servers // 64)
            self.menus[graph.name] = _FutureMenu(
                degrees=np.array([c[0] for c in columns], dtype=np.int64),
                jct_ms=np.array([c[2] for c in columns], dtype=float),
                servers=[c[1].workers() for c in columns],
                words=mask_words([c[1].mask for c in columns], width))
        return self.menus[graph.name]

    # ----- rows and costs -------------------------------------------------------------------------
    def _rows(self, lp: _Columns) -> list[list[int]]:
        """Conflict rows of each scenario together with the arriving job (scenarios never
        meet each other)."""
        arriving = np.flatnonzero(lp.job == 0)
        scenario = (lp.job - 1) // max(self.lookahead, 1)
        columns = ColumnSet(lp.start, lp.start + lp.jct, lp.job, lp.servers)
        rows: list[list[int]] = []
        for s in range(self.samples):
            members = np.concatenate([arriving, np.flatnonzero((lp.job > 0) & (scenario == s))])
            rows += columns.conflict_rows(members)
        return rows

    def _costs(self, lp: _Columns) -> np.ndarray:
        """1 per job less a tie-break of at most :data:`EPS_COST` for a longer JCT (a job that
        ends sooner frees its servers sooner), the future's columns weighted ``1 / samples``."""
        weight = np.where(lp.job == 0, 1.0, 1.0 / self.samples)
        return (1.0 - EPS_COST * lp.jct / lp.jct.max()) * weight


@dataclass(frozen=True)
class _Columns:
    """Some of an arrival's LP columns as parallel arrays: the job each belongs to (0 the
    arriving one), its degree, start and JCT, and its servers (a list of tuples)."""

    job: np.ndarray
    degree: np.ndarray
    start: np.ndarray
    jct: np.ndarray
    servers: list[tuple[int, ...]]

    @staticmethod
    def join(parts: list[_Columns]) -> _Columns:
        arrays = (np.concatenate([getattr(p, f) for p in parts])
                  for f in ("job", "degree", "start", "jct"))
        return _Columns(*arrays, servers=[s for p in parts for s in p.servers])


@dataclass(frozen=True)
class _FutureMenu:
    """One graph's candidate footprints over all its degrees, in degree order (parallel
    arrays)."""

    degrees: np.ndarray
    jct_ms: np.ndarray
    servers: list[tuple[int, ...]]
    words: np.ndarray  # each footprint's bitmask as 64-bit words (numpy ands them at once)

    @cached_property
    def key(self) -> bytes:
        """The footprints themselves (graphs split alike have the same ones)."""
        return self.words.tobytes()


#: How much more the arriving job's best column must be worth than its next for
#: :func:`_clearly_best` to decide without HiGHS: ten times HiGHS's dual feasibility
#: tolerance, within which HiGHS may stop at the next column (the tie-break's costs of
#: neighbouring degrees can differ by less than 1e-7), so the episode is the LP's.
_CLEAR_GAP = 1e-6


def _clearly_best(lp: _Columns, arriving: list[int], costs: np.ndarray) -> np.ndarray | None:
    """The arriving job's part of the LP's optimum without its rows or HiGHS, where its best
    column is worth more than its next by :data:`_CLEAR_GAP` and no future column shares a
    server with it while it runs (so no conflict row holds it): every optimum puts all the
    job's mass there, since moving mass onto it from another of the job's columns gains and
    frees rows, and only the job's one-option row limits it. None otherwise."""
    ranked = sorted(arriving, key=lambda i: costs[i], reverse=True)
    best = ranked[0]
    if len(ranked) > 1 and costs[best] - costs[ranked[1]] <= _CLEAR_GAP:
        return None
    servers, end = set(lp.servers[best]), lp.start[best] + lp.jct[best]
    # a future column meets it in a row when both run at the future one's start (the rows'
    # tolerance: a job ending within EPS_MS of an instant is over)
    for k in np.flatnonzero((lp.job > 0) & (lp.start + EPS_MS < end)).tolist():
        if not servers.isdisjoint(lp.servers[k]):
            return None
    x = np.zeros(len(costs))
    x[best] = 1.0
    return x


def _split_off(size: int, arriving: list[int], rows: list[list[int]],
               costs: np.ndarray) -> np.ndarray | None:
    """The arriving job's part of the LP's optimum without solving it, where no conflict row
    holds one of its columns: the LP then splits, and that part puts all its mass on its best
    column (when the maximum is unique; None otherwise, and where a row holds one)."""
    if {i for row in rows for i in row}.intersection(arriving):
        return None
    best = max(arriving, key=lambda i: costs[i])
    if sum(costs[i] == costs[best] for i in arriving) > 1:
        return None
    x = np.zeros(size)
    x[best] = 1.0
    return x


def _by_job(jobs: np.ndarray) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for i, job in enumerate(jobs.tolist()):
        groups.setdefault(job, []).append(i)
    return list(groups.values())
