"""Speed of the cluster core: per-graph table time and paper-scale episode time.

    python benchmarks/bench_core.py [--pipedream DIR] [--repeats N]

Prints two tables. Per-graph table time is measured cold (no cached timings: every placement is
simulated) and warm (a new model reading the on-disk timings). The episode is PAC-ML's: 1001
arrivals 1000 ms apart, the five paper graphs, beta A, horizon 1e6 ms, 4x4x2 RAMP; its time is
the best of N runs with the tables cached, per heuristic and preset.
Targets: a paper-scale episode well under a second once tables are cached.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from pacopt.model.graph_sources import EXAMPLES_DIR, read_graph_file
from pacopt.model.instance import instance_from_dict
from pacopt.model.jct import JctModel
from pacopt.model.pipedream import PAPER_GRAPHS
from pacopt.model.settings import ModelSettings
from pacopt.model.simulator import simulate
from pacopt.model.topology import RampCluster
from pacopt.online.policies import HEURISTICS, make_policy

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import add_pipedream_argument, use_pipedream  # noqa: E402


def table_times(graphs: dict, presets: list[str]) -> list[tuple]:
    rows = []
    for name, graph in graphs.items():
        for preset in presets:
            settings = ModelSettings(preset=preset)
            t0 = time.perf_counter()
            table = JctModel(RampCluster(), settings).table(graph)
            cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            JctModel(RampCluster(), settings).table(graph)
            warm = time.perf_counter() - t0
            placed = [d for d in range(1, table.max_degree + 1) if table.placed[d]]
            top = placed[-1]
            rows.append((name, preset, graph.num_ops, len(placed), cold, warm, top,
                         table.jct_ms[top], table.seq_jct_ms / table.jct_ms[top],
                         table.comm_overhead_ms[top] / table.jct_ms[top]))
    return rows


def episode_times(pipedream: Path, presets: list[str], repeats: int) -> list[tuple]:
    rows = []
    for preset in presets:
        instance = instance_from_dict({
            "model": {"preset": preset},
            "graphs": {g: {"pipedream": str(pipedream / f"{g}.txt")} for g in PAPER_GRAPHS},
            "workload": {"graphs": list(PAPER_GRAPHS), "num_jobs": 1001, "interarrival_ms": 1000,
                         "max_jct_fraction": {"paper": "A"}, "seed": 0},
            "horizon_ms": 1e6})
        model = JctModel(instance.cluster, instance.model)
        for graph in instance.graphs.values():
            model.table(graph)
        for name in HEURISTICS:
            best, solution = float("inf"), None
            for _ in range(repeats):
                t0 = time.perf_counter()
                solution = simulate(instance, make_policy(name), seed=0, model=model)
                best = min(best, time.perf_counter() - t0)
            rows.append((preset, name, solution.arrived, solution.blocking_rate, best))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_pipedream_argument(parser)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    args.pipedream = use_pipedream(args.pipedream, required=True)
    os.environ["PACOPT_CACHE_DIR"] = tempfile.mkdtemp(prefix="pacopt-bench-")  # start cold
    presets = ["ddls", "physical"]
    graphs = {g: read_graph_file(args.pipedream / f"{g}.txt") for g in PAPER_GRAPHS}
    graphs |= {p.stem: read_graph_file(p) for p in sorted(EXAMPLES_DIR.glob("*.json"))}

    print("Per-graph table (degrees 1..16, empty 4x4x2 cluster)")
    print(f"{'graph':14} {'preset':9} {'ops':>4} {'placed':>6} {'cold s':>7} {'warm s':>7} "
          f"{'max d':>5} {'JCT at max d':>12} {'speed-up':>8} {'exposed comm':>12}")
    for name, preset, ops, placed, cold, warm, top, jct, speedup, comm in table_times(graphs,
                                                                                    presets):
        print(f"{name:14} {preset:9} {ops:>4} {placed:>6} {cold:>7.3f} {warm:>7.3f} {top:>5} "
              f"{jct:>12.2f} {speedup:>8.2f} {comm:>11.1%}")

    print("\nPaper-scale episode (1001 arrivals, tables cached; best of "
          f"{args.repeats})")
    print(f"{'preset':9} {'policy':13} {'arrived':>7} {'blocking':>8} {'episode s':>9}")
    for preset, name, arrived, blocking, seconds in episode_times(args.pipedream, presets,
                                                                 args.repeats):
        print(f"{preset:9} {name:13} {arrived:>7} {blocking:>8.3f} {seconds:>9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
