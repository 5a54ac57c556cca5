"""The JCT model: partition, place and time jobs under one preset on one cluster, with caches.

:class:`JctModel` is the single place where a (graph, degree or per-op counts, placement) becomes
a JCT. It caches at four levels so that episodes, formulations, studies and the learned agent stay fast:
- first-fit plans per (graph, counts) and placements, keyed by (graph, counts, occupied servers);
- live per-degree options (:class:`LiveOptions`), keyed by (placer, graph, occupied servers, and
  under ``physical`` best fit the job's deadline, which decides among its footprints);
- per graph, the candidate footprints of best fit and compact (:class:`FootprintMenu`); on a
  tiled cluster (:mod:`pacopt.model.tiles`) those of one tile, scored per tile and cached by
  the tile's own occupancy;
- step timings, keyed by (graph, counts, the placement's symmetry class), in memory and on disk
  (``$PACOPT_CACHE_DIR``, default ``~/.cache/pacopt``), shared by every process, every line
  carrying its provenance and a checksum (:mod:`pacopt.model.timing_cache`);
- per-job tables (:class:`JobTable`), one per graph.

Preset semantics for the JCT of a placed job:
- ``ddls``: the reference keeps one JCT per (graph, degree) whatever the placement (placement only
  changes communication, about 1e-6 relative there), so the JCT is the one of the job's pattern
  as first-fit places it on an empty cluster;
- ``physical``: the JCT of the actual placement.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import NamedTuple

import numpy as np

from pacopt.infra.bounded_cache import BoundedCache
from pacopt.infra.progress import tqdm
from pacopt.model.first_fit import FitPlan, Placement
from pacopt.model.graph import JobGraph
from pacopt.model.partition import op_counts, partition
from pacopt.model.placers import WORKER_PENALTY, FootprintMenu, free_block_score, pick
from pacopt.model.settings import ModelSettings
from pacopt.model.step import StepTiming, simulate_step
from pacopt.model.tiles import Tiling, tiling
from pacopt.model.timing_cache import TIMING_VERSION, TimingFile, cache_dir  # noqa: F401
from pacopt.model.topology import Block, RampCluster

_PLACEMENT_CACHE_LIMIT = 200_000
_OPTIONS_CACHE_LIMIT = 100_000
#: Options read degree by degree, kept for the next decisions at the same occupancy until they
#: hold this many bytes (:meth:`_MenuOptions.nbytes`).
_BUILDER_CACHE_BYTES = 32 << 20
_TILE_WEIGHTS_CACHE_LIMIT = 4_096  # a tile occupancy's block weights
#: Tile states hold three arrays over a menu's footprints, tens of thousands of them on a tile
#: of 128 servers: their cache is bounded by bytes.
_TILE_STATE_CACHE_BYTES = 128 << 20


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
    ``jct_ms[d]`` and ``comm_overhead_ms[d]``: NaN where not placed. ``work_scale``: the job's
    training steps over the model's (a trace job's own amount of work, :meth:`JctModel.job_table`);
    its times are the graph's times multiplied by it.

    The times are simulated when first read (``timer``: every placed degree's, at once), so an
    episode that never reads them never pays for them: ``sequential`` under first fit reads
    ``placed`` and times only the degree it plays. :meth:`degree_jct_ms` reads one degree's
    (``degree_timer``: that degree's step alone, until the whole table is read). A pickled table
    carries its times, not the model that simulates them.
    """

    graph: JobGraph
    preset: str
    seq_jct_ms: float
    counts: tuple[tuple[int, ...], ...]
    placed: np.ndarray
    workers: np.ndarray
    timer: Callable[[], tuple[np.ndarray, np.ndarray]] | None = field(repr=False, compare=False)
    work_scale: float = 1.0
    degree_timer: Callable[[int], float] | None = field(default=None, repr=False, compare=False)

    @cached_property
    def _times(self) -> tuple[np.ndarray, np.ndarray]:
        jct, comm = self.timer()
        if self.work_scale != 1.0:
            jct, comm = jct * self.work_scale, comm * self.work_scale
        jct.flags.writeable = comm.flags.writeable = False
        return jct, comm

    @property
    def jct_ms(self) -> np.ndarray:
        return self._times[0]

    def degree_jct_ms(self, degree: int) -> float:
        """``jct_ms[degree]`` (a placed degree), its step alone timed while the table's times
        are not read yet: a policy that reads a few degrees times only those."""
        if "_times" in self.__dict__ or self.degree_timer is None or self.work_scale != 1.0:
            return float(self.jct_ms[degree])
        known = self._degree_jcts.get(degree)
        if known is None:
            known = self._degree_jcts[degree] = self.degree_timer(degree)
        return known

    @cached_property
    def _degree_jcts(self) -> dict[int, float]:
        return {}

    @property
    def comm_overhead_ms(self) -> np.ndarray:
        return self._times[1]

    def __getstate__(self) -> dict:
        state = {**self.__dict__, "_times": self._times, "timer": None, "degree_timer": None}
        state.pop("_degree_jcts", None)
        return state

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
    """Per-degree facts of one job on the live cluster now, under one placer; index ``d`` =
    degree (0 = reject).

    ``placeable[d]``: the placer finds room now (False at 0); ``workers[d]``: the footprint of
    that placement (0 where not placeable); ``jct_ms[d]``: its JCT under the preset (``inf`` where
    not placeable); ``masks[d]``: the footprint as a bitmask (0 where not placeable); ``placer``:
    whose placements these are (:mod:`pacopt.model.placers`). Best fit
    and compact also give ``placements[d]`` (the placement itself; first-fit's is built on
    demand, :meth:`JctModel.place`) and ``free_blocks[d]`` (the weighted free blocks left once it
    is placed, :class:`~pacopt.model.placers.FreeBlockScore`; NaN where not placeable).
    Read-only numpy arrays (they are cached and shared).
    """

    placeable: np.ndarray
    workers: np.ndarray
    jct_ms: np.ndarray
    masks: tuple[int, ...] = ()
    placer: str = "first-fit"
    placements: Sequence[Placement | None] | None = None
    free_blocks: np.ndarray | None = None


