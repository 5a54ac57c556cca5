"""Placers: where an arriving job goes on the live cluster, a choice of the online simulator.

A degree fixes each op's split count; the placer chooses the servers. Three placers:

- ``first-fit`` (:mod:`pacopt.model.first_fit`): the reference's rule, every op on the first
  free block of its count in the cluster's search order. The default, so that every number
  compared with the paper stays as it is.
- ``best-fit``: the job's footprint is one of the *inclusion-minimal* unions of one block per
  distinct count (:func:`footprints`, the candidate set of the exact models), and of those free
  now it takes the one that leaves the most free blocks, large sizes weighted most
  (:data:`WEIGHTS`, :class:`FreeBlockScore`). RAMP's blocks nest like a buddy allocator's (on
  4x4x2 a 4x4x1 half holds two 4x2x1 blocks of 8, each two 2x2x1 blocks of 4, ...); first-fit
  breaks the large ones up early, best fit keeps them for the strict jobs that need them. When
  the JCT depends on the placement (``physical``), the footprints whose JCT meets the job's
  deadline come first: the best-fitting of those, else the best-fitting free one. This is the
  rule of the offline :class:`~pacopt.solvers.best_fit.BestFit`, whose options are exactly
  the footprints that meet the deadline, and both use the one scorer here.
- ``compact`` (``physical`` only): the free footprint with the smallest JCT on its actual
  placement, ties to best fit. Under ``ddls`` every placement of a degree has the same JCT, so it
  would be best fit again: it is refused there.

A placer fits a preset or not (:data:`PLACER_PRESETS`); :func:`check_placer` says so in one line.
A policy may also place a job itself (:class:`~pacopt.model.decision.Placed`):
:func:`check_explicit` is the simulator's check that such a placement is valid and free now.

What each placer does to blocking: ``docs/placement.md``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from pacopt.infra.bounded_cache import BoundedCache
from pacopt.infra.errors import InputError, warn
from pacopt.infra.interrupt import OutOfTime, out_of_time
from pacopt.model.first_fit import Placement
from pacopt.model.graph import JobGraph
from pacopt.model.topology import Block, RampCluster, mask_words, servers_of

#: The placers by name, with the one-line summary ``solve --help`` shows.
PLACERS = {
    "first-fit": "every op on the first free block of its count (the reference's rule)",
    "best-fit": "the free minimal footprint that keeps the most large RAMP blocks free (deadline "
                "met first when the JCT depends on the placement)",
    "compact": "the free minimal footprint with the smallest JCT on its placement, ties to "
               "best fit (physical preset only)",
}
#: The presets each placer fits (``compact`` needs a JCT that depends on the placement).
PLACER_PRESETS = {"first-fit": ("ddls", "physical"), "best-fit": ("ddls", "physical"),
                  "compact": ("physical",)}
DEFAULT_PLACER = "first-fit"

#: Weight of each block size's share of free blocks in a footprint's score: the large sizes,
#: which the strict jobs need, first.
WEIGHTS = {16: 8.0, 9: 4.0, 8: 4.0, 6: 2.0, 4: 1.0, 3: 0.5, 2: 0.25}
#: Mask words compared at once by :func:`_minimal` (about 32 MB).
_MINIMAL_CHUNK = 2**22
#: Score taken off per worker of a footprint: between two footprints that leave the same free
#: blocks, the smaller one.
WORKER_PENALTY = 1e-6


def check_placer(name: str, preset: str, where: str = "model.placement") -> str:
    """``name`` if it is a placer that fits ``preset``; else :class:`InputError` naming
    ``where`` (one line: the known placers, or the presets it fits)."""
    if name not in PLACERS:
        raise InputError(f"{where}: unknown placer '{name}'; known: {', '.join(PLACERS)}")
    if preset not in PLACER_PRESETS[name]:
        raise InputError(f"{where}: placer '{name}' does not fit the '{preset}' preset (it fits "
                         f"{', '.join(PLACER_PRESETS[name])}: under ddls every placement of a "
                         "degree has the same JCT)")
    return name


class InvalidPlacement(ValueError):
    """A policy's explicit placement is not a valid RAMP placement free now (a bug in the
    policy, reported as such, never replaced by another placement)."""


# ----- the candidate footprints ---------------------------------------------------------------
class TooManyFootprints(OutOfTime):
    """A count set whose enumeration passes :data:`FOOTPRINT_LIMIT` unions (a large cluster
    without tiles): the placers place its degree first-fit, ``lp-online``'s futures leave it
    out, and the exact methods stop building as at their deadline."""


#: Most unions one count set's footprint enumeration may hold at any stage. Past it the
#: enumeration stops (:class:`TooManyFootprints`): on clusters without tiles the unions of
#: counts that do not nest (GNMT's 9, 8, 6 and 1) grow past hundreds of thousands at 400
#: servers, and comparing them took minutes and gigabytes. Every tile's sets stay below it.
FOOTPRINT_LIMIT = 1 << 16


def footprints(counts: tuple[int, ...], cluster: RampCluster,
               deadline: float | None = None) -> tuple[dict[int, Block], ...]:
    """Inclusion-minimal choices of one block per distinct split count (largest first).

    Returns, per footprint, the block chosen for each count (read only: the result is cached
    by the distinct counts and the cluster, which many graphs and degrees share). A block that
    fits inside what is already chosen adds nothing, and any other choice would only give a
    superset, so it is the only branch taken; supersets of another partial union are pruned at
    every stage. Raises :class:`OutOfTime` once ``deadline`` (a ``time.perf_counter()`` value)
    passes or a stop is requested, and :class:`TooManyFootprints` (remembered) once a stage
    holds more than :data:`FOOTPRINT_LIMIT` unions: on a large cluster the unions grow far
    faster than the cluster.
    """
    sizes = tuple(sorted(set(counts), reverse=True))
    key = (sizes, cluster)
    known = _TOO_MANY.get(key)
    if known is not None:
        raise TooManyFootprints(known)
    try:
        return _cached(_FOOTPRINTS, key, lambda: _enumerated(sizes, cluster, deadline))
    except TooManyFootprints as err:
        _TOO_MANY.put(key, str(err))
        raise


#: :func:`footprints` by (distinct counts, cluster) and :func:`footprint_placements` by (graph,
#: counts, cluster): graphs and degrees share them, and best fit, ``lp-online`` and the exact
#: models ask for the same ones (GNMT's on a tile of 128 servers: tens of thousands). Each is
#: cleared when it holds :data:`_CACHE_ITEMS` footprints; a result holds at most
#: :data:`FOOTPRINT_LIMIT`.
_CACHE_ITEMS = 1 << 17


def _entry_cost(found: tuple) -> int:
    return len(found) + 1  # an empty result is an entry too


_FOOTPRINTS = BoundedCache(_CACHE_ITEMS, _entry_cost)  # -> tuple[dict[int, Block], ...]
_FOOTPRINT_PLACEMENTS = BoundedCache(_CACHE_ITEMS, _entry_cost)  # -> tuple[Placement, ...]
_TOO_MANY = BoundedCache(1024)  # (distinct counts, cluster) -> why they were not enumerated


def _cached(store: BoundedCache, key, make):
    """``store[key]``, made by ``make()`` when missing (an exception keeps nothing)."""
    found = store.get(key)
    if found is None:
        found = store.put(key, make())
    return found


def _enumerated(sizes: tuple[int, ...], cluster: RampCluster,
                deadline: float | None) -> tuple[dict[int, Block], ...]:
    """:func:`footprints` of the distinct counts ``sizes`` (largest first), not cached."""
    partial: list[tuple[dict[int, Block], int]] = [({}, 0)]
    for m in sizes:
        grown: dict[int, tuple[dict[int, Block], int]] = {}
        for n, (chosen, mask) in enumerate(partial):
            if n % 64 == 0 and out_of_time(deadline):
                raise OutOfTime(f"footprint enumeration at {len(grown)} unions")
            if len(grown) > FOOTPRINT_LIMIT:
                raise TooManyFootprints(
                    f"enumerating footprints: split counts {', '.join(map(str, sizes))} have "
                    f"more than {FOOTPRINT_LIMIT:,} unions on a cluster of "
                    f"{cluster.num_servers} servers")
            blocks = cluster.blocks(m)
            inside = next((b for b in blocks if b.mask & ~mask == 0), None)
            for block in [inside] if inside else blocks:
                union = mask | block.mask
                grown.setdefault(union, ({**chosen, m: block}, union))
        partial = _minimal(list(grown.values()), deadline)
    return tuple(chosen for chosen, _ in partial) if partial != [({}, 0)] else ()


def _minimal(items: list[tuple[dict, int]],
             deadline: float | None = None) -> list[tuple[dict, int]]:
    """Drop every entry whose mask strictly contains another entry's mask (:class:`OutOfTime`
    past ``deadline``: quadratic in the entries); the rest in order of size. The masks are
    distinct, so a mask is dropped when any other lies inside it (the one inside need not be
    kept: what lies inside it lies inside the larger one too). A mask can only lie inside
    masks that hold all its bits, so each is compared only with the masks holding its
    rarest bit, vectorised per bit and word by word for masks wider than 64 bits."""
    items.sort(key=lambda item: item[1].bit_count())
    if not items or items[0][1] == 0:  # an empty mask lies inside every other
        return items[:1]
    width = -(-max(max(mask.bit_length() for _, mask in items), 1) // 64)
    masks = mask_words([mask for _, mask in items], width)
    bits = np.unpackbits(masks.view(np.uint8), axis=1, bitorder="little").astype(bool)
    order = np.argsort(bits.sum(axis=0), kind="stable")  # the bits, rarest first
    pivot = order[bits[:, order].argmax(axis=1)]  # each mask's rarest bit (ties: the lowest)
    drop = np.zeros(len(items), dtype=bool)
    for bit in np.unique(pivot):
        inner = np.flatnonzero(pivot == bit)  # the masks that may lie inside ...
        outer = np.flatnonzero(bits[:, bit])  # ... those holding their rarest bit
        candidates = masks[inner]
        step = max(1, _MINIMAL_CHUNK // (len(inner) * width))  # bounded memory
        for first in range(0, len(outer), step):
            if out_of_time(deadline):
                raise OutOfTime(f"minimal unions at bit {bit} of {bits.shape[1]}")
            group = outer[first:first + step]
            around = masks[group]
            outside = candidates[None, :, 0] & ~around[:, None, 0]  # their bits not in it
            for w in range(1, width):
                outside |= candidates[None, :, w] & ~around[:, None, w]
            inside = (outside == 0) & (inner[None, :] != group[:, None])  # not itself
            drop[group[inside.any(axis=1)]] = True
    return [item for item, dropped in zip(items, drop) if not dropped]


def footprint_placements(graph: JobGraph, counts: tuple[int, ...], cluster: RampCluster,
                         deadline: float | None = None) -> tuple[Placement, ...]:
    """The placement of each of :func:`footprints` (every op on the block of its count) whose
    servers have the memory, in :func:`footprints`' order: the candidates of best fit and of
    the exact models alike (:class:`OutOfTime` past ``deadline``; cached, read only)."""
    def make() -> tuple[Placement, ...]:
        out = []
        for chosen in footprints(counts, cluster, deadline):
            placement = Placement.of(tuple(chosen[m] for m in counts), chosen.values())
            if placement.fits_memory(graph, cluster.worker_memory):
                out.append(placement)
        return tuple(out)

    return _cached(_FOOTPRINT_PLACEMENTS, (graph.fingerprint, counts, cluster), make)


def mask_array(masks, cluster: RampCluster) -> np.ndarray:
    """Bitmasks as a numpy array: ``uint64`` on clusters of up to 64 servers, Python integers
    (object) beyond."""
    return np.asarray(list(masks), dtype=np.uint64 if cluster.num_servers <= 64 else object)


def as_mask(value: int, cluster: RampCluster):
    """A bitmask in the dtype of :func:`mask_array` (to combine with its arrays)."""
    return np.uint64(value) if cluster.num_servers <= 64 else value


#: Footprints per product in :meth:`FreeBlockScore.hits` beyond 64 servers (bounds its memory).
_HITS_CHUNK = 4096


# ----- the score best fit maximises ----------------------------------------------------------
@dataclass(frozen=True)
class FreeBlockScore:
    """What a footprint leaves free: the weighted share of the blocks of each size in
    :data:`WEIGHTS` that are still free once it is placed, less :data:`WORKER_PENALTY` per
    worker. One implementation for the online placer and the offline rules.

    A footprint's score is ``free weight now - weight of the free blocks it hits - penalty``;
    the blocks a footprint hits are fixed (:meth:`hits`, computed once per footprint), so a
    decision costs one matrix-vector product. Scores are rounded to 9 decimals, so that equal
    scores are equal however they were summed (ties then go to the first footprint).
    """

    cluster: RampCluster
    blocks: np.ndarray = field(repr=False)   # every weighted block's mask
    weights: np.ndarray = field(repr=False)  # its weight (its size's weight / number of blocks)

    def hits(self, masks: np.ndarray):
        """``hits[i, b]`` true (1.0) where footprint ``masks[i]`` shares a server with block b: a
        boolean numpy array on clusters of up to 64 servers, beyond a sparse matrix (a footprint breaks
        a small share of a large cluster's blocks: dense, 300 jobs' options on 8x8x4 took
        2 GB), found through the servers rather than by and-ing every pair of masks."""
        if self.cluster.num_servers > 64:
            return self._wide_hits(masks)
        if not len(masks):
            return np.zeros((0, len(self.blocks)), dtype=bool)
        # bool, not float: 8 times less memory, and a product casts it to the same numbers
        return (masks[:, None] & self.blocks[None, :]) != 0

    def _wide_hits(self, masks):
        """:meth:`hits` beyond 64 servers, a chunk of footprints at a time (the product's
        float intermediates of a whole menu took hundreds of MB), kept as ones of ``int8``
        (a product with float weights upcasts them: the same sums, an eighth of the memory)."""
        from scipy.sparse import csr_matrix, vstack

        chunks, n, width = [], self.cluster.num_servers, -(-self.cluster.num_servers // 64)
        for first in range(0, max(len(masks), 1), _HITS_CHUNK):
            part = [int(mask) for mask in masks[first:first + _HITS_CHUNK]]
            held = np.unpackbits(mask_words(part, width).view(np.uint8), axis=1,
                                 bitorder="little")[:, :n]  # footprint x server, 0/1
            hits = (csr_matrix(held) @ self._incidence).tocsr()
            chunks.append(csr_matrix((np.ones(len(hits.data), dtype=np.int8), hits.indices,
                                      hits.indptr), shape=hits.shape))
        return vstack(chunks, format="csr") if len(chunks) > 1 else chunks[0]

    def broken_by(self, mask: int, weights: np.ndarray) -> float:
        """The weight (``weights``: per block, as :meth:`free_weights`) of the blocks ``mask``
        shares a server with."""
        if self.cluster.num_servers <= 64:
            return float(self.hits(mask_array([mask], self.cluster))[0] @ weights)
        touched = np.unique(self._incidence[list(servers_of(mask))].indices)  # the blocks hit
        return float(weights[touched].sum())

    @cached_property
    def _incidence(self):
        """servers x blocks: 1 where the block holds the server (sparse)."""
        from scipy.sparse import csr_matrix

        rows, cols = [], []
        for b, mask in enumerate(self.blocks):
            held = servers_of(int(mask))
            rows += held
            cols += [b] * len(held)
        return csr_matrix((np.ones(len(rows)), (rows, cols)),
                          shape=(self.cluster.num_servers, len(self.blocks)))

    def free_weights(self, occupied: int) -> np.ndarray:
        """Each block's weight if it is free under ``occupied``, else 0."""
        return np.where((self.blocks & as_mask(occupied, self.cluster)) == 0, self.weights, 0.0)

    def score(self, hits: np.ndarray, workers: np.ndarray, occupied: int) -> np.ndarray:
        """The score of each footprint (rows of ``hits``, its ``workers``) placed on top of
        ``occupied``."""
        free = self.free_weights(occupied)
        return np.round(free.sum() - hits @ free - WORKER_PENALTY * workers, 9)

    def left(self, masks, occupied: int, hits: np.ndarray | None = None) -> np.ndarray:
        """The weighted free blocks left (no worker penalty) once each footprint of ``masks``
        (bitmasks; or their ``hits``, if known) is placed on top of ``occupied``: what a policy
        compares degrees by."""
        if hits is None:
            hits = self.hits(mask_array(masks, self.cluster))
        free = self.free_weights(occupied)
        return np.round(free.sum() - hits @ free, 9)


