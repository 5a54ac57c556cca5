"""Which of the paper's beta distributions (A-D) a workload's betas look like: offline from all
of them (:func:`instance_distribution`, what the ``-given-label`` oracles read) and online from
the arrivals so far (:class:`BetaRecogniser`, what ``tuned`` and ``pac-ml`` read)."""

from __future__ import annotations

import bisect
import math
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from pacopt.model.paper_workload import PAPER_DISTRIBUTIONS
from pacopt.model.workload import paper as paper_beta

if TYPE_CHECKING:
    from pacopt.model.instance import Instance


def nearest_paper_distribution(betas) -> tuple[str, float]:
    """The paper's beta distribution (A-D) closest to a sample of betas, by the Kolmogorov-Smirnov
    distance, and that distance. A paper workload of a few hundred jobs is recognised surely;
    for any other betas it is the closest one (the mean alone cannot tell A from C)."""
    sample = np.sort(np.asarray(betas, dtype=float))
    if not len(sample):
        raise ValueError("no betas to compare")
    best = ("A", math.inf)
    for name in PAPER_DISTRIBUTIONS:
        dist = paper_beta(name)
        grid = np.union1d(dist.values, sample)
        at = np.searchsorted(dist.values, grid, side="right")
        model_cdf = np.concatenate([[0.0], np.cumsum(dist.probs)])[at]
        sample_cdf = np.searchsorted(sample, grid, side="right") / len(sample)
        distance = float(np.max(np.abs(model_cdf - sample_cdf)))
        if distance < best[1]:
            best = (name, distance)
    return best


def instance_distribution(instance: Instance | None) -> str | None:
    """The paper distribution an instance's betas look like (:func:`nearest_paper_distribution`;
    an instance keeps its jobs, not its workload spec), or None without jobs. It reads *every*
    job's beta, future ones included: only the ``-given-label`` variants and offline code may
    use it; an online policy recognises the distribution with :class:`BetaRecogniser`."""
    betas = [job.max_jct_fraction for job in instance.jobs] if instance is not None else []
    return nearest_paper_distribution(betas)[0] if betas else None


#: :class:`BetaRecogniser`'s defaults: arrivals before its first guess, and the posterior
#: probability a guess needs (measured on training-range seeds: ``docs/experiments.md``, Online
#: only).
RECOGNISE_AFTER = 1
RECOGNISE_CONFIDENCE = 0.0
#: The likelihood's grid (betas to 2 decimals, as the paper's) and the mass a beta gets under a
#: distribution that never draws it (so one odd beta cannot rule a distribution out).
_GRID = np.round(np.arange(0, 101) / 100, 2)
_FLOOR = 1e-4


@lru_cache(maxsize=1)
def _log_masses() -> np.ndarray:
    """Per paper distribution (rows, in :data:`PAPER_DISTRIBUTIONS` order), the log of its mass
    on each 2-decimal beta 0.00..1.00 (floored at :data:`_FLOOR`)."""
    out = np.full((len(PAPER_DISTRIBUTIONS), len(_GRID)), _FLOOR)
    for row, name in enumerate(PAPER_DISTRIBUTIONS):
        dist = paper_beta(name)
        np.add.at(out[row], np.clip(np.round(dist.values * 100).astype(int), 0, 100), dist.probs)
    return np.log(out)