class TileState(NamedTuple):
    """What :meth:`JctModel._tile_state` keeps of one tile's occupancy for one menu."""

    free: np.ndarray     # per footprint: wholly free in the tile
    broken: np.ndarray   # per free footprint: the free weight it breaks (0 for the others)
    weight: float        # the tile's free weight
    score: np.ndarray    # per footprint: best fit's score (-inf where busy)
    best: np.ndarray     # per degree: the best score (FootprintMenu.best_per_degree)
    best_at: np.ndarray  # per degree: the first footprint holding it (-1: none)

    def nbytes(self) -> int:
        """What its arrays hold (bounds :class:`JctModel`'s cache of tile states)."""
        return sum(a.nbytes for a in (self.free, self.broken, self.score, self.best,
                                      self.best_at))


def _unplaced(size: int) -> tuple:
    """The per-degree arrays of a :class:`LiveOptions` before any degree is placed: placeable,
    workers, JCT, free blocks left, masks and placements."""
    placements: list[Placement | None] = [None] * size
    return (np.zeros(size, dtype=bool), np.zeros(size, dtype=np.int64), np.full(size, np.inf),
            np.full(size, np.nan), [0] * size, placements)


class _TilePlacements(Sequence):
    """The placements of a tiled cluster's options (:class:`_MenuOptions`), a tile's
    footprint copied into its tile when first read: a decision reads the one it plays, and a
    copy of every op's block costs more than the rest of the options. An entry is a placement,
    None, or (footprint in ``menu``, tile); the copies are kept in ``cache``, shared by every
    decision."""

    def __init__(self, entries: list, menu: FootprintMenu, tiles: Tiling, cache: BoundedCache):
        self._entries, self._menu, self._tiles, self._cache = entries, menu, tiles, cache

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, degree: int) -> Placement | None:
        entry = self._entries[degree]
        if isinstance(entry, tuple):
            k, t = entry
            key = (id(self._menu), k, t)  # a model's menus live as long as it does
            entry = self._cache.get(key)
            if entry is None:
                entry = self._cache.put(key, self._tiles.placement(self._menu.placements[k], t))
            self._entries[degree] = entry
        return entry

    def __reduce__(self):
        return tuple, (tuple(self),)  # pickled as the placements themselves


