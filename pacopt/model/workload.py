"""Workloads: the beta (``max_jct_fraction``) distributions and generated job streams.

The paper's four beta distributions (``docs/model.md#betas``) are built as the
reference (``ddls.distributions``) builds them, with one deliberate difference: the reference
draws the skew-normal samples behind a PMF from numpy's global RNG, so its PMF differs from run to
run (beta B's mean ranges over about 0.27-0.31 across seeds). pacopt pins that construction to
:data:`PMF_SEED`, so a distribution is the same object on every machine; jobs are then sampled
from it with the caller's generator.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import numpy as np
from pydantic import Field, ValidationInfo, field_validator, model_validator

from pacopt.infra.errors import InputError
from pacopt.model.input_spec import MAX_JOBS, MAX_MS, SpecModel, tagged_union

#: Seed of the skew-normal samples a :class:`CustomSkewNorm` PMF is built from.
PMF_SEED = 0
#: Skewness of the paper's skew-normal beta distributions (A is uniform).
PAPER_SKEWNESS = {"B": 5, "C": 0, "D": -5}
#: B-D exactly as :class:`CustomSkewNorm` builds them, stored so that drawing or recognising
#: the paper's betas does not import ``scipy.stats`` (about half a second per process);
#: ``tests/test_workload.py`` rebuilds them and :func:`write_paper_pmfs` rewrites the file.
PAPER_PMFS = Path(__file__).resolve().parents[1] / "data" / "paper_betas.json"


# ----- distributions -----------------------------------------------------------------------------
class DiscreteDistribution:
    """A probability mass function: ``values`` (sorted, distinct) with masses ``probs``.

    Equal values are merged and zero masses dropped, which leaves the distribution unchanged.
    """

    def __init__(self, values: Iterable[float], probs: Iterable[float]) -> None:
        values, inverse = np.unique(np.asarray(values, dtype=float), return_inverse=True)
        probs = np.bincount(inverse, weights=np.asarray(probs, dtype=float))
        keep = probs > 0
        self.values = values[keep]
        self.probs = probs[keep] / probs[keep].sum()
        # Distributions are shared (see paper()), so their arrays must not be edited in place.
        self.values.flags.writeable = False
        self.probs.flags.writeable = False

    @classmethod
    def exact(cls, values: Iterable[float], probs: Iterable[float]) -> DiscreteDistribution:
        """The distribution with exactly these (sorted, distinct) ``values`` and normalised
        ``probs``, bit for bit: stored arrays are not normalised again."""
        dist = cls.__new__(cls)
        dist.values, dist.probs = np.array(values, dtype=float), np.array(probs, dtype=float)
        dist.values.flags.writeable = False
        dist.probs.flags.writeable = False
        return dist

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` independent draws using the caller's generator."""
        return rng.choice(self.values, size=n, p=self.probs)

    @property
    def mean(self) -> float:
        return float(self.values @ self.probs)

    def quantile(self, q: float) -> float:
        """The smallest value whose cumulative mass reaches ``q``."""
        index = np.searchsorted(np.cumsum(self.probs), q)
        return float(self.values[min(index, len(self.values) - 1)])


class Uniform(DiscreteDistribution):
    """Equiprobable over ``lo, lo + 10**-decimals, ..., hi`` (the reference's ``Uniform``).

    The reference writes the grid as ``round(arange(lo, hi + step, step), decimals)``; here it is
    ``lo + step * k`` for exactly ``round((hi - lo) / step) + 1`` values, the same grid without
    the floating-point end point that ``arange`` sometimes adds past ``hi``.
    """

    def __init__(self, lo: float, hi: float, decimals: int = 2) -> None:
        if not lo <= hi:
            raise InputError(f"Uniform: lo must be <= hi, got [{lo}, {hi}]")
        step = 10.0 ** -decimals
        count = round((hi - lo) / step) + 1
        values = np.around(lo + step * np.arange(count), decimals)
        super().__init__(values, np.full(count, 1 / count))


class Fixed(DiscreteDistribution):
    """Always ``value``."""

    def __init__(self, value: float) -> None:
        super().__init__([value], [1.0])


