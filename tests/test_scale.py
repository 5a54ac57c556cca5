"""Large RAMP clusters: the incremental first-free-block index, the tiling, capped
offline candidates, and limits honoured while a large problem is built."""

from __future__ import annotations

import json
import pickle
import random
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from episodes import random_decisions
from offline_cases import CNN, TINY

from pacopt.formulations import offline
from pacopt.formulations.cpsat import solve_cpsat
from pacopt.formulations.offline import build_problem, candidate_placements
from pacopt.infra.interrupt import OutOfTime, request_stop, stoppable
from pacopt.model import placers
from pacopt.model.graph_sources import read_graph_file
from pacopt.model.instance import instance_from_dict
from pacopt.model.jct import JctModel
from pacopt.model.partition import op_counts
from pacopt.model.placers import check_explicit, footprints
from pacopt.model.settings import ModelSettings
from pacopt.model.tiles import tiling
from pacopt.model.topology import FirstFreeIndex, RampCluster
from pacopt.solvers.api import solve

GRAPHS = {"cnn": {"file": CNN}, "tiny": TINY}


def instance(shape, jobs, preset="ddls", placement="first-fit"):
    c, r, s = shape
    return instance_from_dict({
        "cluster": {"communication_groups": c, "racks_per_group": r, "servers_per_rack": s},
        "model": {"preset": preset, "placement": placement}, "graphs": GRAPHS,
        "jobs": [{"id": f"j{i}", "graph": g, "arrival_ms": a, "max_jct_fraction": b}
                 for i, (g, a, b) in enumerate(jobs)]})


def test_the_first_free_block_index_is_the_linear_scan():
    cluster = RampCluster(8, 8, 4)
    rng = random.Random(0)
    occupied = 0
    for step in range(1500):
        if rng.random() < 0.02:
            occupied = rng.getrandbits(cluster.num_servers)  # far away: a full recount
        elif rng.random() < 0.5:
            occupied |= 1 << rng.randrange(cluster.num_servers)
        else:
            occupied &= ~(1 << rng.randrange(cluster.num_servers))
        for m in (1, 2, 4, 8, 16):
            expected = next((b for b in cluster.blocks(m) if not b.mask & occupied), None)
            assert cluster.free_block(m, occupied) is expected, (step, m)


def test_the_sizes_above_16_share_an_index_that_is_the_linear_scan():
    """On 16x16x4 the sizes 17 to 64 (degrees above 16) share a second index, built when one
    of them is first asked for; its first free blocks are the scan's, as the first band's."""
    cluster = RampCluster(16, 16, 4)
    rng = random.Random(1)
    occupied, sizes = 0, (4, 16, 18, 24, 32, 64)
    for step in range(300):
        if rng.random() < 0.05:
            occupied = rng.getrandbits(cluster.num_servers) & rng.getrandbits(cluster.num_servers)
        else:
            job = rng.choice(cluster.blocks(rng.choice((4, 8, 16, 32))))
            occupied = occupied ^ job.mask if rng.random() < 0.5 else occupied | job.mask
        for m in sizes:
            expected = next((b for b in cluster.blocks(m) if not b.mask & occupied), None)
            assert cluster.free_block(m, occupied) is expected, (step, m)
    low, high = cluster.block_index(16)[0], cluster.block_index(18)[0]
    assert low is not high and high is cluster.block_index(64)[0]


def test_the_blocks_an_occupancy_change_touches_are_each_servers_blocks():
    cluster = RampCluster(8, 8, 4)
    index = FirstFreeIndex(cluster.blocks(4) + cluster.blocks(8), cluster.num_servers)
    rng = random.Random(2)
    for _ in range(50):
        mask = rng.getrandbits(cluster.num_servers) & rng.getrandbits(cluster.num_servers)
        expected = [i for s in range(cluster.num_servers) if mask >> s & 1
                    for i, block in enumerate(index.blocks) if s in block.servers]
        assert index.touched(mask).tolist() == expected
    assert index.touched(0).tolist() == []


