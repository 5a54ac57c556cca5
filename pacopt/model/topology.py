"""The RAMP optical cluster: servers (communication group, rack, server), links and block shapes.

Servers are numbered ``index = (c * R + r) * S + s`` (lexicographic ``c-r-s`` order, as in the
reference). A worker (one per server) holds one job at a time; every server pair has a direct link
with ``channels`` channels per direction.

Block shapes follow the reference's RAMP rules (``docs/model.md#blocks-and-shapes``): a sub-op
group of size ``m`` goes on a rectangular block of ``(groups, racks, servers)`` or on a diagonal
(one server per group and rack), searched in a fixed order and first-fit over origins without
wrap-around.
"""

from __future__ import annotations

import math
import threading
from dataclasses import asdict, dataclass
from functools import cached_property, lru_cache

import numpy as np

from pacopt.infra.arrays import concatenated_ranges
from pacopt.infra.bounded_cache import BoundedCache
from pacopt.infra.errors import InputError

DIAGONAL = -1  # the third entry of a diagonal shape (the reference writes (m, m, -1))
_FREE_BLOCK_CACHE_LIMIT = 500_000
#: Sizes with at least this many blocks find their first free block through a
#: :class:`FirstFreeIndex` (a scan of a few hundred masks is faster than keeping one up to date).
_INDEX_MIN_BLOCKS = 256
#: On clusters of more than this many servers, the sizes of each band of
#: :data:`_SHARED_INDEX_BANDS` (the degrees' sizes: first fit looks several of them up per
#: decision) share one index, built when a size of the band is first asked for: the sizes above
#: 16 only for a menu of degrees above 16.
_SHARED_INDEX_SERVERS = 64
_SHARED_INDEX_BANDS = ((1, 16), (17, 64))
_SHARED_LOCK = threading.Lock()


@dataclass(frozen=True)
class Block:
    """A concrete block: its shape, its origin and its servers in sub-op order."""

    shape: tuple[int, int, int]  # (groups, racks, servers per rack); (m, m, DIAGONAL) = diagonal
    origin: tuple[int, int, int]
    servers: tuple[int, ...]
    mask: int  # bit i set <=> server i in the block

    @cached_property
    def label(self) -> str:
        """Compact text form used in results, e.g. ``0-0-0:4x4x1`` or ``0-0-1:diag4``."""
        c, r, s = self.origin
        if self.shape[2] == DIAGONAL:
            return f"{c}-{r}-{s}:diag{self.shape[0]}"
        return f"{c}-{r}-{s}:{self.shape[0]}x{self.shape[1]}x{self.shape[2]}"