class CustomSkewNorm(DiscreteDistribution):
    """The reference's ``CustomSkewNorm`` (cutoff mode ``resample``, which is really a clamp).

    Draws ``max(50000, 10 * (max_val - min_val) / 10**-decimals)`` samples from
    ``skewnorm(a=skewness, loc=max_val, scale=1)`` (seeded with ``seed``), rescales them to
    ``[0, max_val]`` (subtract the minimum, divide by the maximum, times ``max_val``), clamps
    values <= ``min_val`` to ``min_val``, histograms them into ``num_bins`` bins and puts each
    bin's mass on its right edge rounded to ``decimals``.
    """

    def __init__(self, skewness: float, min_val: float, max_val: float, decimals: int = 2,
                 num_bins: int = 1000, seed: int = PMF_SEED) -> None:
        from scipy.stats import skewnorm  # here: scipy.stats costs most of a second to import

        size = int(max(50000, (max_val - min_val) * 10**decimals * 10))  # >= 10 samples per value
        x = skewnorm.rvs(a=skewness, loc=max_val, size=size, random_state=np.random.default_rng(seed))
        x -= x.min()
        x /= x.max()
        x *= max_val
        x = np.where(x > min_val, x, min_val)
        counts, edges = np.histogram(x, bins=num_bins)
        super().__init__(np.around(edges[1:], decimals), counts / counts.sum())


@lru_cache(maxsize=None)
def paper(name: str) -> DiscreteDistribution:
    """One of the PAC-ML paper's beta distributions: ``"A"`` (uniform 0.1-1) or ``"B"``, ``"C"``,
    ``"D"`` (skew-normal with skewness +5, 0, -5: strict, moderate, lenient deadlines)."""
    if name == "A":
        return Uniform(0.1, 1.0, 2)
    if name in PAPER_SKEWNESS:
        stored = _stored_pmfs().get(name)
        if stored is None:  # stored for other parameters: build it
            return _paper_skew_norm(name)
        return DiscreteDistribution.exact(stored["values"], stored["probs"])
    raise InputError(f"unknown paper beta distribution {name!r}; expected A, B, C or D")


def _paper_skew_norm(name: str) -> CustomSkewNorm:
    return CustomSkewNorm(PAPER_SKEWNESS[name], min_val=0.1, max_val=1.0, decimals=2)


@lru_cache(maxsize=1)
def _stored_pmfs() -> dict[str, dict]:
    """The PMFs in :data:`PAPER_PMFS` that were built with today's skewness and seed."""
    try:
        stored = json.loads(PAPER_PMFS.read_text())
    except (OSError, ValueError):
        return {}
    return {name: pmf for name, pmf in stored.items()
            if pmf.get("skewness") == PAPER_SKEWNESS.get(name) and pmf.get("seed") == PMF_SEED}


def write_paper_pmfs(path: Path = PAPER_PMFS) -> None:
    """Build B-D with :class:`CustomSkewNorm` and store them in ``path`` (exact floats)."""
    pmfs = {}
    for name, skewness in PAPER_SKEWNESS.items():
        dist = _paper_skew_norm(name)
        pmfs[name] = {"skewness": skewness, "seed": PMF_SEED, "values": dist.values.tolist(),
                      "probs": dist.probs.tolist()}
    path.write_text(json.dumps(pmfs, indent=1) + "\n")


# ----- jobs ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobSpec:
    """One job of an instance: which graph, when it arrives (ms) and its beta in (0, 1].

    Two optional fields come from replayed traces (:mod:`pacopt.model.trace`):
    ``training_steps``, the job's own amount of work in training steps (None: the model's
    ``training_steps``; it may be fractional, being a trace duration divided by a step time),
    which scales every JCT of the job and its deadline alike; and ``requested_degree``, the
    degree the job's user asked for (the trace's GPUs), which ``as-requested`` plays. A trace
    job whose deadline is looser than its sequential JCT keeps its beta above 1: clamped to 1,
    the strict deadline test would reject degree 1 by a rounding error on most graphs.
    """

    id: str
    graph: str
    arrival_ms: float
    max_jct_fraction: float
    training_steps: float | None = None
    requested_degree: int | None = None


def require_graph(name: str, known: Iterable[str], where: str) -> None:
    """Raise :class:`InputError` at field ``where`` unless graph ``name`` is one of ``known``."""
    known = list(known)
    if name not in known:
        raise InputError(f"{where}: unknown graph '{name}'; the instance defines: "
                         f"{', '.join(known) or 'no graphs'}")


# ----- the workload section of the format -------------------------------------------------------
#: A max_jct_fraction: the job's deadline is beta x its sequential JCT.
Beta = Annotated[float, Field(gt=0, le=1)]