def test_best_per_degree_is_each_spans_first_best():
    rng = np.random.default_rng(3)
    inst = instance((8, 8, 4), [("cnn", 0.0, 0.5)])
    model = JctModel(inst.cluster, inst.model)
    menu = model.menu(model.table(inst.graphs["cnn"]))
    assert len(menu.spans) > 3 and any(span.stop == span.start for span in menu.spans.values())
    for _ in range(50):
        score = np.round(rng.integers(-3, 1, len(menu.masks)).astype(float), 9)
        score[rng.random(len(score)) < 0.4] = -np.inf
        values, index = menu.best_per_degree(score)
        for j, span in enumerate(menu.spans.values()):
            here = score[span]
            if not len(here):  # a degree without footprints on the tile
                assert index[j] == -1 and values[j] == -np.inf
            else:
                assert index[j] == span.start + int(here.argmax()) and values[j] == here.max()


@pytest.mark.parametrize("placer, preset", [("best-fit", "ddls"), ("compact", "physical")])
def test_tiled_options_place_each_degree_as_their_masks_say(placer, preset):
    """A tiled cluster's options copy a tile's footprint into its tile only when its placement
    is read: at every decision of an episode, each placeable degree's placement is valid and
    free now, holds the options' mask and workers, and the placements pickle as themselves."""
    jobs = [("cnn" if i % 3 else "tiny", 40.0 * i, 0.3 + (i % 4) / 5) for i in range(60)]
    inst = instance((8, 8, 4), jobs, preset, placer)
    checked = 0
    for decision in random_decisions(inst, 5):
        options = decision.options()
        for d in np.flatnonzero(options.placeable).tolist():
            placement = decision.placement(d)
            assert placement.mask == options.masks[d]
            assert placement.num_workers == options.workers[d]
            check_explicit(decision.graph, decision.table.counts[d], placement,
                           inst.cluster, decision.state.occupied)
            checked += 1
        assert list(pickle.loads(pickle.dumps(options.placements))) == list(options.placements)
    assert checked > 200


def test_tiles_are_translates_made_of_valid_blocks():
    assert tiling(RampCluster()) is None  # the paper's cluster is one tile: nothing changes
    assert tiling(RampCluster(4, 4, 4)) is None
    tiles = tiling(RampCluster(8, 8, 4))
    assert tiles.num_tiles == 4 and tiles.tile.describe() == "4x4x4"
    cluster, seen = tiles.cluster, 0
    for t in range(tiles.num_tiles):
        for m in (1, 2, 4, 8, 9, 16):
            for block in tiles.tile.blocks(m):
                copy = tiles.block(block, t)
                assert cluster.block_from_label(copy.label, m) == copy
                assert tiles.cluster_mask(block.mask, t) == copy.mask
        whole = tiles.placement(placers.Placement((tiles.tile.blocks(64)[0],)), t).mask
        assert tiles.local_masks(whole) == [tiles.tile.full_mask if u == t else 0
                                            for u in range(tiles.num_tiles)]
        seen |= whole
    assert seen == cluster.full_mask


@pytest.mark.parametrize("shape, tile, count", [((6, 6, 4), "3x3x4", 4),
                                                 ((8, 6, 2), "4x3x2", 4),
                                                 ((12, 4, 4), "4x4x4", 3)])
def test_groups_and_racks_not_multiples_of_4_are_tiled_by_divisors(shape, tile, count):
    """Tiles of the largest divisors up to 4 cover such a cluster, each tile's blocks
    translate to valid blocks, and a cluster whose tiles would be too small is not tiled."""
    tiles = tiling(RampCluster(*shape))
    assert tiles.tile.describe() == tile and tiles.num_tiles == count
    seen = 0
    for t in range(count):
        for m in (1, 2, 3, 4, 8, 9, 16):
            for block in tiles.tile.blocks(m):
                copy = tiles.block(block, t)
                assert tiles.cluster.block_from_label(copy.label, m) == copy
        whole = tiles.placement(placers.Placement(tiles.tile.blocks(1)), t).mask  # every server
        assert tiles.local_masks(whole) == [tiles.tile.full_mask if u == t else 0
                                            for u in range(count)]
        seen |= whole
    assert seen == tiles.cluster.full_mask
    assert tiling(RampCluster(5, 5, 4)) is None  # 1x1x4 tiles: enumerated in full