@lru_cache(maxsize=16)
def free_block_score(cluster: RampCluster, weights: tuple[tuple[int, float], ...] =
                     tuple(WEIGHTS.items())) -> FreeBlockScore:
    """The :class:`FreeBlockScore` of ``cluster`` (cached): each size's weight spread evenly over
    its blocks, sizes the cluster cannot hold left out."""
    blocks, block_weights = [], []
    for m, weight in weights:
        sized = cluster.blocks(m) if m <= cluster.num_servers else ()
        blocks += [block.mask for block in sized]
        block_weights += [weight / max(len(sized), 1)] * len(sized)
    return FreeBlockScore(cluster, mask_array(blocks, cluster), np.asarray(block_weights))


# ----- best fit and compact over one graph's footprints ---------------------------------------
@dataclass
class FootprintMenu:
    """Every degree's candidate footprints of one graph, stacked so that a decision scores them
    all with one product: degree ``d``'s are rows ``spans[d]`` of ``masks``, ``workers``,
    ``hits`` and ``placements``. ``jct_ms`` holds each footprint's JCT (NaN until timed:
    :meth:`jct` times a degree's on first use). ``first_fit``: the degrees left out because
    their footprints are too many to enumerate (:class:`TooManyFootprints`), which the placers
    place first-fit."""

    graph: JobGraph
    spans: dict[int, slice]
    placements: list[Placement]
    masks: np.ndarray
    workers: np.ndarray
    hits: np.ndarray
    jct_ms: np.ndarray
    timed: set[int] = field(default_factory=set)
    first_fit: tuple[int, ...] = ()

    @classmethod
    def build(cls, graph: JobGraph, counts: dict[int, tuple[int, ...]], cluster: RampCluster,
              scorer: FreeBlockScore) -> FootprintMenu:
        """The menu of ``graph`` at the degrees of ``counts`` (degree -> per-op counts); a
        degree with too many footprints is left out, with one warning line."""
        spans, placements, first_fit = {}, [], []
        for d, c in counts.items():
            start = len(placements)
            try:
                placements += footprint_placements(graph, c, cluster)
            except TooManyFootprints as err:
                warn(f"{graph.name} at degree {d}: {err}; best fit and compact place it "
                     f"first-fit")
                first_fit.append(d)
                continue
            spans[d] = slice(start, len(placements))
        masks = mask_array((p.mask for p in placements), cluster)
        workers = np.asarray([p.num_workers for p in placements], dtype=np.int64)
        return cls(graph, spans, placements, masks, workers, scorer.hits(masks),
                   np.full(len(placements), np.nan), first_fit=tuple(first_fit))

    def free(self, occupied: int) -> np.ndarray:
        """Which footprints share no server with ``occupied``: beyond 64 servers tested word by
        word, as anding a Python integer per footprint costs far more."""
        if self.masks.dtype != object:
            return (self.masks & np.uint64(occupied)) == 0
        words = self._words
        beyond = (1 << 64 * len(words)) - 1  # servers past every footprint's: none shared
        occupied_words = mask_words([occupied & beyond], len(words))[0]
        shared = words[0] & occupied_words[0]
        for w in range(1, len(words)):
            shared |= words[w] & occupied_words[w]
        return shared == 0

    @cached_property
    def _words(self) -> np.ndarray:
        """The masks as 64-bit words, one row per word (each row contiguous: fast to and)."""
        width = -(-max(max((int(mask).bit_length() for mask in self.masks), default=1), 1)
                  // 64)
        return np.ascontiguousarray(mask_words([int(mask) for mask in self.masks], width).T)

    def broken(self, weights: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``hits @ weights`` for the footprints ``rows`` (0 for the others): the weight of the
        free blocks each breaks. Only those rows and (dense) the columns of wholly free blocks
        (non-zero weights) are read: in a busy tile both are few, and a product over the whole
        matrix would also push everything else out of the CPU's caches."""
        out = np.zeros(len(self.masks))
        columns = np.flatnonzero(weights)
        if not len(rows) or not len(columns):
            return out
        if isinstance(self.hits, np.ndarray):
            out[rows] = self.hits[rows][:, columns] @ weights[columns]  # faster than np.ix_
        else:  # sparse beyond 64 servers: its rows hold only the blocks they break
            out[rows] = self.hits[rows] @ weights
        return out

    @cached_property
    def footprint_key(self) -> str:
        """A digest of the footprints (their masks, in order) and of which degree holds which:
        graphs whose menus are alike (every graph whose ops are split one way besides 1) share
        their scores."""
        wide = self.masks.dtype == object  # Python integers: no fixed-width bytes
        raw = repr(self.masks.tolist()).encode() if wide else self.masks.tobytes()
        layout = repr([(d, span.start, span.stop) for d, span in self.spans.items()]).encode()
        return hashlib.blake2b(raw + layout, digest_size=12).hexdigest()

    @cached_property
    def degree_index(self) -> dict[int, int]:
        """Each degree's position in :meth:`best_per_degree`'s arrays."""
        return {d: j for j, d in enumerate(self.spans)}

    def best_per_degree(self, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per degree (in :attr:`degree_index` order), the best of ``score`` over its footprints
        and the first footprint holding it (-inf and -1 for a degree with none)."""
        values = np.full(len(self.spans), -np.inf)
        index = np.full(len(self.spans), -1)
        held, starts, lengths = self._segments
        if len(starts):  # the spans lie end to end: one reduction per quantity, not per span
            best = np.maximum.reduceat(score, starts)
            at_best = score == np.repeat(best, lengths)
            positions = np.where(at_best, np.arange(len(score)), len(score))
            index[held] = np.minimum.reduceat(positions, starts)
            values[held] = best
        return values, index

    @cached_property
    def _segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The degrees with footprints (their positions in :attr:`degree_index` order), and
        their spans' starts and lengths."""
        spans = list(self.spans.values())
        held = np.array([j for j, span in enumerate(spans) if span.stop > span.start],
                        dtype=np.int64)
        starts = np.array([spans[j].start for j in held], dtype=np.int64)
        lengths = np.array([spans[j].stop - spans[j].start for j in held], dtype=np.int64)
        return held, starts, lengths

    def jct(self, degree: int, timer) -> np.ndarray:
        """The JCTs of ``degree``'s footprints (``timer(footprints)``, their JCTs in order, on
        first use: the steps they need are simulated together)."""
        span = self.spans[degree]
        if degree not in self.timed:
            self.jct_ms[span] = timer(self.placements[span])
            self.timed.add(degree)
        return self.jct_ms[span]


def pick(placer: str, free: np.ndarray, score: np.ndarray, jct: np.ndarray | None,
         deadline_ms: float | None) -> int:
    """The position (in one degree's footprints) ``placer`` takes, or -1 if none is free.

    ``free``: which footprints are free now; ``score``: their :class:`FreeBlockScore`; ``jct``:
    their JCTs where they depend on the placement (else None). ``best-fit``: the best score among
    the free ones meeting ``deadline_ms`` (all free ones if none does); ``compact``: the
    smallest JCT, then the best score. Ties go to the first footprint. ``free`` and ``score``
    may also be one row per tile of a tiled cluster, ``jct`` the row they share: the position
    is then in the rows laid end to end."""
    if not free.any():
        return -1
    candidates = free
    if placer == "compact" and jct is not None:
        fastest = np.min(np.where(free, jct, np.inf))
        candidates = free & (jct <= fastest * (1 + 1e-9))
    elif jct is not None and deadline_ms is not None:
        in_time = free & (jct <= deadline_ms)
        if in_time.any():
            candidates = in_time
    return int(np.argmax(np.where(candidates, score, -np.inf)))


# ----- a policy's own placement ---------------------------------------------------------------
def check_explicit(graph: JobGraph, counts: tuple[int, ...], placement: Placement,
                   cluster: RampCluster, occupied: int, holder=None) -> None:
    """Raise :class:`InvalidPlacement` unless ``placement`` gives each op a valid RAMP block
    of its split count, its servers are free under ``occupied`` and have the memory.
    ``holder(server)`` (optional) names the job holding a busy server in the message."""
    blocks = getattr(placement, "blocks", None)
    if not isinstance(blocks, tuple) or len(blocks) != graph.num_ops:
        raise InvalidPlacement(f"'{graph.name}' has {graph.num_ops} ops: give one block per op "
                               f"(a Placement), not {type(placement).__name__}")
    for op, block, m in zip(graph.ops, blocks, counts):
        if not isinstance(block, Block):
            raise InvalidPlacement(f"op '{op.id}': {block!r} is not a Block")
        try:
            valid = cluster.block_from_label(block.label, m)
        except InputError:
            valid = None
        if valid is None or valid.servers != block.servers or valid.mask != block.mask:
            raise InvalidPlacement(f"op '{op.id}' is split {m} ways, but {block.label} is not a "
                                   f"valid RAMP block for {m} sub-ops on this "
                                   f"{cluster.describe()} cluster")
    busy = placement.mask & occupied
    if busy:
        server = (busy & -busy).bit_length() - 1
        held = "" if holder is None else f" (job '{holder(server)}' holds it)"
        raise InvalidPlacement(f"server {cluster.server_name(server)} is not free{held}")
    full = [s for s, used in placement.memory_use(graph).items() if used > cluster.worker_memory]
    if full:
        raise InvalidPlacement(f"the placement exceeds the memory of server "
                               f"{cluster.server_name(full[0])}")