class _MenuOptions:
    """Best fit's or compact's live options of one graph at one occupancy, filled in degree by
    degree (:meth:`fill`) or all at once (:meth:`finish`): the footprints free now scored with
    one product (on a tiled cluster each tile from its own occupancy, :mod:`pacopt.model.tiles`),
    then per degree the one :func:`~pacopt.model.placers.pick` takes. A degree's entries do not
    depend on the others', so a degree filled alone has the same entries as in the whole
    table, and only its footprints are timed.

    On a tiled cluster the tile's footprints are in every tile, the best over all tiles per
    degree (ties to the first tile, then the first footprint); a degree with no free footprint
    in any tile goes to first fit. The score compared is the weighted free blocks a footprint
    breaks (the cluster's free weight less it is what is left), so tiles compare on one scale.
    Off tiles, the degrees with too many footprints to enumerate go to first fit."""

    def __init__(self, model: JctModel, table: JobTable, occupied: int, placer: str,
                 deadline_ms: float | None):
        self.model, self.table, self.occupied = model, table, occupied
        self.placer, self.deadline_ms = placer, deadline_ms
        self.ddls = model.settings.preset == "ddls"
        self.menu = menu = model.menu(table)
        self.tiles = tiles = tiling(model.cluster)
        size = len(table.placed)
        (self.placeable, self.workers, self.jct_ms, self.free_blocks, self.masks,
         self.entries) = _unplaced(size)  # entries: placements, or on tiles (footprint, tile)
        self.filled = np.zeros(size, dtype=bool)
        self.finished: LiveOptions | None = None
        self.finishing = False  # finish() fills every degree
        self.chosen: dict[int, int] = {}  # degree -> the menu footprint taken (off tiles)
        if tiles is None:
            self.placements = self.entries
            self.scorer = free_block_score(model.cluster)
            self.free = menu.free(occupied)
            rows = np.flatnonzero(self.free)
            self.score = np.full(len(self.free), -np.inf)  # -inf: busy
            if len(rows):
                self.score[rows] = self.scorer.score(menu.hits[rows], menu.workers[rows],
                                                     occupied)
            self.first_fit = set(menu.first_fit)
        else:
            self.placements = _TilePlacements(self.entries, menu, tiles, model._tile_placements)
            self.locals = tiles.local_masks(occupied)
            self.states = [model._tile_state(menu, local) for local in self.locals]
            self.best = np.stack([state.best for state in self.states])  # (tiles, degrees)
            self.best_tile = self.best.argmax(axis=0)                    # ties: the first tile
            self.total = sum(state.weight for state in self.states)  # the cluster's free weight
            self.lost = np.zeros(size)  # per degree, the free weight its placement breaks
            self.stacked = None  # while finishing: every tile's free footprints and scores

    def nbytes(self) -> int:
        """What it holds until finished (bounds :class:`JctModel`'s cache of them): the
        footprints' scores off tiles, the tiles' best scores on them, and a little more."""
        held = (self.score, self.free) if self.tiles is None else (self.best,)
        return sum(a.nbytes for a in held) + 4096

    def fill(self, degree: int) -> None:
        """Fill in ``degree``'s entries (once)."""
        if self.filled[degree]:
            return
        self.filled[degree] = True
        if self.tiles is None:
            self._fill_flat(degree)
        elif self.table.placed[degree]:
            self._fill_tiled(degree)

    def finish(self) -> LiveOptions:
        """Every degree's entries, as read-only :class:`LiveOptions` (once)."""
        if self.finished is not None:
            return self.finished
        self.finishing = True
        for d in range(1, len(self.filled)):
            self.fill(d)
        if self.tiles is None:
            if self.chosen:
                degrees = sorted(self.chosen)
                self.free_blocks[degrees] = self.scorer.left(
                    None, self.occupied, self.menu.hits[[self.chosen[d] for d in degrees]])
        else:
            placeable = self.placeable
            self.free_blocks[placeable] = np.round(self.total - self.lost[placeable], 9)
        for array in (self.placeable, self.workers, self.jct_ms, self.free_blocks):
            array.flags.writeable = False
        self.score = self.free = self.states = self.stacked = None  # large, and read no more
        self.finished = LiveOptions(self.placeable, self.workers, self.jct_ms, tuple(self.masks),
                                    self.placer, self.placements if self.tiles is not None
                                    else tuple(self.placements), self.free_blocks)
        return self.finished

    def _fill_flat(self, d: int) -> None:
        menu, model, table = self.menu, self.model, self.table
        span = menu.spans.get(d)
        if span is not None:
            here = self.score[span]
            if not len(here):
                return
            i = int(here.argmax())  # best fit under ddls: the first best score
            if here[i] == -np.inf:
                return
            if not self.ddls:
                counts = table.counts[d]
                timed = menu.jct(d, lambda found: [
                    timing.jct_ms for timing in model.timings(table.graph,
                                                              [(counts, p) for p in found])])
                # best fit's best free footprint stands when it is in time
                if self.placer != "best-fit" or (self.deadline_ms is not None
                                                 and timed[i] > self.deadline_ms):
                    i = pick(self.placer, self.free[span], here, timed, self.deadline_ms)
            k = span.start + i
            self.placeable[d] = True
            self.workers[d] = menu.workers[k]
            self.jct_ms[d] = table.degree_jct_ms(d) if self.ddls else menu.jct_ms[k]
            self.masks[d] = int(menu.masks[k])
            self.entries[d] = menu.placements[k]
            self.chosen[d] = k
        elif d in self.first_fit:  # too many footprints to choose from: first fit's
            placement = self._first_fit(d)
            if placement is not None:
                self.free_blocks[d] = self.scorer.left([placement.mask], self.occupied)[0]

    def _fill_tiled(self, d: int) -> None:
        menu, model, table, tiles = self.menu, self.model, self.table, self.tiles
        j = menu.degree_index.get(d)
        t = -1 if j is None else int(self.best_tile[j])
        if t < 0 or self.best[t, j] == -np.inf:  # no footprint free inside a tile: first fit's
            placement = self._first_fit(d)
            if placement is not None:
                self.lost[d] = model._tile_loss(placement.mask, self.locals)
            return
        states = self.states
        k = int(states[t].best_at[j])  # the tile's first footprint with the best score
        if not self.ddls:  # a translate times as its tile's original (a symmetry)
            span, counts = menu.spans[d], table.counts[d]
            timed = menu.jct(d, lambda found: model._tile_jcts(table.graph, counts, found))
            if self.placer != "best-fit" or (self.deadline_ms is not None
                                             and timed[k - span.start] > self.deadline_ms):
                if self.finishing:  # every degree's rows, stacked once
                    if self.stacked is None:
                        self.stacked = (np.stack([state.free for state in states]),
                                        np.stack([state.score for state in states]))
                    free, score = self.stacked[0][:, span], self.stacked[1][:, span]
                else:  # one degree read alone: its rows only (a row per tile)
                    free = np.stack([state.free[span] for state in states])
                    score = np.stack([state.score[span] for state in states])
                t, row = divmod(pick(self.placer, free, score, timed, self.deadline_ms),
                                span.stop - span.start)
                k = span.start + row
            self.jct_ms[d] = timed[k - span.start]
        else:
            self.jct_ms[d] = table.degree_jct_ms(d)
        self.entries[d] = (k, t)  # built when read (_TilePlacements)
        self.workers[d] = menu.workers[k]
        self.masks[d] = tiles.cluster_mask(int(menu.masks[k]), t)
        self.lost[d] = states[t].broken[k]
        self.placeable[d] = True

    def _first_fit(self, d: int) -> Placement | None:
        """Fill in ``d`` as first fit places it (None: no room)."""
        found = self.model._first_fit(self.table, d, self.occupied)
        if found is None:
            return None
        placement, fitted = found
        self.placeable[d] = True
        self.workers[d] = placement.num_workers
        self.masks[d] = placement.mask
        self.entries[d] = placement
        self.model._fit_jcts(self.table, {d: fitted}, self.jct_ms)
        return placement