class UniformBeta(SpecModel):
    """Beta uniform over the grid lo, lo + 10^-decimals, ..., hi."""

    uniform: list[Beta] = Field(min_length=2, max_length=2, description="[lo, hi]")
    decimals: int = Field(2, ge=0, le=6, description="grid step 10^-decimals")

    @model_validator(mode="after")
    def _on_grid(self) -> Self:
        lo, hi = self.uniform
        if lo > hi:
            raise ValueError(f"uniform [lo, hi] must have lo <= hi, got [{lo}, {hi}]")
        for bound in (lo, hi):
            if round(bound, self.decimals) != bound:
                raise ValueError(f"uniform bound {bound} has more than decimals={self.decimals} "
                                 "decimal places")
        return self


class PaperBeta(SpecModel):
    """One of the PAC-ML paper's beta distributions: A uniform 0.1-1; B, C, D skew-normal with
    skewness +5 (strict), 0, -5 (lenient)."""

    paper: Literal["A", "B", "C", "D"]


def _beta_form(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "<fixed>"
    if isinstance(value, dict):
        return "<paper>" if "paper" in value else "<uniform>"
    return None


BetaSpec = tagged_union({"<fixed>": Beta, "<uniform>": UniformBeta, "<paper>": PaperBeta},
                        _beta_form, 'must be a number in (0, 1], {"uniform": [lo, hi], '
                                    '"decimals": d} or {"paper": "A"|"B"|"C"|"D"}')


class WorkloadSpec(SpecModel):
    """A generated job stream: ``num_jobs`` jobs arriving at 0, interarrival_ms, 2 x
    interarrival_ms, ...; each picks a graph at random (uniformly unless ``weights``) and draws its
    beta; reproducible from ``seed``. Generated job ids are w0, w1, ..."""

    graphs: list[str] = Field(min_length=1, description="names of graphs in the instance")
    weights: list[Annotated[float, Field(ge=0)]] | None = Field(
        None, description="relative graph probabilities, one per entry of graphs")
    num_jobs: int = Field(ge=1, le=MAX_JOBS)
    interarrival_ms: float = Field(gt=0, le=MAX_MS, description="time between arrivals (ms)")
    max_jct_fraction: BetaSpec
    seed: int = Field(0, ge=0, description="seed of numpy.random.default_rng")

    @field_validator("weights")
    @classmethod
    def _one_weight_per_graph(cls, weights: list[float] | None, info: ValidationInfo):
        if weights is not None:
            if "graphs" in info.data and len(weights) != len(info.data["graphs"]):
                raise ValueError(f"must give one weight per graph ({len(info.data['graphs'])} "
                                 f"graphs), got {len(weights)} weights")
            if not any(weights):
                raise ValueError("must not all be zero")
        return weights

    def beta_distribution(self) -> DiscreteDistribution:
        """The distribution ``max_jct_fraction`` names."""
        beta = self.max_jct_fraction
        if isinstance(beta, UniformBeta):
            return Uniform(*beta.uniform, beta.decimals)
        if isinstance(beta, PaperBeta):
            return paper(beta.paper)
        return Fixed(beta)


def generate_jobs(workload_spec: WorkloadSpec | Mapping, graph_names: Iterable[str]) -> list[JobSpec]:
    """The jobs of a workload (a :class:`WorkloadSpec` or its JSON dict), in arrival order.

    ``graph_names`` are the graphs the instance defines; naming any other raises
    :class:`InputError`. The same spec always gives the same jobs: one
    ``numpy.random.default_rng(seed)`` draws every graph choice, then every beta.
    """
    spec = (workload_spec if isinstance(workload_spec, WorkloadSpec)
            else WorkloadSpec.parse(workload_spec, ("workload",)))
    known = list(graph_names)
    for i, name in enumerate(spec.graphs):
        require_graph(name, known, f"workload.graphs[{i}]")
    rng = np.random.default_rng(spec.seed)
    weights = np.ones(len(spec.graphs)) if spec.weights is None else np.asarray(spec.weights)
    picks = rng.choice(len(spec.graphs), size=spec.num_jobs, p=weights / weights.sum())
    betas = spec.beta_distribution().sample(rng, spec.num_jobs)
    return [JobSpec(id=f"w{i}", graph=spec.graphs[k], arrival_ms=i * spec.interarrival_ms,
                    max_jct_fraction=float(beta))
            for i, (k, beta) in enumerate(zip(picks, betas))]
