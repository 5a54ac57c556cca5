"""Placers as a choice of the online simulator (pacopt.model.placers): best fit is the offline
rule's placement, every placer's placements validate, explicit placements are checked, the
placer is a flag of solve and a field of the instance, and first-fit stays the default."""

import json
from dataclasses import replace

import numpy as np
import pytest
from test_best_fit import TWO_OPS
from test_rollout import contended

from pacopt.cli import solve_main
from pacopt.formulations.offline import build_problem
from pacopt.infra.errors import InputError
from pacopt.model.decision import Placed
from pacopt.model.first_fit import Placement
from pacopt.model.instance import instance_from_dict
from pacopt.model.jct import JctModel
from pacopt.model.pipedream import read_pipedream
from pacopt.model.placers import (
    PLACERS,
    InvalidPlacement,
    check_placer,
    footprint_placements,
    free_block_score,
)
from pacopt.model.settings import ModelSettings
from pacopt.model.simulator import OnlineEpisode, simulate
from pacopt.model.solution import Solution
from pacopt.model.topology import RampCluster
from pacopt.online.policies import make_policy, tuned_basis, tuned_choice
from pacopt.solvers.api import solve
from pacopt.solvers.best_fit import BestFit
from pacopt.solvers.validate import find_problems


def placed(instance, placer):
    return replace(instance, model=replace(instance.model, placement=placer))


def choices(solution):
    return [(j.degree, tuple(j.workers)) if j.accepted else None for j in solution.jobs]


@pytest.mark.parametrize("preset", ["ddls", "physical"])
@pytest.mark.parametrize("seed,horizon", [(0, None), (1, 7000.0)])
@pytest.mark.parametrize("k", [3, 8])
def test_online_best_fit_makes_the_offline_rules_choices_job_for_job(seed, horizon, k, preset):
    """The offline rule's options are the footprints that meet the deadline and end by the
    horizon; online, best fit prefers exactly those footprints and the rule the degrees that
    end by the horizon, so the two agree on every job."""
    instance = placed(contended(seed, num_jobs=60, preset=preset), "best-fit")
    instance = replace(instance, horizon_ms=horizon)
    model = JctModel(instance.cluster, instance.model)
    problem = build_problem(instance, model)
    chosen = BestFit(problem, k).play()
    offline = [None] * len(instance.jobs)
    for j, option in chosen.items():
        o = problem.options[option]
        offline[j] = (o.degree, tuple(instance.cluster.server_name(s)
                                      for s in o.placement.workers()))
    online = simulate(instance, make_policy(f"fixed-or-min:{k}", instance), seed=0, model=model)
    assert choices(online) == offline
    assert sum(j.accepted for j in online.jobs) == len(chosen) > 0


@pytest.mark.parametrize("preset,placer", [("ddls", "first-fit"), ("ddls", "best-fit"),
                                           ("physical", "first-fit"), ("physical", "best-fit"),
                                           ("physical", "compact")])
def test_every_placers_placements_validate(preset, placer):
    instance = placed(contended(1, num_jobs=50, preset=preset), placer)
    for policy in ("para-max", "min-feasible", "fixed-or-min:4", "random"):
        solution = solve(instance, policy, seed=1)
        assert solution.validated, solution.metrics.get("validation_problems")
        assert solution.placement == placer


def test_best_fit_blocks_less_than_first_fit_on_a_contended_episode():
    instance = contended(2, num_jobs=80, interarrival_ms=100.0)
    first = simulate(instance, make_policy("fixed-or-min:8", instance), seed=0)
    best = simulate(placed(instance, "best-fit"), make_policy("fixed-or-min:8", instance), seed=0)
    assert best.accepted >= first.accepted


def test_first_fit_is_the_default_and_an_explicit_first_fit_changes_nothing():
    instance = contended(4)
    assert instance.model.placement == "first-fit"
    default = simulate(instance, make_policy("min-feasible"), seed=0)
    explicit = simulate(placed(instance, "first-fit"), make_policy("min-feasible"), seed=0)
    assert choices(default) == choices(explicit)
    assert [j.blocks for j in default.jobs] == [j.blocks for j in explicit.jobs]
    assert default.placement == "first-fit"