def test_a_footprint_straddling_tiles_of_more_than_64_servers_is_scored():
    """On 8x4x8 the tiles are 4x4x8 (128 servers), whose hits are sparse: the weight a
    first-fit footprint breaks across two tiles (best fit's fallback when no tile has a free
    footprint) is the free blocks' it touches in each."""
    cluster = RampCluster(8, 4, 8)
    tiles = tiling(cluster)
    assert tiles.tile.describe() == "4x4x8"
    model = JctModel(cluster, ModelSettings(), persist=False)
    block = next(b for b in cluster.blocks(2) if b.shape == (2, 1, 1) and b.origin[0] == 3)
    parts = tiles.local_masks(block.mask)
    assert sum(1 for part in parts if part) == 2  # one server in each of two tiles
    scorer = placers.free_block_score(tiles.tile)
    expected = sum(weight for part in parts if part
                   for weight, mask in zip(scorer.weights, scorer.blocks) if int(mask) & part)
    lost = model._tile_loss(block.mask, tiles.local_masks(0))
    assert lost == pytest.approx(expected) and lost > 0


def test_a_menu_on_a_tile_of_128_servers_is_scored_as_a_recount(monkeypatch):
    """On 4x4x8 tiles (128 servers: masks wider than a word) a graph's footprint menu says
    which footprints are free word by word and what free weight each breaks from its hits,
    built a few footprints at a time: both equal testing every footprint and block afresh."""
    monkeypatch.setattr(placers, "_HITS_CHUNK", 97)  # several chunks, the last one partial
    tile = RampCluster(4, 4, 8)
    scorer = placers.free_block_score(tile)
    table = JctModel(tile, ModelSettings(), persist=False).table(read_graph_file(CNN))
    counts = {d: table.counts[d] for d in range(1, len(table.placed)) if table.placed[d]}
    menu = placers.FootprintMenu.build(table.graph, counts, tile, scorer)
    assert menu.masks.dtype == object and len(menu.masks) > placers._HITS_CHUNK
    rng = random.Random(3)
    for _ in range(25):
        occupied = rng.getrandbits(128) & rng.getrandbits(128) & rng.getrandbits(128)
        free = menu.free(occupied)
        assert list(free) == [not int(mask) & occupied for mask in menu.masks]
        weights = scorer.free_weights(occupied)
        rows = np.flatnonzero(free)
        broken = menu.broken(weights, rows)
        for k in rows[:: max(1, len(rows) // 40)]:
            expected = sum(w for w, block in zip(weights, scorer.blocks)
                           if int(block) & int(menu.masks[k]))
            assert broken[k] == pytest.approx(expected, abs=1e-12)
        assert not broken[~free].any()


def test_caches_bounded_by_cost_empty_before_going_over():
    from pacopt.infra.bounded_cache import BoundedCache

    cache = BoundedCache(10, len)
    cache.put("a", "xxxx")
    cache.put("b", "xxxxxx")
    assert set(cache) == {"a", "b"} and cache.used == 10
    cache.put("c", "x")  # 11 > 10: emptied first
    assert set(cache) == {"c"} and cache.used == 1
    counted = BoundedCache(2)  # without a cost: by entries, as before
    for key in "abc":
        counted.put(key, key)
    assert set(counted) == {"c"}


def test_minimal_unions_match_the_pairwise_rule():
    rng = random.Random(1)
    for _ in range(200):
        bits = rng.choice([8, 32, 64, 100])  # 100: the Python-integer path
        masks = list({rng.getrandbits(bits) | 1 for _ in range(rng.randrange(1, 120))})
        items = [({"i": i}, m) for i, m in enumerate(masks)]
        kept = placers._minimal(list(items))
        expected = [m for m in sorted(masks, key=int.bit_count)
                    if not any(k & ~m == 0 and k != m for k in masks)]
        assert sorted(m for _, m in kept) == sorted(expected)
    assert [m for _, m in placers._minimal([({}, 6), ({}, 0), ({}, 1)])] == [0]


def test_enumeration_stops_at_a_stop_request():
    """GNMT-like counts on 8x8x4 enumerate for minutes without the tiles: a stop from another
    thread ends it within a second."""
    cluster = RampCluster(8, 8, 4)
    with stoppable():
        timer = threading.Timer(0.3, request_stop)
        timer.start()
        started = time.perf_counter()
        with pytest.raises(OutOfTime):
            footprints((16, 9, 8, 6, 1), cluster)
        assert time.perf_counter() - started < 2.0
        timer.cancel()


def test_building_a_large_problem_honours_its_deadline():
    jobs = [("cnn", 50.0 * i, 0.5) for i in range(400)]
    inst = instance((16, 16, 4), jobs)
    started = time.perf_counter()
    with pytest.raises(OutOfTime):  # the build takes about half a second with warm caches
        build_problem(inst, stop_at=started + 0.1)
    assert time.perf_counter() - started < 3.0


def test_an_exact_method_out_of_time_returns_a_validated_incumbent():
    """The problem cannot be built in the limit: the best online episode comes back, validated,
    with a bound and one line saying where the method stopped."""
    jobs = [("cnn", 20.0 * i, 0.6) for i in range(300)]
    started = time.perf_counter()
    with pytest.warns(UserWarning, match="stopped while"):
        solution = solve(instance((16, 16, 4), jobs), "cpsat", time_limit=1.0, threads=1, seed=0)
    assert time.perf_counter() - started < 20.0
    assert solution.validated and solution.status in ("optimal", "feasible")
    assert solution.accepted > 0 and solution.bound_accepted >= solution.accepted
    assert (solution.status == "optimal") == (solution.accepted == solution.bound_accepted)
    assert "stopped" in solution.metrics


def test_ctrl_c_while_building_returns_at_once():
    jobs = [("cnn", 20.0 * i, 0.6) for i in range(300)]
    inst = instance((16, 16, 4), jobs)
    timer = threading.Timer(0.5, request_stop)
    timer.start()
    started = time.perf_counter()
    with pytest.warns(UserWarning, match="stopped while .*, before any incumbent; returning "
                                         "every job rejected"):
        solution = solve(inst, "cpsat", time_limit=600.0, threads=1, seed=0)
    assert time.perf_counter() - started < 15.0
    assert solution.validated and solution.interrupted
    assert solution.accepted == 0 and solution.bound_accepted > 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["cnn", "tiny"]), st.integers(0, 3000),
                          st.sampled_from([0.3, 0.5, 0.7, 1.0])), min_size=1, max_size=6))