@dataclass(frozen=True)
class RampCluster:
    """A C x R x S RAMP cluster. Bandwidth in bytes/s, latencies in seconds, memory in bytes."""

    communication_groups: int = 4
    racks_per_group: int = 4
    servers_per_rack: int = 2
    channels: int = 1
    total_node_bandwidth: float = 1.6e12
    propagation_latency: float = 5e-8
    worker_io_latency: float = 1e-7
    worker_memory: float = 8e10

    @property
    def dims(self) -> tuple[int, int, int]:
        """(groups, racks per group, servers per rack): the RAMP shape, as ``--cluster`` gives
        it (``8x8x4``)."""
        return self.communication_groups, self.racks_per_group, self.servers_per_rack

    def __post_init__(self) -> None:
        for name in ("communication_groups", "racks_per_group", "servers_per_rack", "channels"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"cluster.{name} must be an integer >= 1, got {value!r}")
        if self.racks_per_group > self.communication_groups:
            raise InputError("cluster.racks_per_group must not exceed cluster.communication_groups "
                             "(a RAMP rule)")
        for name in ("total_node_bandwidth", "worker_memory"):
            if not getattr(self, name) > 0:
                raise InputError(f"cluster.{name} must be > 0")
        for name in ("propagation_latency", "worker_io_latency"):
            if not getattr(self, name) >= 0:
                raise InputError(f"cluster.{name} must be >= 0")

    # ----- sizes and names ----------------------------------------------------------------------
    @property
    def num_servers(self) -> int:
        return self.communication_groups * self.racks_per_group * self.servers_per_rack

    @property
    def channel_bandwidth(self) -> float:
        """Bytes/s of one channel (one transceiver): total node bandwidth / C."""
        return self.total_node_bandwidth / self.communication_groups

    @property
    def full_mask(self) -> int:
        return (1 << self.num_servers) - 1

    def index(self, c: int, r: int, s: int) -> int:
        return (c * self.racks_per_group + r) * self.servers_per_rack + s

    @cached_property
    def coords(self) -> tuple[tuple[int, int, int], ...]:
        """``coords[i]`` = (c, r, s) of server i."""
        return tuple((c, r, s) for c in range(self.communication_groups)
                     for r in range(self.racks_per_group) for s in range(self.servers_per_rack))

    @cached_property
    def coords_array(self) -> np.ndarray:
        """:attr:`coords` as an (servers, 3) integer array (read only)."""
        coords = np.array(self.coords, dtype=np.int64).reshape(-1, 3)
        coords.flags.writeable = False
        return coords

    def server_name(self, index: int) -> str:
        return "-".join(map(str, self.coords[index]))

    def server_index(self, name: str) -> int:
        """Index of server ``'c-r-s'``; raises :class:`InputError` if it is not on this cluster."""
        try:
            c, r, s = (int(x) for x in name.split("-"))
        except (ValueError, AttributeError):
            raise InputError(f"'{name}' is not a server name 'c-r-s'") from None
        if not (0 <= c < self.communication_groups and 0 <= r < self.racks_per_group
                and 0 <= s < self.servers_per_rack):
            raise InputError(f"server '{name}' is not on this {self.describe()} cluster")
        return self.index(c, r, s)

    def describe(self) -> str:
        return f"{self.communication_groups}x{self.racks_per_group}x{self.servers_per_rack}"

    def to_dict(self) -> dict:
        return {"topology": "ramp", **asdict(self)}

    # ----- block shapes -------------------------------------------------------------------------
    def shapes(self, m: int) -> tuple[tuple[int, int, int], ...]:
        """Block shapes for a group of ``m`` sub-ops, in the reference's search order."""
        return _shapes(*self.dims, m)

    def blocks(self, m: int) -> tuple[Block, ...]:
        """Every block for ``m`` sub-ops, in first-fit order (shape, then origin c, r, s)."""
        return _blocks(self, m)

    def free_block(self, m: int, occupied: int) -> Block | None:
        """The first block for ``m`` sub-ops (first-fit order) with no server in ``occupied``;
        None if every one is busy. A scan of integer masks, cached by (m, occupancy): the
        placer's inner loop."""
        cache = self._free_blocks
        key = (m, occupied)
        try:
            return cache[key]
        except KeyError:
            pass
        blocks = self._blocks_of.get(m)
        if blocks is None:
            blocks = self._register(m)
        index, span = self._first_free.get(m, (None, None))
        if index is not None:  # a large cluster: count busy servers per block, incrementally
            return cache.put(key, index.first(occupied, span))
        return cache.put(key, next((b for b in blocks if not b.mask & occupied), None))

    @cached_property
    def _free_blocks(self) -> BoundedCache:
        return BoundedCache(_FREE_BLOCK_CACHE_LIMIT)  # (m, occupancy) -> Block | None

    @cached_property
    def _blocks_of(self) -> dict[int, tuple[Block, ...]]:
        return {}  # blocks(m) without hashing the cluster for the lru_cache on every miss

    @cached_property
    def _first_free(self) -> dict[int, tuple[FirstFreeIndex, slice | None]]:
        return {}  # size -> its index and its blocks' span in it (None: all)

    def block_index(self, m: int) -> tuple[FirstFreeIndex | None, slice | None]:
        """The index :meth:`free_block` finds size ``m``'s first free block with, and the span
        of those blocks in it (None: all of it); ``(None, None)`` where it scans instead."""
        if m not in self._blocks_of:
            self._register(m)
        return self._first_free.get(m, (None, None))

    def _register(self, m: int) -> tuple[Block, ...]:
        """Size ``m``'s blocks, kept, and the index they are looked up with (if any)."""
        blocks = self._blocks_of[m] = self.blocks(m)
        if self.num_servers > _SHARED_INDEX_SERVERS and m <= _SHARED_INDEX_BANDS[-1][1]:
            self._first_free[m] = self._shared_index(m)
        elif len(blocks) >= _INDEX_MIN_BLOCKS:
            self._first_free[m] = (FirstFreeIndex(blocks, self.num_servers), None)
        return blocks

    def _shared_index(self, m: int) -> tuple[FirstFreeIndex, slice]:
        """One index over the blocks of every size of ``m``'s band (:data:`_SHARED_INDEX_BANDS`,
        built on first use), and the span of size ``m``'s blocks in it: a decision that looks
        up many sizes brings one index up to date, not one per size."""
        low, high = next(band for band in _SHARED_INDEX_BANDS if band[0] <= m <= band[1])
        with _SHARED_LOCK:  # one index per band, whichever thread asks first
            shared = self.__dict__.setdefault("_shared", {})
            if low not in shared:
                every, spans = [], {}
                for size in range(low, min(high, self.num_servers) + 1):
                    spans[size] = slice(len(every), len(every) + len(self.blocks(size)))
                    every += self.blocks(size)
                shared[low] = (FirstFreeIndex(tuple(every), self.num_servers), spans)
        index, spans = shared[low]
        return index, spans[m]

    @cached_property
    def _by_place(self) -> dict[int, dict[tuple, Block]]:
        return {}  # size -> (origin, shape), and each label found so far -> its block

    def __getstate__(self) -> dict:
        # caches are no part of the cluster: do not ship them to worker processes
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_free_blocks", "_blocks_of", "_first_free", "_by_place", "_shared")}

    def block_from_label(self, label: str, m: int) -> Block:
        """The block a label names, checked to be a valid RAMP block for ``m`` sub-ops."""
        by_place = self._by_place.get(m)
        if by_place is None:
            by_place = self._by_place[m] = {(b.origin, b.shape): b for b in self.blocks(m)}
        if isinstance(label, str) and label in by_place:  # a label read before
            return by_place[label]
        block = by_place.get(_parse_label(label))
        if block is not None and block.label == label:  # the exact text, not an alias of it
            by_place[label] = block
            return block
        raise InputError(f"'{label}' is not a valid RAMP block for {m} sub-ops on a "
                         f"{self.describe()} cluster")

    def placeable_sizes(self, limit: int) -> tuple[int, ...]:
        """Group sizes 1..limit that have at least one block on this cluster."""
        return tuple(m for m in range(1, limit + 1) if self.blocks(m))