def test_compact_takes_the_fastest_free_footprint():
    instance = placed(contended(0, num_jobs=30, preset="physical"), "compact")
    model = JctModel(instance.cluster, instance.model)
    episode = OnlineEpisode(instance, model)
    checked = 0
    while not episode.done:
        decision = episode.decision
        options = decision.options()
        for d in np.flatnonzero(options.placeable):
            counts = decision.table.counts[d]
            free = [p for p in footprint_placements(decision.graph, counts, instance.cluster)
                    if not p.mask & decision.state.occupied]
            fastest = min(model.timing(decision.graph, counts, p).jct_ms for p in free)
            assert options.jct_ms[d] == pytest.approx(fastest, rel=1e-9)
            checked += 1
        episode.decide(int(make_policy("min-feasible").choose(decision)))
    assert checked > 30


def test_a_decision_offers_each_degree_with_its_costs():
    instance = placed(contended(5, num_jobs=20), "best-fit")
    episode = OnlineEpisode(instance)
    for _ in range(8):
        episode.decide(int(make_policy("fixed-or-min:4").choose(episode.decision)))
    decision = episode.decision
    offers = decision.offers()
    assert offers and [o.degree for o in offers] == list(decision.valid_degrees)
    scorer = free_block_score(instance.cluster)
    for offer in offers:
        assert offer.placement.mask & decision.state.occupied == 0
        assert offer.workers == offer.placement.num_workers
        assert offer.free_blocks == pytest.approx(
            scorer.left([offer.placement.mask], decision.state.occupied)[0])
        # best fit keeps the most: no free footprint of the degree leaves more
        others = [p.mask for p in footprint_placements(decision.graph,
                                                       decision.table.counts[offer.degree],
                                                       instance.cluster)
                  if not p.mask & decision.state.occupied]
        assert offer.free_blocks >= scorer.left(others, decision.state.occupied).max() - 1e-4
    # first fit offers the same costs, computed on demand
    first = OnlineEpisode(contended(5, num_jobs=20))
    left = first.decision.free_blocks()
    assert np.isnan(left[0]) and np.isfinite(left[first.decision.valid_degrees[0]])


class PlaceItMyself:
    """A policy placing every job itself: the first offer in time, or a given bad placement."""

    name = "own"

    def __init__(self, bad=None):
        self.bad = bad

    def reset(self, seed):
        pass

    def choose(self, decision):
        if self.bad is not None:
            return self.bad(decision)
        offer = next((o for o in decision.offers() if o.jct_ms <= decision.deadline_ms), None)
        return Placed(offer.degree, offer.placement) if offer else 0


def test_a_policy_may_place_its_jobs_itself():
    instance = contended(6, num_jobs=30)
    solution = simulate(instance, PlaceItMyself(), seed=0)
    assert solution.accepted > 0 and find_problems(instance, solution) == []


def test_an_explicit_placement_on_busy_servers_is_an_error():
    instance = instance_from_dict({"graphs": {"g": TWO_OPS}, "jobs": [
        {"id": f"j{i}", "graph": "g", "arrival_ms": 0.1 * i, "max_jct_fraction": 1.0}
        for i in range(2)]})
    episode = OnlineEpisode(instance)
    taken = episode.decision.placement(4)
    assert episode.decide(Placed(4, taken)).accepted
    with pytest.raises(InvalidPlacement, match=r"job 'j1' at degree 4: server 0-0-0 is not "
                                               r"free \(job 'j0' holds it\)"):
        episode.decide(Placed(4, taken))
    assert episode.decision.job_id == "j1"  # nothing happened: the policy can be fixed