def test_capped_candidates_are_valid_and_reach_the_full_optimum(jobs):
    """On a 2-tile cluster (8x4x2) the capped candidates are valid RAMP placements and, on small
    random instances, give the optimum of the full enumeration."""
    jobs = sorted(jobs, key=lambda job: job[1])
    inst = instance((8, 4, 2), jobs)
    capped = build_problem(inst)
    assert capped.capped
    for option in capped.options:
        graph = inst.graphs[inst.jobs[option.job].graph]
        check_explicit(graph, op_counts(graph, option.degree, inst.model.quantum_ms),
                       option.placement, inst.cluster, 0)
    original = offline.tiling
    offline.tiling = lambda cluster: None  # the full enumeration, as on an untiled cluster
    try:
        full = build_problem(inst)
    finally:
        offline.tiling = original
    assert not full.capped and len(full.options) >= len(capped.options)
    a = solve_cpsat(capped, time_limit=20, threads=1)
    b = solve_cpsat(full, time_limit=20, threads=1)
    assert a.status == b.status == "optimal"
    assert len(a.chosen) == len(b.chosen)


def test_candidates_on_one_tile_are_the_full_enumeration():
    inst = instance((4, 4, 2), [("cnn", 0.0, 0.5)])
    graph = inst.graphs["cnn"]
    for d in (1, 2, 4, 8, 16):
        counts = op_counts(graph, d, inst.model.quantum_ms)
        assert candidate_placements(graph, counts, inst.cluster) == \
            placers.footprint_placements(graph, counts, inst.cluster)