@lru_cache(maxsize=None)
def _shapes(C: int, R: int, S: int, m: int) -> tuple[tuple[int, int, int], ...]:
    found: list[tuple[int, int, int]] = []
    for i in range(1, m + 1):
        if m % i:
            continue
        a, b = m // i, i
        root = math.isqrt(a)
        if root * root == a and root <= C and root <= R and b <= S:
            found.append((root, root, b))
        if a <= C and a <= R and b <= S:
            found += [(a, 1, b), (a, b, 1)]
    found += [(m, m, DIAGONAL), (m, 1, 1)]
    unique: list[tuple[int, int, int]] = []
    for shape in found:  # a repeated shape cannot find a block its first occurrence missed
        if shape not in unique:
            unique.append(shape)
    return tuple(unique)


@lru_cache(maxsize=None)
def _blocks(cluster: RampCluster, m: int) -> tuple[Block, ...]:
    C, R, S = cluster.dims
    blocks: list[Block] = []
    for shape in _shapes(C, R, S, m):
        cb, rb, sb = shape
        if sb == DIAGONAL:
            if cb > C or cb > R:
                continue
            offsets = [cluster.index(t, t, 0) for t in range(cb)]
            origins = ((i, j, k) for i in range(C - cb + 1) for j in range(R - cb + 1)
                       for k in range(S))
        else:
            if cb > C or rb > R or sb > S:
                continue
            offsets = [cluster.index(x, y, z) for x in range(cb) for y in range(rb)
                       for z in range(sb)]
            origins = ((i, j, k) for i in range(C - cb + 1) for j in range(R - rb + 1)
                       for k in range(S - sb + 1))
        # server indices are linear in the coordinates: a block is its shape at the origin,
        # shifted by its origin's index
        mask = sum(1 << o for o in offsets)
        for origin in origins:
            base = cluster.index(*origin)
            blocks.append(Block(shape=shape, origin=origin,
                                servers=tuple(base + o for o in offsets), mask=mask << base))
    seen: set[tuple[int, ...]] = set()  # e.g. a 1-server diagonal is a 1x1x1 block again
    return tuple(b for b in blocks if not (b.servers in seen or seen.add(b.servers)))


