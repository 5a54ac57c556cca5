"""Online means online: no decision, checkpoint choice or rule choice reads a job that has not
arrived. Two instances share their first jobs and differ after them (other betas,
graphs and requested degrees, so that the distribution of *all* their betas differs); every
online method of the registry, under every placer of the preset, must decide the shared jobs
alike. The ``-given-label`` oracles, which read every job's beta, must not: the test can fail."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pacopt.infra.errors import InputError
from pacopt.learned.agent import TRACE
from pacopt.model.paper_workload import paper_instance
from pacopt.model.placers import PLACERS, check_placer
from pacopt.model.simulator import simulate
from pacopt.model.workload import paper as paper_beta
from pacopt.online.policies import make_policy
from pacopt.online.recognise import (
    BetaRecogniser,
    instance_distribution,
    nearest_paper_distribution,
)
from pacopt.solvers.api import METHODS, solve

SHARED = 40  # jobs both instances have in common, first
TOTAL = 100


@pytest.fixture(scope="module")
def twins(pipedream_dir):
    """Two instances with the same first SHARED jobs (beta A), then B-like betas in one and
    C-like ones in the other, with other graphs and requested degrees too (B plays the general
    checkpoint, C its fine-tune)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PACOPT_PIPEDREAM_DIR", str(pipedream_dir))
        base = paper_instance("A", 3, num_jobs=TOTAL)
    rng = np.random.default_rng(7)
    graphs = sorted(base.graphs)
    shared = [replace(job, requested_degree=int(rng.choice([1, 2, 4, 8])))
              for job in base.jobs[:SHARED]]

    def with_future(dist: str):
        betas = paper_beta(dist).sample(rng, TOTAL - SHARED)
        return replace(base, jobs=shared + [
            replace(job, max_jct_fraction=float(beta), graph=str(rng.choice(graphs)),
                    requested_degree=int(rng.choice([1, 2, 4, 8, 16])))
            for job, beta in zip(base.jobs[SHARED:], betas)])

    first, second = with_future("B"), with_future("C")
    # the future changes what reading all the betas says
    assert instance_distribution(first) == "B" and instance_distribution(second) == "C"
    return first, second


@pytest.fixture(scope="module")
def paper_twins(twins):
    """The twins without requested degrees: jobs of the paper's workload, which ``pac-ml`` plays
    with its paper agents (a job with a requested degree comes from a trace: its trace agent)."""
    return tuple(replace(instance, jobs=[replace(job, requested_degree=None)
                                         for job in instance.jobs]) for instance in twins)


def online_methods(reads_future: bool) -> list[str]:
    """Every registered online method (a family at one parameter), oracles or the others."""
    out = []
    for name, entry in METHODS.items():
        if entry.online and entry.reads_future == reads_future:
            out.append(name.replace(":K", ":4"))
    return out


def decisions(instance, method: str, placer: str) -> list[tuple]:
    solution = solve(instance, method, seed=0, placement=placer)
    assert solution.validated, (method, placer)
    return [(job.id, job.degree, tuple(job.workers or ()), job.reason)
            for job in solution.jobs[:SHARED]]


def placers(preset: str) -> list[str]:
    out = []
    for placer in PLACERS:
        try:
            check_placer(placer, preset, "placer")
        except InputError:
            continue
        out.append(placer)
    return out


@pytest.mark.parametrize("method", online_methods(reads_future=False))
def test_no_online_method_reads_a_job_before_it_arrives(twins, paper_twins, method):
    for first, second in [twins] + [paper_twins] * method.startswith("pac-ml"):
        for placer in placers(first.model.preset):
            assert decisions(first, method, placer) == decisions(second, method, placer), \
                f"{method} under {placer} decided a shared job by a job still to come"


@pytest.mark.parametrize("method", ["tuned", "min-feasible"])
def test_online_under_the_physical_presets_placers(twins, method):
    """The same under ``physical`` (its own tuning, and ``compact``, a placer of its own)."""
    first, second = (replace(instance, model=replace(instance.model, preset="physical"))
                     for instance in twins)
    for placer in placers("physical"):
        assert decisions(first, method, placer) == decisions(second, method, placer), \
            f"{method} under physical {placer} decided a shared job by a job still to come"


