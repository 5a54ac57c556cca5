"""Beta distributions and generated workloads."""

import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from pacopt.infra.errors import InputError
from pacopt.model.workload import (
    PAPER_SKEWNESS,
    CustomSkewNorm,
    Fixed,
    Uniform,
    WorkloadSpec,
    generate_jobs,
    paper,
    write_paper_pmfs,
)

# The paper digest's table (section 6.3): mean, median, 10th and 90th percentiles.
DIGEST = {"A": (0.55, 0.55, 0.19, 0.91), "B": (0.27, 0.25, 0.14, 0.44),
          "C": (0.50, 0.50, 0.35, 0.65), "D": (0.72, 0.74, 0.56, 0.86)}
GRAPHS = ["alexnet", "vgg16", "gnmt"]


def spec(**changes):
    return {"graphs": GRAPHS, "num_jobs": 50, "interarrival_ms": 1000,
            "max_jct_fraction": {"paper": "A"}, "seed": 0, **changes}


def has_decimals(values, decimals):
    return np.array_equal(np.round(values, decimals), values)


# ----- distributions -----------------------------------------------------------------------------
def test_uniform_pmf_is_the_reference_grid():
    dist = Uniform(0.1, 1.0, 2)
    assert len(dist.values) == 91 and np.allclose(dist.probs, 1 / 91)
    assert dist.values[0] == 0.1 and dist.values[-1] == 1.0 and has_decimals(dist.values, 2)
    assert dist.mean == pytest.approx(0.55)
    assert paper("A").values.tolist() == dist.values.tolist()


def test_uniform_grid_never_overshoots_hi():
    # numpy's arange(0.01, 0.08, 0.01) has 8 values; the grid 0.01..0.07 has 7.
    assert Uniform(0.01, 0.07, 2).values.tolist() == [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07]


def test_fixed():
    dist = Fixed(0.3)
    assert dist.values.tolist() == [0.3] and dist.probs.tolist() == [1.0]
    assert (dist.sample(np.random.default_rng(0), 5) == 0.3).all()


@pytest.mark.parametrize("name", "ABCD")
def test_paper_distributions_match_the_digest(name):
    dist = paper(name)
    assert dist.values.min() >= 0.1 and dist.values.max() <= 1.0
    assert has_decimals(dist.values, 2) and dist.probs.sum() == pytest.approx(1)
    draws = dist.sample(np.random.default_rng(7), 200_000)
    mean, median, p10, p90 = DIGEST[name]
    assert draws.mean() == pytest.approx(mean, abs=0.02)
    assert dist.quantile(0.5) == pytest.approx(median, abs=0.02)
    assert dist.quantile(0.1) == pytest.approx(p10, abs=0.03)
    assert dist.quantile(0.9) == pytest.approx(p90, abs=0.03)
    assert set(np.unique(draws)) <= set(dist.values)


def test_skew_norm_pmf_is_deterministic_and_seeded():
    a, b = CustomSkewNorm(5, 0.1, 1.0, 2), CustomSkewNorm(5, 0.1, 1.0, 2)
    assert np.array_equal(a.values, b.values) and np.array_equal(a.probs, b.probs)
    assert np.array_equal(a.probs, paper("B").probs)
    assert CustomSkewNorm(5, 0.1, 1.0, 2, seed=1).mean != pytest.approx(a.mean, abs=1e-3)


@pytest.mark.parametrize("name", sorted(PAPER_SKEWNESS))
def test_stored_paper_pmfs_are_the_skew_normal_ones_bit_for_bit(name, tmp_path):
    built = CustomSkewNorm(PAPER_SKEWNESS[name], 0.1, 1.0, 2)
    assert np.array_equal(paper(name).values, built.values), "rewrite: write_paper_pmfs()"
    assert np.array_equal(paper(name).probs, built.probs), "rewrite: write_paper_pmfs()"
    write_paper_pmfs(tmp_path / "pmfs.json")  # the writer stores what it built
    assert (tmp_path / "pmfs.json").read_text().count('"skewness"') == len(PAPER_SKEWNESS)