def servers_of(mask: int) -> tuple[int, ...]:
    """The servers (bit indices) set in ``mask``, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return tuple(out)


def mask_words(masks, width: int) -> np.ndarray:
    """``masks`` (Python integers) as a ``(len(masks), width)`` array of little-endian 64-bit
    words: numpy ands and compares masks wider than 64 bits word by word."""
    raw = b"".join(mask.to_bytes(8 * width, "little") for mask in masks)
    return np.frombuffer(raw, dtype="<u8").reshape(len(masks), width)


def _parse_label(label: str) -> tuple | None:
    """The (origin, shape) a block label names (:attr:`Block.label`); None if it names none."""
    if not isinstance(label, str):
        return None
    where, _, shape = label.partition(":")
    try:
        origin = tuple(int(x) for x in where.split("-"))
        if shape.startswith("diag"):
            return origin, (int(shape[4:]), int(shape[4:]), DIAGONAL)
        return origin, tuple(int(x) for x in shape.split("x"))
    except ValueError:
        return None


class FirstFreeIndex:
    """The first free block (in first-fit order) under a changing occupancy.

    A linear scan of the blocks' masks costs O(blocks) big-integer operations per look-up, which
    dominates an episode on a cluster of hundreds of servers (4,000 blocks of 8 on 16x16x4). The
    index keeps, per block, how many of its servers are busy under the last occupancy it saw, and
    brings the counts up to date from the servers that changed since (an episode changes a few
    dozen between decisions): the first free block is then the first zero count. The blocks may
    differ in size (one index can count the free blocks of several sizes at once). Safe to share
    between threads (a lock guards the update and the look-up together).
    """

    def __init__(self, blocks: tuple[Block, ...], num_servers: int):
        self.blocks = blocks
        self.num_servers = num_servers
        lengths = np.fromiter((len(b.servers) for b in blocks), np.int64, len(blocks))
        self.servers = np.fromiter((s for b in blocks for s in b.servers), np.int64,
                                   int(lengths.sum()))  # every block's servers, in turn
        self.owner = np.repeat(np.arange(len(blocks), dtype=np.int64), lengths)
        order = np.argsort(self.servers, kind="stable")
        # the blocks holding server s: members[start[s]:start[s + 1]]
        self.members = self.owner[order]
        self.start = np.searchsorted(self.servers[order], np.arange(num_servers + 1))
        self.holding = [self.members[a:b] for a, b in zip(self.start[:-1], self.start[1:])]
        self.busy = np.zeros(len(blocks), dtype=np.int64)
        self.occupied = 0
        self._bytes = (num_servers + 7) // 8
        self._lock = threading.Lock()

    def first(self, occupied: int, span: slice | None = None) -> Block | None:
        """The first block (of ``span``'s, if given) with no server in ``occupied``; None if
        every one is busy."""
        with self._lock:
            self._update(occupied)
            busy = self.busy if span is None else self.busy[span]
            if not len(busy):
                return None
            i = int(busy.argmin())  # the first of the least busy
            return self.blocks[i + (span.start if span else 0)] if busy[i] == 0 else None

    def free(self, occupied: int) -> np.ndarray:
        """Per block, whether none of its servers is in ``occupied`` (a new array)."""
        with self._lock:
            self._update(occupied)
            return self.busy == 0

    def _update(self, occupied: int) -> None:
        changed = occupied ^ self.occupied
        if changed:
            if changed.bit_count() * 4 > self.num_servers:  # far away: recount all
                busy = np.unpackbits(np.frombuffer(occupied.to_bytes(self._bytes, "little"),
                                                   np.uint8), bitorder="little")
                self.busy = np.bincount(self.owner, weights=busy[self.servers],
                                        minlength=len(self.blocks)).astype(np.int64)
            else:  # in place: a few hundred entries, not a pass over every block
                if changed & occupied:
                    np.add.at(self.busy, self.touched(changed & occupied), 1)
                if changed & self.occupied:
                    np.subtract.at(self.busy, self.touched(changed & self.occupied), 1)
            self.occupied = occupied

    def touched(self, mask: int) -> np.ndarray:
        """The blocks holding a server of ``mask`` (a block once per such server), gathered
        from ``members`` in one pass: a decision brings every size's index up to date with the
        same change, whose servers are found once (:func:`_server_array`)."""
        servers = _server_array(mask)
        first = self.start[servers]
        return self.members[concatenated_ranges(first, self.start[servers + 1] - first)]


#: Server arrays of the masks by which an occupancy changed (shared by the indices).
_SERVER_ARRAYS = BoundedCache(4096)


def _server_array(mask: int) -> np.ndarray:
    """:func:`servers_of` as a numpy array (cached)."""
    found = _SERVER_ARRAYS.get(mask)
    if found is None:
        bits = np.unpackbits(np.frombuffer(mask.to_bytes((mask.bit_length() + 7) // 8, "little"),
                                           np.uint8), bitorder="little")
        found = _SERVER_ARRAYS.put(mask, np.flatnonzero(bits))
    return found