def test_ctrl_c_while_validating_keeps_the_result(monkeypatch):
    """A stop that lands after the method has finished, while its solution is validated, keeps
    the validated solution (marked interrupted, so the command exits 130)."""
    from pacopt.solvers import api

    real = api.validate

    def validate_under_ctrl_c(inst, solution, **options):
        request_stop()
        return real(inst, solution, **options)

    monkeypatch.setattr(api, "validate", validate_under_ctrl_c)
    solution = solve(instance((4, 4, 2), [("cnn", 100.0 * i, 0.8) for i in range(20)]),
                     "tuned", seed=0)
    assert solution.validated and solution.interrupted
    assert solution.arrived == 20


def test_a_capped_bound_counts_the_degrees_no_tile_holds(pipedream_env):
    """On 32x32x1 the 4x4x1 tiles hold no block of 5, 10 or 15, which the cluster places: the
    bound still bounds the true problem under ``ddls`` (it fell two jobs below an online
    episode, a result the validator refused; ``lp-round`` called its 58 of 60 optimal), and
    under ``physical``, where it bounds the
    capped problem only, the bound reported is the decidable jobs'."""
    from pacopt.formulations.bound import worker_count_bound
    from pacopt.formulations.offline import decidable_jobs
    from pacopt.model.paper_workload import on_cluster, paper_instance_dict

    inst = instance_from_dict(on_cluster(paper_instance_dict("A", 10000, 60), (32, 32, 1)))
    problem = build_problem(inst)
    assert problem.capped and problem.relaxation_bounds_all
    online = max(solve(inst, m, seed=0, placement=p).accepted
                 for m, p in (("tuned", "first-fit"), ("para-max", "first-fit"),
                              ("tuned", "best-fit")))
    assert worker_count_bound(problem, time_limit=10.0) >= online
    solution = solve(inst, "bound", time_limit=20.0, threads=1, seed=0)
    assert solution.validated and solution.bound_accepted >= online
    rounded = solve(inst, "lp-round", seed=0)  # its whole LP's floor bounds the capped problem
    assert rounded.bound_accepted >= online and rounded.metrics["lp_bound_source"] == "worker-count"
    physical = instance_from_dict(on_cluster(paper_instance_dict("A", 10000, 20, "physical"),
                                             (32, 32, 1)))
    capped = build_problem(physical)
    assert not capped.relaxation_bounds_all
    assert capped.trivial_bound == decidable_jobs(physical, capped.model) == 20
    solution = solve(physical, "bound", time_limit=20.0, threads=1, seed=0)
    assert solution.validated and solution.bound_accepted == 20


def test_lp_round_on_capped_candidates_keeps_a_better_online_episode(monkeypatch):
    """On a tiled cluster ``lp-round``'s capped candidates can hold fewer jobs than an online
    episode (a 1500-job trace window on 16x16x4: 475 against ``tuned``'s 858): it then returns
    that episode, validated, with its own bound; on a cluster without tiles its rounding
    stands. A rounding that accepts nothing stands in for a poor one here."""
    from pacopt.solvers import lp_round
    from pacopt.solvers.lp_round import RoundingResult

    monkeypatch.setattr(lp_round, "lp_round", lambda problem, **kwargs: RoundingResult(
        chosen={}, lp_bound=None, lps=0, lp_seconds=0.0))
    jobs = [("cnn", 300.0 * i, 0.6) for i in range(30)]
    tiled = solve(instance((8, 4, 2), jobs), "lp-round", seed=0)
    assert tiled.validated and tiled.accepted > 0 and tiled.method == "lp-round"
    assert tiled.metrics["stopped"] == "the capped candidates held fewer jobs than an online episode"
    assert tiled.bound_accepted >= tiled.accepted
    assert solve(instance((4, 4, 2), jobs), "lp-round", seed=0).accepted == 0


@pytest.fixture
def small_footprint_limit(monkeypatch):
    """:data:`placers.FOOTPRINT_LIMIT` at 1,000 unions, with the footprint caches emptied
    before and after (a set found to be too many under it must not stay known as such)."""
    caches = (placers._FOOTPRINTS, placers._FOOTPRINT_PLACEMENTS, placers._TOO_MANY)
    for cache in caches:
        cache.clear()
    monkeypatch.setattr(placers, "FOOTPRINT_LIMIT", 1000)
    yield
    for cache in caches:
        cache.clear()