class BetaRecogniser:
    """Which of the paper's beta distributions (A-D) the jobs that have arrived *so far* look
    like: what an online policy may know of its workload's label (:func:`instance_distribution`
    reads the future jobs' betas too).

    The rule (``rule="likelihood"``, the default): the most likely distribution of the betas
    seen so far, each beta i.i.d. from it (rounded to 2 decimals, outside 0-1 clipped; a beta a
    distribution never draws gets mass 1e-4 there), with equal prior odds; no guess (None: the
    caller plays its default) before ``after`` arrivals or while the posterior probability of
    the most likely one is below ``confidence``, in which case the last guess stands. With
    ``rule="ks"``, the Kolmogorov-Smirnov-nearest distribution (:func:`nearest_paper_distribution`,
    what the given-label oracles use on all the betas) of the betas so far; ``confidence`` does
    not apply. On paper episodes (seeds 0-39) the likelihood is right after 10 arrivals in at
    least 37 of the 40 of each distribution and after 15 in all; the KS distance after 20 in at
    least 37 of 40.

    The defaults guess from the first arrival on (``after`` 1, ``confidence`` 0), so a caller's
    default never plays. Measured with ``tuned`` on training-range seeds 0-19 (1001 jobs, A-D,
    ddls, first fit; mean blocking): 0.1813, against 0.1842 for KS from the first arrival,
    0.1837-0.1872 for waiting on a default until 90-99 % confident and 0.1872-0.1903 for waiting
    10-20 arrivals (the oracle given the label: 0.1757). Under first fit the first few decisions set a packing that
    lasts, so a default that suits one distribution costs another several points (A's choice
    during C's first arrivals: +0.04); under best fit every rule is within 0.001 of the oracle
    (``docs/experiments.md``, Online only).

    Feed it each arriving job once per decision (:meth:`note`, e.g. from ``choose``); a repeated
    call for the same job is a no-op. A note for an earlier job than the last one (back on the
    episode's own line after a what-if fork, :meth:`OnlineEpisode.fork`) forgets what the fork
    noted after it, so a rollout may share the recogniser with its forks. Each arrival costs
    O(1) (likelihood) or one KS test of the betas so far (``ks``), once per distinct prefix."""

    def __init__(self, after: int = RECOGNISE_AFTER, confidence: float = RECOGNISE_CONFIDENCE,
                 rule: str = "likelihood") -> None:
        if after < 1 or not 0.0 <= confidence < 1.0 or rule not in ("likelihood", "ks"):
            raise ValueError("BetaRecogniser: after >= 1, 0 <= confidence < 1, rule "
                             "'likelihood' or 'ks'")
        self.after, self.confidence, self.rule = after, confidence, rule
        self.reset()

    def reset(self) -> None:
        """A new episode: nothing has arrived."""
        self._jobs: list[tuple[int, float]] = []  # (job index, beta), in arrival order
        self._loglik: list[np.ndarray] = []  # per arrival: the log-likelihoods of A-D so far
        self._guesses: list[str | None] = []  # per arrival: the guess once it had arrived
        self._count = 0  # how many of them had arrived at the last note

    def note(self, job_index: int, beta: float) -> None:
        """Job ``job_index`` arrives now with ``beta`` (see the class doc)."""
        jobs = self._jobs
        position = bisect.bisect_left(jobs, job_index, key=lambda job: job[0])
        entry = (int(job_index), float(beta))
        self._count = position + 1
        if position < len(jobs) and jobs[position] == entry:
            return  # known (a repeated call, or back on a line already seen)
        del jobs[position:], self._loglik[position:], self._guesses[position:]
        jobs.append(entry)
        k = min(max(round(entry[1] * 100), 0), 100)
        loglik = _log_masses()[:, k] + (self._loglik[-1] if self._loglik else 0.0)
        self._loglik.append(loglik)
        last = self._guesses[-1] if self._guesses else None
        self._guesses.append(self._decide(len(jobs), loglik, last))

    def _decide(self, n: int, loglik: np.ndarray, last: str | None) -> str | None:
        if n < self.after:
            return None
        if self.rule == "ks":
            return nearest_paper_distribution([beta for _, beta in self._jobs])[0]
        posterior = np.exp(loglik - loglik.max())
        best = int(np.argmax(posterior))
        if posterior[best] / posterior.sum() < self.confidence:
            return last
        return PAPER_DISTRIBUTIONS[best]

    @property
    def arrived(self) -> int:
        """Jobs arrived up to the last one noted."""
        return self._count

    @property
    def guess(self) -> str | None:
        """The distribution (A-D) the arrivals so far look like; None before a first guess."""
        return self._guesses[self._count - 1] if self._count else None
