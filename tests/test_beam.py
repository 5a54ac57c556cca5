"""The beam search (pacopt.solvers.beam): validated answers, states merged and released
correctly, its deadline honoured, and better than the rules it is built on where it matters."""

import random
import time

import pytest
from test_best_fit import validated
from test_rollout import contended
from test_simulator import paper_instance

from pacopt.formulations.offline import build_problem
from pacopt.solvers.beam import _State, beam_search
from pacopt.solvers.best_fit import BestFit
from pacopt.solvers.warm import best_warm_start, legal_degrees, online_policies


@pytest.mark.parametrize("preset", ["ddls", "physical"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beams_of_any_width_give_validated_choices(seed, preset):
    problem = build_problem(contended(seed, preset=preset))
    rule = BestFit(problem, 4)
    for width in (1, 5, 50):
        chosen = beam_search(rule, width=width)
        assert chosen and validated(problem, chosen) == []


def test_placements_pick_what_place_picks_for_each_degree():
    """The beam scores all degrees at once; each pick must be the rule's own."""
    problem = build_problem(contended(3, num_jobs=20))
    rule = BestFit(problem, 8)
    servers = problem.instance.cluster.num_servers
    rng = random.Random(0)
    checked = 0
    for _ in range(300):
        j = rng.randrange(len(problem.by_job))
        occupied = rng.getrandbits(servers) & rng.getrandbits(servers)
        free = rule.free(j, occupied)
        picks = rule.placements(j, free, occupied)
        assert [d for d, _ in picks] == sorted(set(rule.options(j)[1][free].tolist()))
        for degree, k in picks:
            assert k == rule.place(j, degree, free, occupied)
            checked += 1
    assert checked > 100


def test_states_release_what_ended_and_merge_on_what_the_future_sees():
    start = _State(0, 0, (), 0.0, 0, None)
    a = start.started(0, 10, end=5.0, mask=0b11, workers=2).started(1, 11, end=9.0, mask=0b100,
                                                                       workers=1)
    assert (a.accepted, a.occupied, a.held, a.workers) == (2, 0b111, 19.0, 3)
    later = a.released(5.0)
    assert (later.occupied, later.held, later.workers) == (0b100, 9.0, 1)
    assert later.choice() == {0: 10, 1: 11}  # what was accepted stays accepted
    # another job on the same servers until the same time: the same state for the future
    b = start.started(2, 20, end=5.0, mask=0b11, workers=2).started(3, 21, end=9.0, mask=0b100,
                                                                      workers=1)
    assert a.key() == b.key() and a.choice() != b.choice()
    assert a.key() != start.started(0, 10, end=5.0, mask=0b11, workers=2).key()


def test_the_first_beam_runs_whatever_the_deadline_and_later_ones_stop_by_it():
    problem = build_problem(contended(4, num_jobs=80))
    rule = BestFit(problem, 4)
    first = beam_search(rule, width=8)
    assert beam_search(rule, width=8, deadline=time.perf_counter()) == first
    started = time.perf_counter()
    widened = beam_search(rule, width=8, deadline=started + 1.0)
    assert time.perf_counter() - started < 1.0 + 2.0  # the first beam and a cut-short one
    assert len(widened) >= len(first) and validated(problem, widened) == []


def test_on_a_paper_episode_the_beam_beats_every_rule_and_leads_the_warm_starts(pipedream_dir):
    """200 jobs of the paper workload (beta A): where capacity binds, keeping many partial
    choices in arrival order beats deciding each job once."""
    problem = build_problem(paper_instance(pipedream_dir, num_jobs=200))
    rules = [BestFit(problem, k) for k in legal_degrees(problem.instance)]
    best_rule = max(len(rule.play()) for rule in rules)
    chosen = beam_search(rules[0], width=100)
    assert validated(problem, chosen) == []
    assert len(chosen) > best_rule
    name, start = best_warm_start(problem, online_policies(problem.instance), best_fit=True,
                                  beam_until=time.perf_counter())
    assert name == "beam search" and len(start) == len(beam_search(rules[0]))
