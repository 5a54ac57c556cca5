"""The JCT model: partition, place and time jobs under one preset on one cluster, with caches.

:class:`JctModel` is the single place where a (graph, degree or per-op counts, placement) becomes
a JCT. It caches at four levels so that episodes, formulations, studies and the learned agent stay fast:
- first-fit plans per (graph, counts) and placements, keyed by (graph, counts, occupied servers);
- live per-degree options (:class:`LiveOptions`), keyed by (graph, occupied servers);
- step timings, keyed by (graph, counts, the placement's symmetry class), in memory and on disk
  (``$PACOPT_CACHE_DIR``, default ``~/.cache/pacopt``), shared by every process;
- per-job tables (:class:`JobTable`), one per graph.

Preset semantics for the JCT of a placed job:
- ``ddls``: the reference keeps one JCT per (graph, degree) whatever the placement (placement only
  changes communication, about 1e-6 relative there), so the JCT is the one of the job's pattern
  as first-fit places it on an empty cluster;
- ``physical``: the JCT of the actual placement.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pacopt.cluster.graph import JobGraph
from pacopt.cluster.partition import op_counts, partition
from pacopt.cluster.placement import FitPlan, Placement
from pacopt.cluster.settings import ModelSettings
from pacopt.cluster.step import StepTiming, simulate_step
from pacopt.cluster.topology import RampCluster

#: Bump when the timing rules change: it invalidates every on-disk timing.
TIMING_VERSION = 1
_PLACEMENT_CACHE_LIMIT = 200_000
_OPTIONS_CACHE_LIMIT = 100_000


def cache_dir() -> Path:
    """Where timings persist: ``$PACOPT_CACHE_DIR`` or ``~/.cache/pacopt``."""
    return Path(os.environ.get("PACOPT_CACHE_DIR") or Path.home() / ".cache" / "pacopt")


@dataclass(frozen=True)
class Timing:
    """JCT of a placed job and its exposed communication time, both over all training steps (ms)."""

    jct_ms: float
    comm_overhead_ms: float


@dataclass(frozen=True)
class JobTable:
    """Per-degree facts of one graph on an empty cluster; index ``d`` = degree (0 = reject).

    Arrays are numpy so that policies and the learned agent can read them without copying.
    ``placed[d]``: first-fit finds room on an empty cluster; ``workers[d]``: its footprint there;
    ``jct_ms[d]`` and ``comm_overhead_ms[d]``: NaN where not placed.
    """

    graph: JobGraph
    preset: str
    seq_jct_ms: float
    counts: tuple[tuple[int, ...], ...]
    placed: np.ndarray
    workers: np.ndarray
    jct_ms: np.ndarray
    comm_overhead_ms: np.ndarray

    @property
    def max_degree(self) -> int:
        return len(self.placed) - 1

    def rows(self) -> list[dict]:
        """One dict per degree 1..max: ``degree, placed, workers, jct_ms, seq_jct_ms,
        comm_overhead_ms`` (JSON-ready; ``None`` where not placed)."""
        out = []
        for d in range(1, len(self.placed)):
            ok = bool(self.placed[d])
            out.append({"degree": d, "placed": ok, "workers": int(self.workers[d]) if ok else None,
                        "jct_ms": float(self.jct_ms[d]) if ok else None,
                        "seq_jct_ms": self.seq_jct_ms,
                        "comm_overhead_ms": float(self.comm_overhead_ms[d]) if ok else None})
        return out


@dataclass(frozen=True)
class LiveOptions:
    """Per-degree facts of one job on the live cluster now; index ``d`` = degree (0 = reject).

    ``placeable[d]``: first-fit finds room now (False at 0); ``workers[d]``: the footprint of that
    placement (0 where not placeable); ``jct_ms[d]``: its JCT under the preset (``inf`` where not
    placeable). Read-only numpy arrays (they are cached and shared).
    """

    placeable: np.ndarray
    workers: np.ndarray
    jct_ms: np.ndarray


class JctModel:
    """Partitions, places and times jobs for one (cluster, model settings) pair."""

    def __init__(self, cluster: RampCluster, settings: ModelSettings, persist: bool = True):
        self.cluster = cluster
        self.settings = settings
        self.persist = persist
        self._plans: dict[tuple, FitPlan] = {}
        self._placements: dict[tuple, Placement | None] = {}
        self._options: dict[tuple, LiveOptions] = {}
        self._table_plans: dict[str, tuple] = {}
        self._live_jct: dict[tuple, float] = {}
        self._timings: dict[tuple, dict[str, StepTiming]] = {}  # per graph file -> key -> timing
        self._tables: dict[str, JobTable] = {}

    # ----- partitioning and placement -------------------------------------------------------------
    def counts(self, graph: JobGraph, degree: int) -> tuple[int, ...]:
        """Per-op split counts at ``degree`` (PAC-ML's quantum rule)."""
        return op_counts(graph, degree, self.settings.quantum_ms)

    def plan(self, graph: JobGraph, counts: tuple[int, ...]) -> FitPlan:
        """The prepared first-fit of ``counts`` (cached)."""
        key = (graph.fingerprint, counts)
        if key not in self._plans:
            self._plans[key] = FitPlan.build(graph, counts, self.cluster)
        return self._plans[key]

    def place(self, graph: JobGraph, counts: tuple[int, ...], occupied: int = 0) -> Placement | None:
        """First-fit placement of ``counts`` avoiding the ``occupied`` servers (cached)."""
        key = (graph.fingerprint, counts, occupied)
        if key not in self._placements:
            if len(self._placements) >= _PLACEMENT_CACHE_LIMIT:
                self._placements.clear()
            plan = self.plan(graph, counts)
            choice = plan.fit(occupied)
            self._placements[key] = None if choice is None else plan.placement(choice)
        return self._placements[key]

    def live_options(self, table: JobTable, occupied: int) -> LiveOptions:
        """Per-degree placeability, footprint and JCT of ``table``'s graph placed by first-fit
        avoiding ``occupied`` (cached by occupancy). ``ddls`` reads the JCT from the table (one
        JCT per degree, module doc); ``physical`` times each actual placement (cached by it)."""
        graph = table.graph
        key = (graph.fingerprint, occupied)
        options = self._options.get(key)
        if options is not None:
            return options
        sizes, degrees = self._live_plan(table)
        free = [self.cluster.free_block(m, occupied) for m in sizes]  # one look-up per size
        size = len(table.placed)
        placeable = np.zeros(size, dtype=bool)
        workers = np.zeros(size, dtype=np.int64)
        jct = np.full(size, np.inf)
        ddls = self.settings.preset == "ddls"
        for d, plan, where in degrees:
            if where is None:  # memory can bind: the exact scan
                choice = plan.fit(occupied)
            else:  # memory-free: the first free block of each of its sizes
                choice = tuple(free[i] for i in where)
                if any(block is None for block in choice):
                    choice = None
            if choice is None:
                continue
            placeable[d] = True
            workers[d] = plan.footprint(choice).bit_count()
            jct[d] = table.jct_ms[d] if ddls else self._placed_jct(plan, choice)
        for array in (placeable, workers, jct):
            array.flags.writeable = False
        if len(self._options) >= _OPTIONS_CACHE_LIMIT:
            self._options.clear()
        options = self._options[key] = LiveOptions(placeable, workers, jct)
        return options

    def _live_plan(self, table: JobTable) -> tuple[tuple[int, ...], tuple]:
        """Every distinct count of the memory-free degrees, and per degree placeable on an empty
        cluster ``(degree, plan, positions of its sizes in that list or None)`` (cached)."""
        key = table.graph.fingerprint
        if key not in self._table_plans:
            sizes: dict[int, int] = {}
            degrees = []
            for d in range(1, len(table.placed)):
                if table.placed[d]:
                    plan = self.plan(table.graph, table.counts[d])
                    where = (tuple(sizes.setdefault(m, len(sizes)) for m in plan.sizes)
                             if plan.memory_free else None)
                    degrees.append((d, plan, where))
            self._table_plans[key] = (tuple(sizes), tuple(degrees))
        return self._table_plans[key]

    def _placed_jct(self, plan: FitPlan, choice) -> float:
        key = (plan.graph.fingerprint, plan.counts, plan.symmetry_key(choice))
        if key not in self._live_jct:
            if len(self._live_jct) >= _PLACEMENT_CACHE_LIMIT:
                self._live_jct.clear()
            placement = plan.placement(choice)
            self._live_jct[key] = self.timing(plan.graph, plan.counts, placement).jct_ms
        return self._live_jct[key]

    # ----- timing ----------------------------------------------------------------------------
    def timing(self, graph: JobGraph, counts: tuple[int, ...], placement: Placement) -> Timing:
        """JCT and exposed communication of a placed job, under the preset's rule (module doc)."""
        if self.settings.preset == "ddls":
            placement = self.place(graph, counts, 0) or placement
        step = self._step(graph, counts, placement)
        steps = self.settings.training_steps
        return Timing(jct_ms=steps * step.step_ms, comm_overhead_ms=steps * step.exposed_comm_ms)

    def _step(self, graph: JobGraph, counts: tuple[int, ...], placement: Placement) -> StepTiming:
        store = self._store(graph)
        key = placement.canonical_key(self.cluster)
        if key not in store:
            store[key] = simulate_step(partition(graph, counts), placement, self.cluster, self.settings)
            if self.persist:
                self._append(graph, key, store[key])
        return store[key]

    def _file(self, graph: JobGraph) -> Path:
        ident = json.dumps([TIMING_VERSION, graph.fingerprint, self.cluster.to_dict(),
                            self.settings.preset], sort_keys=True)
        digest = hashlib.blake2b(ident.encode(), digest_size=10).hexdigest()
        return cache_dir() / "timings" / f"{graph.name}-{self.settings.preset}-{digest}.jsonl"

    def _store(self, graph: JobGraph) -> dict[str, StepTiming]:
        ident = graph.fingerprint
        if ident not in self._timings:
            store: dict[str, StepTiming] = {}
            path = self._file(graph)
            if self.persist and path.exists():
                for line in path.read_text().splitlines():
                    try:  # a line cut short by a killed process is skipped, not fatal
                        key, step_ms, exposed = json.loads(line)
                        store[key] = StepTiming(step_ms, exposed)
                    except (ValueError, TypeError):
                        continue
            self._timings[ident] = store
        return self._timings[ident]

    def _append(self, graph: JobGraph, key: str, timing: StepTiming) -> None:
        path = self._file(graph)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as handle:  # one short append per timing: safe across processes
                handle.write(json.dumps([key, timing.step_ms, timing.exposed_comm_ms]) + "\n")
        except OSError:
            self.persist = False  # a read-only home must not stop the work; keep it in memory

    # ----- the per-job table ---------------------------------------------------------------------
    def table(self, graph: JobGraph, progress: bool = False) -> JobTable:
        """The per-degree table of ``graph`` on an empty cluster (cached; ``progress`` shows a
        bar over the degrees, worth it for graphs with hundreds of ops)."""
        if graph.fingerprint in self._tables:
            return self._tables[graph.fingerprint]
        size = self.settings.max_partitions_per_op + 1
        placed = np.zeros(size, dtype=bool)
        workers = np.zeros(size, dtype=np.int64)
        jct = np.full(size, np.nan)
        comm = np.full(size, np.nan)
        counts: list[tuple[int, ...]] = [()]
        for d in tqdm(range(1, size), desc=f"table {graph.name}", unit="degree", leave=False,
                      disable=None if progress else True):
            c = self.counts(graph, d)
            counts.append(c)
            placement = self.place(graph, c, 0)
            if placement is None:
                continue
            timing = self.timing(graph, c, placement)
            placed[d], workers[d] = True, placement.num_workers
            jct[d], comm[d] = timing.jct_ms, timing.comm_overhead_ms
        for array in (placed, workers, jct, comm):
            array.flags.writeable = False
        table = JobTable(graph=graph, preset=self.settings.preset,
                         seq_jct_ms=graph.seq_jct_ms(self.settings.training_steps),
                         counts=tuple(counts), placed=placed, workers=workers, jct_ms=jct,
                         comm_overhead_ms=comm)
        self._tables[graph.fingerprint] = table
        return table