@pytest.mark.parametrize("method", online_methods(reads_future=True))
def test_the_given_label_oracles_do_read_the_future(paper_twins, method):
    """The same check fails for the given-label oracles: the test above would catch a policy
    that reads the label."""
    assert method in ("tuned-given-label", "pac-ml-given-label")
    first, second = paper_twins
    assert decisions(first, method, "first-fit") != decisions(second, method, "first-fit")


def test_tuned_switches_with_what_has_arrived(twins):
    """The shared jobs are A-like; what arrives after them decides the last choice (the C-like
    future moves ``tuned`` to C's)."""
    ends = []
    for instance in twins:
        policy = make_policy("tuned", instance)
        solution = simulate(instance, policy, seed=0)
        assert solution.method == policy.name and policy.name.startswith("tuned(online: ")
        assert sum(policy.played.values()) == len(instance.jobs)
        ends.append(policy.distribution)
    assert ends[0] != ends[1] == "C"


def test_pac_ml_plays_its_trace_agent_on_jobs_from_a_trace(twins, paper_twins):
    """A job that carries its user's requested degree comes from a trace: the shipped trace
    agent decides it; the paper's jobs are left to the paper agents."""
    for method in ("pac-ml", "pac-ml-given-label"):
        traced, paper = (solve(pair[0], method, seed=0) for pair in (twins, paper_twins))
        assert traced.validated and paper.validated
        assert list(traced.metrics["checkpoints"]) == [f"{TRACE}-ddls.zip"], method
        assert f"{TRACE}-ddls.zip" not in paper.metrics["checkpoints"], method


@pytest.mark.parametrize("rule", ["likelihood", "ks"])
def test_the_recogniser_sees_only_the_prefix(rule):
    rng = np.random.default_rng(1)
    past = list(paper_beta("A").sample(rng, 30))
    futures = [past + list(paper_beta(d).sample(rng, 100)) for d in "BCD"]
    seen = []
    for betas in futures:
        recogniser = BetaRecogniser(after=5, rule=rule)
        guesses = []
        for i, beta in enumerate(betas):
            recogniser.note(i, beta)
            recogniser.note(i, beta)  # a repeated call changes nothing
            assert recogniser.arrived == i + 1
            guesses.append(recogniser.guess)
        assert guesses[:4] == [None] * 4
        if rule == "ks":
            assert guesses[-1] == nearest_paper_distribution(betas)[0]
        seen.append(guesses)
    assert seen[0][:30] == seen[1][:30] == seen[2][:30]  # the past alone decides
    assert [guesses[-1] for guesses in seen] == ["B", "C", "D"]  # the future, once arrived


@pytest.mark.parametrize("dist", ["A", "B", "C", "D"])
def test_the_likelihood_recognises_a_paper_sample_and_waits_for_confidence(dist):
    betas = paper_beta(dist).sample(np.random.default_rng(11), 300)
    recogniser = BetaRecogniser(confidence=0.99)
    for i, beta in enumerate(betas):
        recogniser.note(i, beta)
        if i == 0:
            assert recogniser.guess is None  # one beta is never 99 % sure
    assert recogniser.guess == dist


def test_the_recogniser_forgets_a_forks_future():
    """A what-if fork notes later jobs; back on the episode's line the guess is the prefix's."""
    rng = np.random.default_rng(2)
    past = list(paper_beta("D").sample(rng, 30))
    recogniser = BetaRecogniser(after=5)
    for i, beta in enumerate(past):
        recogniser.note(i, beta)
    assert recogniser.guess == "D"
    fork = list(paper_beta("B").sample(rng, 200))
    for i, beta in enumerate(fork, start=len(past)):
        recogniser.note(i, beta)
    assert recogniser.guess == "B"  # the fork's own view (its sampled future)
    recogniser.note(len(past), 0.95)  # back on the line: the next real arrival
    assert recogniser.arrived == len(past) + 1
    assert recogniser.guess == nearest_paper_distribution(past + [0.95])[0] == "D"