class JctModel:
    """Partitions, places and times jobs for one (cluster, model settings) pair."""

    def __init__(self, cluster: RampCluster, settings: ModelSettings, persist: bool = True):
        self.cluster = cluster
        self.settings = settings
        self.persist = persist
        self._counts: dict[tuple, tuple[int, ...]] = {}
        self._plans: dict[tuple, FitPlan] = {}
        self._placements = BoundedCache(_PLACEMENT_CACHE_LIMIT)  # -> Placement | None
        self._options = BoundedCache(_OPTIONS_CACHE_LIMIT)  # -> LiveOptions
        self._builders = BoundedCache(_BUILDER_CACHE_BYTES, _MenuOptions.nbytes)  # partly filled
        self._table_plans: dict[str, tuple] = {}
        self._live_jct = BoundedCache(_PLACEMENT_CACHE_LIMIT)  # -> JCT of a placed choice
        self._timings: dict[tuple, dict[str, StepTiming]] = {}  # per graph file -> key -> timing
        self._files: dict[str, TimingFile] = {}  # per graph fingerprint
        self._tables: dict[str, JobTable] = {}
        self._menus: dict[str, FootprintMenu] = {}
        self._tile_states = BoundedCache(_TILE_STATE_CACHE_BYTES, TileState.nbytes)
        self._tile_weights = BoundedCache(_TILE_WEIGHTS_CACHE_LIMIT)  # tile occupancy -> weights
        self._tile_parts = BoundedCache(_PLACEMENT_CACHE_LIMIT)  # footprint -> (tile, part)s
        self._tile_broken = BoundedCache(_PLACEMENT_CACHE_LIMIT)  # (part, occupancy) -> weight
        self._tile_placements = BoundedCache(_PLACEMENT_CACHE_LIMIT)  # -> Placement
        self._chosen_placements = BoundedCache(_PLACEMENT_CACHE_LIMIT)  # -> Placement

    # ----- partitioning and placement -------------------------------------------------------------
    def counts(self, graph: JobGraph, degree: int) -> tuple[int, ...]:
        """Per-op split counts at ``degree`` (PAC-ML's quantum rule; cached)."""
        key = (graph.fingerprint, degree)
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = op_counts(graph, degree, self.settings.quantum_ms)
        return counts

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
            plan = self.plan(graph, counts)
            choice = plan.fit(occupied)
            self._placements.put(key, None if choice is None else plan.placement(choice))
        return self._placements[key]

    def live_options(self, table: JobTable, occupied: int, placer: str = "first-fit",
                     deadline_ms: float | None = None) -> LiveOptions:
        """Per-degree placeability, footprint and JCT of ``table``'s graph placed by ``placer``
        avoiding ``occupied`` (cached by occupancy). ``ddls`` reads the JCT from the table (one
        JCT per degree, module doc); ``physical`` times each actual placement (cached by it).
        ``deadline_ms`` is the job's: under ``physical``, best fit prefers the footprints that
        meet it (:func:`~pacopt.model.placers.pick`). A job table with a work scale
        (:meth:`job_table`) gets the graph's options with its JCTs multiplied by the scale."""
        if table.work_scale != 1.0:
            scale = table.work_scale
            base = self.live_options(self.table(table.graph), occupied, placer,
                                     None if deadline_ms is None else deadline_ms / scale)
            jct = base.jct_ms * scale
            jct.flags.writeable = False
            return replace(base, jct_ms=jct)
        if placer != "first-fit":
            key = self._menu_key(table, occupied, placer, deadline_ms)
            options = self._options.get(key)
            if options is None:
                options = self._options.put(key, self._menu_builder(
                    key, table, occupied, placer, deadline_ms).finish())
            return options
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
        masks = [0] * size
        fitted: dict[int, tuple[FitPlan, tuple[Block, ...]]] = {}
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
            masks[d] = plan.footprint(choice)
            workers[d] = masks[d].bit_count()
            fitted[d] = (plan, choice)
        self._fit_jcts(table, fitted, jct)
        for array in (placeable, workers, jct):
            array.flags.writeable = False
        return self._options.put(key, LiveOptions(placeable, workers, jct, tuple(masks)))

    def first_fit_jct(self, table: JobTable, degree: int, occupied: int) -> float:
        """``live_options(table, occupied).jct_ms[degree]`` under first fit (``inf``: no room
        now), found for that degree alone: its first-fit choice, and its step timed only if not
        known. A policy that reads a few degrees (``min-feasible`` stops at the first in time)
        times a few, not every degree of the table."""
        if table.work_scale != 1.0:  # as live_options: the graph's time, then scaled
            return self.first_fit_jct(self.table(table.graph), degree, occupied) * table.work_scale
        if not table.placed[degree]:
            return float("inf")
        plan = self.plan(table.graph, table.counts[degree])
        choice = plan.fit(occupied)
        if choice is None:
            return float("inf")
        if self.settings.preset == "ddls":
            return table.degree_jct_ms(degree)
        return float(self._placed_jcts([(plan, choice)])[0])

    def menu(self, table: JobTable) -> FootprintMenu:
        """The candidate footprints of ``table``'s graph at every degree placeable on an empty
        cluster (cached per graph): what best fit and compact choose from."""
        key = table.graph.fingerprint
        if key not in self._menus:
            counts = {d: table.counts[d] for d in range(1, len(table.placed)) if table.placed[d]}
            tiles = tiling(self.cluster)  # a large cluster: the footprints inside one tile
            on = self.cluster if tiles is None else tiles.tile
            self._menus[key] = FootprintMenu.build(table.graph, counts, on, free_block_score(on))
        return self._menus[key]

    def menu_degree(self, table: JobTable, occupied: int, placer: str,
                    deadline_ms: float | None, degree: int
                    ) -> tuple[bool, float, Placement | None]:
        """``degree``'s entries of :meth:`live_options` under best fit or compact (placeable,
        JCT, placement), found for that degree alone until every degree's are read: only its
        footprints are timed. A policy that reads a few degrees (``min-feasible`` stops at the
        first in time) times a few."""
        if table.work_scale != 1.0:  # as live_options: the graph's time, then scaled
            placeable, jct, placement = self.menu_degree(
                self.table(table.graph), occupied, placer,
                None if deadline_ms is None else deadline_ms / table.work_scale, degree)
            return placeable, jct * table.work_scale, placement
        key = self._menu_key(table, occupied, placer, deadline_ms)
        options = self._options.get(key)
        if options is None:
            options = self._menu_builder(key, table, occupied, placer, deadline_ms)
            options.fill(degree)
        placeable = bool(options.placeable[degree])
        return (placeable, float(options.jct_ms[degree]),
                options.placements[degree] if placeable else None)

    def _menu_key(self, table: JobTable, occupied: int, placer: str,
                  deadline_ms: float | None) -> tuple:
        """What best fit's and compact's options depend on: under ``physical`` best fit the
        deadline too (it prefers the footprints that meet it)."""
        ddls = self.settings.preset == "ddls"
        return (placer, table.graph.fingerprint, occupied,
                None if ddls or placer == "compact" else deadline_ms)

    def _menu_builder(self, key: tuple, table: JobTable, occupied: int, placer: str,
                      deadline_ms: float | None) -> _MenuOptions:
        """The (partly filled) options under ``key`` (cached: decisions at one occupancy share
        the degrees already read)."""
        builder = self._builders.get(key)
        if builder is None:
            builder = self._builders.put(key, _MenuOptions(self, table, occupied, placer,
                                                           deadline_ms))
        return builder

    def _first_fit(self, table: JobTable, degree: int, occupied: int
                   ) -> tuple[Placement, tuple[FitPlan, tuple[Block, ...]]] | None:
        """First fit's placement for ``degree`` (as :meth:`place`) and its (plan, choice), whose
        JCT :meth:`_fit_jcts` finds: the fallback of best fit and compact; the degrees of a
        decision share their look-ups through :meth:`RampCluster.free_block`'s cache."""
        plan = self.plan(table.graph, table.counts[degree])
        choice = plan.fit(occupied)
        if choice is None:
            return None
        return self._chosen(table.graph, plan, choice), (plan, choice)

    def _fit_jcts(self, table: JobTable, fitted: dict[int, tuple[FitPlan, tuple[Block, ...]]],
                  jct: np.ndarray) -> None:
        """Write into ``jct`` the JCTs of first fit's choices (degree -> (plan, choice)): the
        table's under ``ddls``, else each placement's (:meth:`_placed_jcts`)."""
        if self.settings.preset == "ddls":
            for d in fitted:
                jct[d] = table.degree_jct_ms(d)
        elif fitted:
            jct[list(fitted)] = self._placed_jcts(list(fitted.values()))

    def _chosen(self, graph: JobGraph, plan: FitPlan, choice: tuple[Block, ...]) -> Placement:
        """``plan``'s placement of ``choice`` (cached: the same few blocks come back decision
        after decision, and a placement of every op is costly to build and to mask)."""
        key = (graph.fingerprint, plan.counts, choice)
        placement = self._chosen_placements.get(key)
        if placement is None:
            placement = self._chosen_placements.put(key, plan.placement(choice))
        return placement

    def _tile_jcts(self, graph: JobGraph, counts: tuple[int, ...],
                   footprints: list[Placement]) -> list[float]:
        """The JCTs of a tile's footprints, each timed as its copy in the first tile, the steps
        not known yet simulated together (:meth:`timings`). A footprint puts every op of one
        split count on one block, so under a memory-free plan it is a first-fit choice (a
        block per size), and shares :meth:`_placed_jcts`' keys and timings with every choice of
        its symmetry class instead of keying all its ops afresh."""
        tiles, plan = tiling(self.cluster), self.plan(graph, counts)
        if not plan.memory_free:
            return [timing.jct_ms for timing in self.timings(
                graph, [(counts, tiles.placement(footprint, 0)) for footprint in footprints])]
        choices = []
        for footprint in footprints:
            by_size = dict(zip(counts, footprint.blocks))
            choices.append((plan, tuple(tiles.block(by_size[m], 0) for m in plan.sizes)))
        return self._placed_jcts(choices)

    def _tile_state(self, menu: FootprintMenu, local: int) -> TileState:
        """For a tile whose own occupancy is ``local``: which of ``menu``'s footprints are free,
        the free weight each free one breaks, the tile's free weight, each footprint's score
        (-inf where busy) and each degree's best score and first footprint holding it
        (:meth:`FootprintMenu.best_per_degree`); cached, shared by the graphs whose menus
        hold the same footprints."""
        key = (menu.footprint_key, local)
        state = self._tile_states.get(key)
        if state is None:
            weights = self._free_weights(local)
            free = menu.free(local)
            broken = menu.broken(weights, np.flatnonzero(free))
            score = np.where(free, np.round(-broken - WORKER_PENALTY * menu.workers, 9), -np.inf)
            state = TileState(free, broken, float(weights.sum()), score,
                              *menu.best_per_degree(score))
            self._tile_states.put(key, state)
        return state

    def _tile_loss(self, mask: int, locals_: list[int]) -> float:
        """The free weight a footprint that may straddle tiles breaks, tile by tile (``locals_``:
        each tile's own occupancy). Cached by footprint and by (its part in a tile, the tile's
        occupancy): first fit's fallbacks come back decision after decision, on tiles that
        mostly did not change."""
        parts = self._tile_parts.get(mask)
        if parts is None:
            parts = self._tile_parts.put(mask, tuple(
                (t, part) for t, part in enumerate(tiling(self.cluster).local_masks(mask)) if part))
        lost = 0.0
        for t, part in parts:
            key = (part, locals_[t])
            broken = self._tile_broken.get(key)
            if broken is None:
                scorer = free_block_score(tiling(self.cluster).tile)
                broken = self._tile_broken.put(key, scorer.broken_by(
                    part, self._free_weights(locals_[t])))
            lost += broken
        return lost

    def _free_weights(self, local: int) -> np.ndarray:
        """The tile's :meth:`~pacopt.model.placers.FreeBlockScore.free_weights` under its own
        occupancy ``local`` (cached: a decision changes one or two tiles)."""
        weights = self._tile_weights.get(local)
        if weights is None:
            weights = free_block_score(tiling(self.cluster).tile).free_weights(local)
            weights.flags.writeable = False
            self._tile_weights.put(local, weights)
        return weights

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

    def _placed_jcts(self, choices: list[tuple[FitPlan, tuple[Block, ...]]]) -> list[float]:
        """The JCT of each (plan, choice of blocks) of one graph, cached by the choice's
        symmetry class; the steps not known yet are simulated together (:meth:`timings`)."""
        out: list[float] = []
        pending = []  # (position, symmetry key, plan, choice) of the JCTs to time
        for plan, choice in choices:
            key = (plan.graph.fingerprint, plan.counts, plan.symmetry_key(choice))
            jct = self._live_jct.get(key)
            if jct is None:
                pending.append((len(out), key, plan, choice))
            out.append(jct)
        if pending:
            timings = self.timings(pending[0][2].graph, [(plan.counts, plan.placement(choice))
                                                         for *_, plan, choice in pending])
            for (i, key, _, _), timing in zip(pending, timings):
                out[i] = self._live_jct.put(key, timing.jct_ms)
        return out

    # ----- timing ----------------------------------------------------------------------------
    def timing(self, graph: JobGraph, counts: tuple[int, ...], placement: Placement,
               scale: float = 1.0) -> Timing:
        """JCT and exposed communication of a placed job, under the preset's rule (module doc).
        ``scale``: the job's work scale (:attr:`JobTable.work_scale`); both times are the
        model's ``training_steps`` times a step, multiplied by it."""
        timing = self.timings(graph, [(counts, placement)])[0]
        if scale != 1.0:
            timing = Timing(jct_ms=timing.jct_ms * scale,
                            comm_overhead_ms=timing.comm_overhead_ms * scale)
        return timing

    def timings(self, graph: JobGraph, work: list[tuple[tuple[int, ...], Placement]],
                progress: bool = False) -> list[Timing]:
        """:meth:`timing` of each (counts, placement) of ``graph``: the steps not known yet are
        simulated in ``work``'s order, one after the other (in threads they took as long: most
        of a simulation holds the GIL), and appended to the cache file together. ``progress``:
        a bar over the simulations."""
        if self.settings.preset == "ddls":
            work = [(counts, self.place(graph, counts, 0) or placement)
                    for counts, placement in work]
        store = self._store(graph)
        keys = [placement.canonical_key(self.cluster) for _, placement in work]
        missing = {key: item for key, item in zip(keys, work) if key not in store}
        if missing:
            simulated = {}
            bar = tqdm(total=len(missing), desc=f"times {graph.name}", unit="step", leave=False,
                       disable=None if progress and len(missing) > 1 else True)
            try:  # a stop (Ctrl-C) between two simulations keeps those done
                with bar:
                    for key, (counts, placement) in missing.items():
                        simulated[key] = simulate_step(partition(graph, counts), placement,
                                                       self.cluster, self.settings)
                        bar.update()
            finally:
                self._keep(graph, simulated)
        return [self._timing(store[key]) for key in keys]

    def _timing(self, step: StepTiming) -> Timing:
        steps = self.settings.training_steps
        return Timing(jct_ms=steps * step.step_ms, comm_overhead_ms=steps * step.exposed_comm_ms)

    def _keep(self, graph: JobGraph, steps: dict[str, StepTiming]) -> None:
        """Store simulated steps (and append them to the graph's cache file)."""
        self._store(graph).update(steps)
        if steps and self.persist and not self._file(graph).append(
                [(key, step.step_ms, step.exposed_comm_ms) for key, step in steps.items()]):
            self.persist = False  # a read-only home must not stop the work; keep it in memory

    def step_timings(self) -> dict[str, dict[str, StepTiming]]:
        """The step timings known so far (simulated, or read from the disk), by graph
        fingerprint and placement key: what :meth:`add_step_timings` takes."""
        return {ident: dict(store) for ident, store in self._timings.items()}

    def add_step_timings(self, timings: dict[str, dict[str, StepTiming]]) -> None:
        """Take ``timings`` (:meth:`step_timings` of a model of this cluster and these settings)
        as known. Only for a model that keeps its timings in memory: a persisting one reads its
        graphs' files on first use, which this would skip."""
        if self.persist:
            raise ValueError("only a model without the on-disk cache takes others' timings")
        for ident, store in timings.items():
            self._timings.setdefault(ident, {}).update(store)

    def _file(self, graph: JobGraph) -> TimingFile:
        """The checked on-disk timings of ``graph`` under this cluster and these settings
        (:mod:`pacopt.model.timing_cache`: provenance and checksum on every line)."""
        file = self._files.get(graph.fingerprint)
        if file is None:
            settings = {k: v for k, v in self.settings.to_dict().items() if k != "placement"}
            file = self._files[graph.fingerprint] = TimingFile(
                f"{graph.name}-{self.settings.preset}",
                {"graph": graph.fingerprint, "cluster": self.cluster.to_dict(), "model": settings})
        return file

    def _store(self, graph: JobGraph) -> dict[str, StepTiming]:
        ident = graph.fingerprint
        if ident not in self._timings:
            store: dict[str, StepTiming] = {}
            if self.persist:
                loaded = self._file(graph).load()  # only lines that check; bad ones warned of
                if loaded is None:  # not a usable file: keep the timings in memory
                    self.persist = False
                else:
                    store = {key: StepTiming(*value) for key, value in loaded.items()}
            self._timings[ident] = store
        return self._timings[ident]

    # ----- the per-job table ---------------------------------------------------------------------
    def table(self, graph: JobGraph, progress: bool = False) -> JobTable:
        """The per-degree table of ``graph`` on an empty cluster (cached; ``progress`` shows a
        bar over the degrees, worth it for graphs with hundreds of ops)."""
        if graph.fingerprint in self._tables:
            return self._tables[graph.fingerprint]
        size = self.settings.max_partitions_per_op + 1
        placed = np.zeros(size, dtype=bool)
        workers = np.zeros(size, dtype=np.int64)
        counts: list[tuple[int, ...]] = [()]
        placements: dict[int, Placement] = {}
        for d in tqdm(range(1, size), desc=f"table {graph.name}", unit="degree", leave=False,
                      disable=None if progress else True):
            c = self.counts(graph, d)
            counts.append(c)
            placement = self.place(graph, c, 0)
            if placement is not None:
                placements[d] = placement
                placed[d], workers[d] = True, placement.num_workers
        for array in (placed, workers):
            array.flags.writeable = False

        owner, cluster, settings, persist = weakref.ref(self), self.cluster, self.settings, \
            self.persist

        def timed() -> JctModel:
            # a weak reference: a model holding its tables is freed when dropped, not by the
            # collector; a table outliving its model is timed by a fresh one, to the same bits
            model = owner()
            return JctModel(cluster, settings, persist) if model is None else model

        def timer() -> tuple[np.ndarray, np.ndarray]:
            jct, comm = np.full(size, np.nan), np.full(size, np.nan)
            degrees = list(placements)
            timings = timed().timings(graph, [(counts[d], placements[d]) for d in degrees],
                                      progress)
            for d, timing in zip(degrees, timings):
                jct[d], comm[d] = timing.jct_ms, timing.comm_overhead_ms
            return jct, comm

        def degree_timer(d: int) -> float:
            return timed().timings(graph, [(counts[d], placements[d])])[0].jct_ms

        table = JobTable(graph=graph, preset=self.settings.preset,
                         seq_jct_ms=graph.seq_jct_ms(self.settings.training_steps),
                         counts=tuple(counts), placed=placed, workers=workers, timer=timer,
                         degree_timer=degree_timer)
        self._tables[graph.fingerprint] = table
        return table

    def job_table(self, graph: JobGraph, scale: float = 1.0) -> JobTable:
        """The table of one job of ``graph`` whose work is ``scale`` times the model's training
        steps: :meth:`table` with every time (sequential JCT, JCTs, communication) multiplied by
        ``scale``, exactly as :meth:`timing` multiplies them, so that a policy reading the table
        and the simulator timing the placement agree to the last bit. Not cached (three
        multiplications); ``scale`` 1 is :meth:`table` itself."""
        table = self.table(graph)
        if scale == 1.0:
            return table
        return replace(table, seq_jct_ms=table.seq_jct_ms * scale, work_scale=scale,
                       timer=lambda: (table.jct_ms, table.comm_overhead_ms))