def test_an_explicit_placement_that_is_no_ramp_block_is_an_error():
    instance = instance_from_dict({"graphs": {"g": TWO_OPS}, "jobs": [
        {"id": "j0", "graph": "g", "arrival_ms": 0.0, "max_jct_fraction": 1.0}]})
    cluster = instance.cluster
    four = cluster.blocks(4)[0]
    # an L-shaped set of 4 servers with a 4-block's label: not a RAMP block
    fake = replace(four, servers=(0, 1, 2, 9), mask=(1 << 0) | (1 << 1) | (1 << 2) | (1 << 9))
    episode = OnlineEpisode(instance)
    with pytest.raises(InvalidPlacement, match="not a valid RAMP block for 4 sub-ops"):
        episode.decide(Placed(4, Placement((fake, fake))))
    with pytest.raises(InvalidPlacement, match="one block per op"):
        episode.decide(Placed(4, Placement((four,))))
    with pytest.raises(InvalidPlacement, match="not a valid RAMP block for 2 sub-ops"):
        episode.decide(Placed(2, Placement((four, four))))  # a 4-block for ops split 2 ways
    with pytest.raises(ValueError, match="must be in 1..16"):
        episode.decide(Placed(0, Placement((four, four))))
    record = episode.decide(Placed(4, Placement((four, four))))
    assert record.accepted and record.blocks == [four.label] * 2


@pytest.mark.parametrize("preset", ["ddls", "physical"])
def test_placers_handle_clusters_of_more_than_64_servers(preset):
    data = {"cluster": {"communication_groups": 8, "racks_per_group": 8, "servers_per_rack": 2},
            "model": {"preset": preset, "placement": "best-fit"}, "graphs": {"g": TWO_OPS},
            "jobs": [{"id": f"j{i}", "graph": "g", "arrival_ms": 0.1 * i,
                      "max_jct_fraction": beta} for i, beta in enumerate([1.0, 0.3, 0.1, 0.5] * 8)]}
    instance = instance_from_dict(data)
    solution = solve(instance, "fixed-or-min:16", seed=0)
    assert solution.validated and solution.accepted == 8  # 8 x 16 = every server
    assert any(int(w.split("-")[0]) >= 4 for j in solution.jobs for w in j.workers)


def test_the_instance_names_its_placer_and_the_flag_wins():
    instance = instance_from_dict({"model": {"placement": "best-fit"}, "graphs": {"g": TWO_OPS},
                                   "jobs": [{"id": "j0", "graph": "g", "arrival_ms": 0.0,
                                             "max_jct_fraction": 1.0}]})
    assert instance.model.placement == "best-fit"
    assert solve(instance, "min-feasible", seed=0).placement == "best-fit"
    assert solve(instance, "min-feasible", seed=0, placement="first-fit").placement == "first-fit"
    assert instance.to_dict()["model"]["placement"] == "best-fit"
    with pytest.raises(InputError, match="model: placer 'compact' does not fit the 'ddls'"):
        instance_from_dict({"model": {"placement": "compact"}, "graphs": {"g": TWO_OPS},
                            "jobs": [{"id": "j0", "graph": "g", "arrival_ms": 0.0,
                                      "max_jct_fraction": 1.0}]})
    with pytest.raises(InputError, match="--placement: unknown placer 'worst-fit'"):
        solve(instance, "min-feasible", placement="worst-fit")
    with pytest.raises(InputError, match="--placement applies to online methods only"):
        solve(instance, "cpsat", placement="best-fit")
    assert set(PLACERS) == {"first-fit", "best-fit", "compact"}
    assert check_placer("compact", "physical") == "compact"


def test_the_result_records_its_placer(tmp_path):
    instance = placed(contended(7, num_jobs=10), "best-fit")
    solution = solve(instance, "min-feasible", seed=0)
    path = tmp_path / "r.json"
    solution.save(path)
    assert json.loads(path.read_text())["placement"] == "best-fit"
    assert Solution.load(path).placement == "best-fit"
    offline = solve(contended(7, num_jobs=10), "cpsat", time_limit=5, threads=1, seed=0)
    assert offline.placement == "offline"


