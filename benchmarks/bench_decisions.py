"""Decisions per second with the live action mask and per-degree JCTs, the learned agent's hot path.

    python benchmarks/bench_decisions.py [--pipedream DIR] [--seeds N] [--policy NAME]

The paper workload (1001 arrivals, the five graphs, beta A, 4x4x2, horizon 1e6 ms) is played by a
fixed policy (default ``min-feasible``); at every decision the live mask and the per-degree table
(placeable, footprint, JCT as placed now) are computed, as the agent's observation needs them.
Two paths, one core, per preset:
- ``reference``: what ``Decision.action_mask()`` did before the fast path: the plain op-by-op
  first-fit for every degree (cached by occupancy, as the old ``JctModel.place``) and a timing
  look-up per placeable degree;
- ``fast``: ``Decision.options()`` and ``Decision.action_mask()`` (integer-mask first-fit);
- ``best-fit`` (and ``compact`` under ``physical``): the same calls with that placer
  (``pacopt.model.placers``: every candidate footprint scored with one product).
One untimed pass first puts every step timing the episodes need on disk (a fresh temporary
cache), so that both paths measure the mask and the per-degree table, not the one-off simulation
of a placement never seen before (``physical``; ``bench_core.py`` measures that). ``fresh`` is
one episode per seed on a new model and cluster (cold in-memory caches; table building is not
timed); ``shared`` plays the same seeds on one model, as an RL environment does across episodes. Rates are per CPU second of this process (``process_time``),
so that other work on a shared machine does not count. Target: >= 5,000 decisions/s on the fast
path and on the best-fit path.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from pacopt.model.decision import Decision
from pacopt.model.first_fit import first_fit_reference
from pacopt.model.jct import JctModel
from pacopt.model.paper_workload import paper_instance
from pacopt.model.simulator import OnlineEpisode
from pacopt.online.policies import make_policy

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import add_pipedream_argument, use_pipedream  # noqa: E402


def reference_options(decision: Decision, cache: dict) -> tuple[np.ndarray, np.ndarray]:
    """The old per-decision work: slow first-fit per degree (cached by occupancy), then JCTs."""
    table, model, occupied = decision.table, decision.model, decision.state.occupied
    mask = np.zeros(table.max_degree + 1, dtype=bool)
    jct = np.full(table.max_degree + 1, np.inf)
    mask[0] = True
    for d in range(1, table.max_degree + 1):
        if not table.placed[d]:
            continue
        key = (decision.graph.fingerprint, table.counts[d], occupied)
        if key not in cache:
            cache[key] = first_fit_reference(decision.graph, table.counts[d], model.cluster,
                                             occupied)
        if cache[key] is not None:
            mask[d] = True
            jct[d] = model.timing(decision.graph, table.counts[d], cache[key]).jct_ms
    return mask, jct


def play(instance, model: JctModel, policy_name: str, path: str, cache: dict) -> tuple[int, float]:
    """Play one episode; returns (decisions, CPU seconds), table building excluded."""
    for graph in instance.graphs.values():
        model.table(graph)
    policy = make_policy(policy_name)
    policy.reset(0)
    decisions = 0
    started = time.process_time()
    episode = OnlineEpisode(instance, model)
    while not episode.done:
        decision = episode.decision
        if path != "reference":
            decision.options()
            decision.action_mask()
        else:
            reference_options(decision, cache)
        episode.decide(int(policy.choose(decision)))
        decisions += 1
    return decisions, time.process_time() - started


def measure(preset: str, path: str, seeds: list[int], policy: str) -> tuple[float, float]:
    """(fresh, shared) decisions per second over ``seeds``."""
    placer = path if path in ("best-fit", "compact") else "first-fit"

    def instance_of(seed: int):
        instance = paper_instance("A", seed, preset=preset)
        return replace(instance, model=replace(instance.model, placement=placer))

    rates = []
    for seed in seeds:
        instance = instance_of(seed)
        n, seconds = play(instance, JctModel(instance.cluster, instance.model), policy, path, {})
        rates.append(n / seconds)
    instances = [instance_of(seed) for seed in seeds]
    model = JctModel(instances[0].cluster, instances[0].model)
    cache: dict = {}
    total_n, total_s = 0, 0.0
    for instance in instances:
        n, seconds = play(instance, model, policy, path, cache)
        total_n, total_s = total_n + n, total_s + seconds
    return float(np.mean(rates)), total_n / total_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_pipedream_argument(parser)
    parser.add_argument("--seeds", type=int, default=3, help="episodes (workload seeds 0..N-1)")
    parser.add_argument("--policy", default="min-feasible", help="the policy that plays")
    args = parser.parse_args()
    use_pipedream(args.pipedream, required=True)
    os.environ["PACOPT_CACHE_DIR"] = tempfile.mkdtemp(prefix="pacopt-bench-")
    seeds = list(range(args.seeds))
    print(f"Decisions/s, paper workload (beta A, 1001 jobs), policy {args.policy}, "
          f"seeds {seeds}, live mask + per-degree table at every decision")
    print(f"{'preset':9} {'path':10} {'fresh /s':>9} {'shared /s':>10} {'speed-up':>9}")
    for preset in ("ddls", "physical"):
        paths = ("reference", "fast", "best-fit") + (("compact",) if preset == "physical" else ())
        for path in paths[1:]:  # warm the on-disk timings for every path
            measure(preset, path, seeds, args.policy)
        before = None
        for path in paths:
            fresh, shared = measure(preset, path, seeds, args.policy)
            gain = "" if before is None else f"{fresh / before:>8.1f}x"
            before = before or fresh
            print(f"{preset:9} {path:10} {fresh:>9.0f} {shared:>10.0f} {gain:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