def test_too_many_footprints_stop_the_enumeration_and_are_remembered(small_footprint_limit,
                                                                      monkeypatch):
    """On 5x5x4 (no tiles) the cnn's counts 8, 6, 4, 2 and 1 have 6,182 footprints: past the
    limit the enumeration stops, as a kind of running out of time, and the verdict is kept;
    a set under the limit is enumerated as before."""
    cluster = RampCluster(5, 5, 4)
    with pytest.raises(placers.TooManyFootprints, match="more than 1,000 unions"):
        footprints((8, 6, 4, 2, 1), cluster)
    assert issubclass(placers.TooManyFootprints, OutOfTime)
    monkeypatch.setattr(placers, "_enumerated", lambda *args: pytest.fail("enumerated again"))
    with pytest.raises(placers.TooManyFootprints):
        footprints((1, 2, 4, 6, 8), cluster)
    monkeypatch.undo()
    assert len(footprints((2, 1), cluster)) == 299


def test_a_degree_with_too_many_footprints_is_placed_first_fit(small_footprint_limit):
    """Best fit and compact place such a degree where first fit would (one warning line), the
    other degrees from their footprints; the episodes, ``lp-online``'s among them, validate,
    and an exact method stops building as at its deadline and returns the online episode."""
    inst = instance((5, 5, 4), [("cnn", 500.0 * i, 0.5) for i in range(40)])
    model = JctModel(inst.cluster, inst.model)
    table = model.table(inst.graphs["cnn"])
    rng = random.Random(1)
    # one warning line per such degree (8, 9, 12) and episode
    with pytest.warns(UserWarning, match=r"cnn at degree \d+: .* place it first-fit") as said:
        model.menu(table)
        menu = model.menu(table)
        capped = menu.first_fit
        assert {8, 9} <= set(capped) and 2 in menu.spans and not set(capped) & set(menu.spans)
        assert set(capped) | set(menu.spans) == {d for d in range(1, len(table.placed))
                                                 if table.placed[d]}
        for _ in range(20):
            occupied = rng.getrandbits(inst.cluster.num_servers) & rng.getrandbits(
                inst.cluster.num_servers)
            best = model.live_options(table, occupied, "best-fit", None)
            first = model.live_options(table, occupied, "first-fit", None)
            for d in capped:
                assert best.placeable[d] == first.placeable[d]
                assert best.masks[d] == first.masks[d]
        for method, placement in (("tuned", "best-fit"), ("lp-online", "best-fit")):
            assert solve(inst, method, seed=0, placement=placement).validated
        physical = instance((5, 5, 4), [("cnn", 500.0 * i, 0.5) for i in range(40)], "physical")
        assert solve(physical, "min-feasible", seed=0, placement="compact").validated
    assert "cnn at degree 8: " in str(said[0].message)
    with pytest.warns(UserWarning, match="stopped while enumerating footprints|cnn at degree"):
        exact = solve(inst, "cpsat", time_limit=30.0, threads=1, seed=0)
    assert exact.validated and exact.metrics["stopped"].startswith("stopped while enumerating")


def test_ctrl_c_while_the_method_state_is_freed_keeps_the_result(monkeypatch):
    """``solve`` frees its model while Ctrl-C only asks for a stop: freed by its return, a large
    episode's caches took long enough for a Ctrl-C to end the command without its result."""
    from pacopt.solvers import api

    class FreedUnderCtrlC(JctModel):
        def __del__(self):
            request_stop()

    monkeypatch.setattr(api, "JctModel", FreedUnderCtrlC)
    solution = solve(instance((4, 4, 2), [("cnn", 100.0 * i, 0.8) for i in range(20)]),
                     "tuned", seed=0)
    assert solution.validated and solution.interrupted


def test_ctrl_c_while_writing_writes_the_result_and_exits_130(monkeypatch, tmp_path):
    from pacopt.model.solution import Solution
    from pacopt.solvers.commands import solve_command

    real = Solution.save

    def save_under_ctrl_c(self, path):
        request_stop()
        return real(self, path)

    monkeypatch.setattr(Solution, "save", save_under_ctrl_c)
    path = tmp_path / "i.json"
    path.write_text(json.dumps(
        instance((4, 4, 2), [("tiny", 100.0 * i, 0.8) for i in range(10)]).to_dict()))
    assert solve_command([str(path), "--method", "tuned", "--quiet"]) == 130
    written = Solution.load(tmp_path / "i.tuned.result.json")
    assert written.validated and written.arrived == 10