@pytest.fixture
def instance_file(tmp_path):
    path = tmp_path / "inst.json"
    path.write_text(json.dumps({"graphs": {"g": TWO_OPS}, "jobs": [
        {"id": "j0", "graph": "g", "arrival_ms": 0.0, "max_jct_fraction": 1.0}]}))
    return path


@pytest.mark.parametrize("flag,message", [
    ("worst-fit", "--placement: unknown placer 'worst-fit'; known: first-fit, best-fit, compact"),
    ("compact", "--placement: placer 'compact' does not fit the 'ddls' preset"),
])
def test_a_bad_placement_flag_is_one_line_and_exit_2_before_any_work(instance_file, capsys,
                                                                     flag, message):
    out = instance_file.with_name("out.json")
    code = solve_main([str(instance_file), "--placement", flag, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err
    assert not out.exists()


def test_the_placement_flag_runs_and_is_summarised(instance_file, capsys):
    out = instance_file.with_name("out.json")
    assert solve_main([str(instance_file), "--placement", "best-fit", "--out",
                     str(out)]) == 0
    assert "placement           best-fit" in capsys.readouterr().out
    assert json.loads(out.read_text())["placement"] == "best-fit"
    assert solve_main([str(instance_file), "--method", "cpsat", "--placement",
                     "best-fit"]) == 2


def test_tuned_is_chosen_per_preset_and_placer():
    for preset in ("ddls", "physical"):
        for placer in ("first-fit", "best-fit"):
            assert tuned_basis(preset, placer) == (preset, placer)
            for dist in "ABCD":
                make_policy(tuned_choice(dist, preset, placer))  # a valid name
    assert tuned_basis("physical", "compact") == ("physical", "compact")
    instance = placed(contended(0, num_jobs=10), "best-fit")
    policy = make_policy("tuned", instance)
    assert policy.tuned_placer == "best-fit"
    assert policy.choices == {d: tuned_choice(d, "ddls", "best-fit") for d in "ABCD"}
    oracle = make_policy("tuned-given-label", instance)
    assert oracle.tuned_placer == "best-fit"
    assert oracle.choice == tuned_choice(oracle.distribution, "ddls", "best-fit")


@pytest.mark.parametrize("cluster", [RampCluster(), RampCluster(8, 4, 4)])  # one tile, tiled
@pytest.mark.parametrize("preset,placer", [("ddls", "best-fit"), ("physical", "best-fit"),
                                           ("physical", "compact")])
def test_one_degree_read_alone_is_that_degree_of_the_whole_table(pipedream_dir, cluster,
                                                                 preset, placer):
    """``JctModel.menu_degree`` (best fit and compact, a degree read alone, in any order) gives
    each degree's entries of ``live_options``, and the table finished after some degrees were
    read is the one built at once, free blocks included."""
    rng = np.random.default_rng(7)
    graph = read_pipedream(pipedream_dir / "gnmt.txt")
    for _ in range(4):
        whole, alone = (JctModel(cluster, ModelSettings(preset=preset), persist=False)
                        for _ in range(2))
        table, table_alone = whole.table(graph), alone.table(graph)
        occupied = sum(1 << s for s in range(cluster.num_servers) if rng.random() < 0.4)
        deadline = float(rng.uniform(0.1, 0.8)) * table.seq_jct_ms
        options = whole.live_options(table, occupied, placer, deadline)
        degrees = [int(d) for d in rng.permutation(np.arange(1, table.max_degree + 1))]
        for d in degrees[:len(degrees) // 2]:
            placeable, jct, placement = alone.menu_degree(table_alone, occupied, placer,
                                                          deadline, d)
            assert placeable == options.placeable[d]
            assert jct == options.jct_ms[d]
            assert (placement is None) == (not placeable)
            if placeable:
                assert placement.blocks == options.placements[d].blocks
        finished = alone.live_options(table_alone, occupied, placer, deadline)
        for field in ("placeable", "workers", "jct_ms", "free_blocks"):
            np.testing.assert_array_equal(getattr(finished, field), getattr(options, field))
        assert finished.masks == options.masks