def test_drawing_and_recognising_paper_betas_do_not_import_scipy_stats():
    code = ("import sys; from pacopt.model.workload import paper; "
            "from pacopt.online.recognise import BetaRecogniser; [paper(n) for n in 'ABCD']; "
            "r = BetaRecogniser(); r.note(0, 0.3); r.guess; print('scipy.stats' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_shared_distributions_are_read_only():
    with pytest.raises(ValueError):
        paper("B").probs[0] = 1.0


def test_unknown_paper_distribution():
    with pytest.raises(InputError, match="'E'"):
        paper("E")


# ----- generated jobs ----------------------------------------------------------------------------
def test_jobs_are_reproducible_from_the_seed():
    jobs = generate_jobs(spec(), GRAPHS)
    assert jobs == generate_jobs(spec(), GRAPHS)
    assert jobs == generate_jobs(WorkloadSpec.parse(spec()), GRAPHS)
    assert jobs != generate_jobs(spec(seed=1), GRAPHS)
    assert [j.id for j in jobs] == [f"w{i}" for i in range(50)]
    assert [j.arrival_ms for j in jobs] == [1000.0 * i for i in range(50)]
    assert {j.graph for j in jobs} == set(GRAPHS)
    betas = np.array([j.max_jct_fraction for j in jobs])
    assert betas.min() >= 0.1 and betas.max() <= 1.0 and has_decimals(betas, 2)


def test_graphs_are_uniform_without_weights():
    counts = Counter(j.graph for j in generate_jobs(spec(num_jobs=6000), GRAPHS))
    assert all(abs(counts[g] / 6000 - 1 / 3) < 0.03 for g in GRAPHS)


def test_weights_are_respected():
    jobs = generate_jobs(spec(num_jobs=4000, weights=[3, 1, 0]), GRAPHS)
    counts = Counter(j.graph for j in jobs)
    assert counts["gnmt"] == 0
    assert counts["alexnet"] / 4000 == pytest.approx(0.75, abs=0.03)


@pytest.mark.parametrize("beta, check", [
    (0.4, lambda b: (b == 0.4).all()),
    ({"uniform": [0.2, 0.3]}, lambda b: b.min() >= 0.2 and b.max() <= 0.3 and has_decimals(b, 2)),
    ({"uniform": [0.2, 0.8], "decimals": 1},
     lambda b: set(b) == {0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}),
    ({"paper": "D"}, lambda b: b.mean() > 0.6),
])
def test_beta_specs(beta, check):
    jobs = generate_jobs(spec(num_jobs=500, max_jct_fraction=beta), GRAPHS)
    assert check(np.array([j.max_jct_fraction for j in jobs]))


@pytest.mark.parametrize("changes, fragments", [
    ({"graphs": ["alexnet", "resnet"]}, ["workload.graphs[1]", "unknown graph 'resnet'"]),
    ({"weights": [1, 2]}, ["workload.weights", "one weight per graph"]),
    ({"weights": [0, 0, 0]}, ["workload.weights", "not all be zero"]),
    ({"weights": [1, -1, 1]}, ["workload.weights[1]", "greater than or equal to 0"]),
    ({"interarrival_ms": 0}, ["workload.interarrival_ms", "greater than 0"]),
    ({"num_jobs": 0}, ["workload.num_jobs"]),
    ({"seed": "x"}, ["workload.seed", "valid integer"]),
    ({"max_jct_fraction": 1.5}, ["workload.max_jct_fraction", "less than or equal to 1"]),
    ({"max_jct_fraction": "A"}, ["workload.max_jct_fraction", '{"paper": "A"|"B"|"C"|"D"}']),
    ({"max_jct_fraction": {"paper": "E"}}, ["workload.max_jct_fraction.paper", "'A'"]),
    ({"max_jct_fraction": {"uniform": [0.5, 0.2]}}, ["workload.max_jct_fraction", "lo <= hi"]),
    ({"max_jct_fraction": {"uniform": [0, 0.2]}}, ["workload.max_jct_fraction.uniform[0]"]),
    ({"max_jct_fraction": {"uniform": [0.105, 0.2]}}, ["workload.max_jct_fraction", "0.105"]),
    ({"max_jct_fraction": {"unifrom": [0.1, 0.2]}}, ["max_jct_fraction.unifrom", "'uniform'"]),
])
def test_bad_workloads_name_the_field(changes, fragments):
    with pytest.raises(InputError) as info:
        generate_jobs(spec(**changes), GRAPHS)
    for fragment in fragments:
        assert fragment in str(info.value)
