"""The obvious greedy for the heterogeneous problem, and the step-by-step view it shares with the
learned scheduler.

:class:`Walk` assigns types position by position along the linear order, keeping the open
stage's start, type and least replica count; :meth:`Walk.options` prices each type for the next
position (continue the open stage, or open a new one), so both the greedy and the RL environment
see the same increments. The greedy takes, at each position, the type whose increment in cost per
hour is least (the cheapest type that keeps the stage within the step budget), preferring to
continue the open stage on ties, then the cheaper type.
"""

from __future__ import annotations

import time

import numpy as np

from pacopt.hetero.model import (
    HeteroPlan,
    HeteroProblem,
    infeasible_plan,
    least_replicas,
    plan_from_types,
)


class Walk:
    """A partial assignment of the first ``position`` positions of the linear order."""

    def __init__(self, problem: HeteroProblem):
        self.problem = problem
        self.position = 0
        self.labels: list[int] = []
        self.start = 0            # the open stage's first position
        self.prev: int | None = None  # the type before the open stage
        self.replicas = 0          # the open stage's least replicas (0: no stage yet)
        p = problem
        zero = np.zeros((1, p.num_types))
        self._work = np.vstack([zero, np.cumsum(p.work, axis=0)])
        self._reduce = np.vstack([zero, np.cumsum(p.allreduce, axis=0)])

    @property
    def done(self) -> bool:
        return self.position == self.problem.num_positions

    @property
    def current(self) -> int | None:
        """The open stage's type."""
        return self.labels[-1] if self.labels else None

    def options(self) -> tuple[np.ndarray, np.ndarray]:
        """For each type: the open stage's replicas if the next position takes it, and the increase
        in cost per hour (``inf`` where no replica count <= max_replicas meets the budget)."""
        p, b, K = self.problem, self.position, self.problem.num_types
        current = self.current
        # per type: the stage's first position and inbound terms (the open stage's for its own
        # type, a new stage at b after the open stage's type for the others)
        first = np.full(K, b)
        comm = p.comm[b, current] if current is not None and b > 0 else np.zeros(K)
        latency = p.latency[current] if current is not None and b > 0 else np.zeros(K)
        if current is not None:
            first[current] = self.start
            inbound = self.prev is not None and self.start > 0
            comm = comm.copy()
            latency = latency.copy()
            comm[current] = p.comm[self.start, self.prev, current] if inbound else 0.0
            latency[current] = p.latency[self.prev, current] if inbound else 0.0
        types = np.arange(K)
        replicas = least_replicas(self._work[b + 1] - self._work[first, types], comm, latency,
                                  self._reduce[b + 1] - self._reduce[first, types],
                                  p.step_budget_ms, p.max_replicas)
        held = np.array([self.replicas if k == self.current else 0 for k in range(K)])
        increase = np.where(replicas > 0, p.types.prices * (replicas - held), np.inf)
        return replicas, increase

    def take(self, k: int, replicas: int) -> None:
        """Assign type ``k`` to the next position (``replicas`` from :meth:`options`)."""
        if k != self.current:
            self.start, self.prev = self.position, self.current
        self.labels.append(int(k))
        self.replicas = int(replicas)
        self.position += 1


def solve_greedy(problem: HeteroProblem) -> HeteroPlan:
    """The greedy plan (module docstring); ``infeasible`` if it reaches a position no type can
    take (the problem itself may still be feasible)."""
    started = time.perf_counter()
    walk = Walk(problem)
    prices = problem.types.prices
    while not walk.done:
        replicas, increase = walk.options()
        if not np.isfinite(increase).any():
            return infeasible_plan(problem, "greedy", time.perf_counter() - started,
                                   f"the greedy found no type for position {walk.position}")
        ties = [k for k in range(problem.num_types) if increase[k] == increase.min()]
        k = walk.current if walk.current in ties else min(ties, key=lambda j: prices[j])
        walk.take(k, replicas[k])
    return plan_from_types(problem, walk.labels, "greedy", "heuristic",
                           time.perf_counter() - started)