def test_the_agents_free_block_counts_on_a_wide_cluster_are_a_recount():
    """The agent's free-block shares on 8x8x4 (kept up to date from the servers that changed,
    a candidate's taken from the state it adds to) equal counting every block afresh, for
    states far apart, near each other, and occupancies that are no addition to the first; the
    sizes counted under the first occupancy only are right there; and first fit, whose index
    the counts share, still finds a scan's first free block."""
    from pacopt.learned.features import _BlockCounter

    cluster = RampCluster(8, 8, 4)
    counter = _BlockCounter(cluster, (1, 3, 4, 8, 16))
    after = _BlockCounter(cluster, (1, 3, 4, 8, 16), after=(4, 16))  # others: first only
    rng = random.Random(1)
    state = 0
    for _ in range(60):
        if rng.random() < 0.2:
            state = rng.getrandbits(cluster.num_servers) & rng.getrandbits(cluster.num_servers)
        else:
            state ^= 1 << rng.randrange(cluster.num_servers)
        occupancies = [state] + [state | rng.getrandbits(cluster.num_servers)
                                 & rng.getrandbits(cluster.num_servers) for _ in range(3)]
        occupancies.append(rng.getrandbits(cluster.num_servers))  # no addition to the state
        for m in (1, 3, 4, 8, 16):
            blocks = cluster.blocks(m)
            expected = [sum(1 for b in blocks if not b.mask & occ) / len(blocks)
                        for occ in occupancies]
            assert list(counter.free_shares(m, occupancies)) == pytest.approx(expected)
            shares = after.free_shares(m, occupancies)
            assert shares[0] == pytest.approx(expected[0])
            if m in (4, 16):
                assert list(shares) == pytest.approx(expected)
            # the counts share first fit's index: its look-ups stay a scan's
            first = next((b for b in blocks if not b.mask & state), None)
            assert cluster.free_block(m, state) == first


def test_compact_on_a_tiled_cluster_takes_the_fastest_free_footprint_of_any_tile():
    """On 8x8x4 (four 4x4x4 tiles) compact's choice for each degree is as fast as the fastest
    free footprint over every tile's translates, and lies in the tile it names, whichever
    tiles the running jobs hold."""
    from pacopt.model.simulator import OnlineEpisode
    from pacopt.online.policies import make_policy

    data = {"cluster": {"communication_groups": 8, "racks_per_group": 8, "servers_per_rack": 4},
            "model": {"preset": "physical", "placement": "compact"}, "graphs": GRAPHS,
            "jobs": [{"id": f"j{i}", "graph": ("cnn", "tiny")[i % 2], "arrival_ms": 0.5 * i,
                      "max_jct_fraction": (1.0, 0.6, 0.3)[i % 3]} for i in range(40)]}
    inst = instance_from_dict(data)
    tiles = tiling(inst.cluster)
    assert tiles is not None and tiles.num_tiles == 4
    model = JctModel(inst.cluster, inst.model, persist=False)
    episode = OnlineEpisode(inst, model)
    checked, busy_tiles = 0, set()
    while not episode.done:
        decision = episode.decision
        options = decision.options()
        occupied = decision.state.occupied
        busy_tiles.add(sum(1 for local in tiles.local_masks(occupied) if local))
        for d in map(int, np.flatnonzero(options.placeable)):
            counts = decision.table.counts[d]
            free = [tiles.placement(p, t) for p in placers.footprint_placements(
                        decision.graph, counts, tiles.tile) for t in range(tiles.num_tiles)]
            free = [p for p in free if not p.mask & occupied]
            if not free:  # first fit's fallback across tiles: another test's
                continue
            fastest = min(model.timing(decision.graph, counts, p).jct_ms for p in free)
            assert options.jct_ms[d] == pytest.approx(fastest, rel=1e-9)
            assert not options.masks[d] & occupied
            checked += 1
        episode.decide(int(make_policy("para-max").choose(decision)))
    assert checked > 100 and max(busy_tiles) == 4
