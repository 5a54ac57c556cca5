"""Episode metrics of a solution (the analysis layer builds its studies on these).

Definitions:
- ``blocking_rate`` = blocked / arrived; ``acceptance_rate`` = accepted / arrived;
- ``episode_ms``: from 0 to the last arrival or completion, whichever is later, cut at the horizon
  if the instance has one (the reference's episode also ends once every job is through).
  Measured over the whole horizon instead, a run whose jobs end long before it would have its
  worker utilisation diluted by the idle time after its last job (``docs/experiments.md``);
- ``throughput_jobs_per_hour``: accepted jobs per hour of episode time;
- ``demand_throughput_bytes_per_s`` (the reference's "demand total throughput"): the accepted
  jobs' demand, their mirrored graph's op memory plus dependency bytes, per second of episode;
- ``worker_utilisation``: busy worker-time over total worker-time in the episode (jobs cut at the
  horizon count until it);
- JCT, speed-up (sequential JCT / JCT) and degree statistics over accepted jobs.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from pacopt.model.graph import JobGraph
from pacopt.model.solution import REASONS, Solution

if TYPE_CHECKING:
    from pacopt.model.instance import Instance


def demand_bytes(graph: JobGraph) -> float:
    """Op memory plus dependency bytes of the mirrored (unpartitioned) job graph."""
    memory = 2 * sum(op.memory_bytes for op in graph.ops)
    deps = sum(graph.ops[u].activation_bytes + graph.ops[v].activation_bytes for u, v in graph.deps)
    return memory + deps + graph.ops[graph.join].activation_bytes


def episode_metrics(instance: Instance, solution: Solution) -> dict:
    """Summary metrics of ``solution`` on ``instance`` (a JSON-ready dict)."""
    jobs = solution.jobs
    accepted = [j for j in jobs if j.accepted]
    ran = [j for j in jobs if j.start_ms is not None and j.jct_ms is not None]
    ends = [j.arrival_ms for j in jobs] + [j.start_ms + j.jct_ms for j in ran]
    episode_ms = max(ends, default=0.0)
    if instance.horizon_ms is not None:
        episode_ms = min(episode_ms, instance.horizon_ms)
    seconds = episode_ms / 1000.0
    busy = sum(len(j.workers) * (min(j.start_ms + j.jct_ms, episode_ms) - j.start_ms) for j in ran)
    per_graph = {name: (demand_bytes(g), g.seq_jct_ms(instance.model.training_steps))
                 for name, g in instance.graphs.items()}
    demand = sum(per_graph[j.graph][0] for j in accepted)
    jct = np.array([j.jct_ms for j in accepted])
    scale = {job.id: instance.work_scale(job) for job in instance.jobs}  # trace jobs' own work
    seq = np.array([per_graph[j.graph][1] * scale.get(j.id, 1.0) for j in accepted])
    reasons = Counter(j.reason for j in jobs if not j.accepted)
    arrived = len(jobs)
    return {
        "arrived": arrived,
        "accepted": len(accepted),
        "blocking_rate": (arrived - len(accepted)) / arrived if arrived else 0.0,
        "acceptance_rate": len(accepted) / arrived if arrived else 0.0,
        "blocked_by_reason": {r: reasons.get(r, 0) for r in REASONS},
        "episode_ms": episode_ms,
        "throughput_jobs_per_hour": len(accepted) / (seconds / 3600) if seconds > 0 else 0.0,
        "demand_throughput_bytes_per_s": demand / seconds if seconds > 0 else 0.0,
        "worker_utilisation": (busy / (instance.cluster.num_servers * episode_ms)
                               if episode_ms > 0 else 0.0),
        "mean_jct_ms": float(jct.mean()) if len(jct) else None,
        # a job of zero-time ops has no speed-up (0 / 0): it is left out of the mean
        "mean_speedup": float((seq[jct > 0] / jct[jct > 0]).mean()) if (jct > 0).any() else None,
        "mean_degree": float(np.mean([j.degree for j in accepted])) if accepted else None,
        "degree_counts": dict(sorted(Counter(j.degree for j in accepted).items())),
    }
