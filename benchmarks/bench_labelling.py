"""Speed of the warm start's labelling (``pacopt train``'s imitation round 0): one round of
teacher episodes on the paper workload, serially (1 CPU), on the process pool (2 workers) and as
Ray tasks on a local Ray instance with 1 and 2 CPUs.

    python benchmarks/bench_labelling.py [--episodes 4] [--jobs 200] [--dist A]
                                         [--teacher rollout] [--pipedream DIR]

Each backend labels the same tasks (seeds drawn as the warm start draws them) through the
training's own executor (``pacopt.learned.train._labeller``), from cold: the pool's and Ray's
workers import torch within the round, as in a run. Ray's start-up is timed apart from the round.
Every backend must give the same labels (blocking rates, targets, masks); the script says so.
The 1-minute load average before each run is shown: on a machine busy with other work, speed-ups
from more CPUs cannot show.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import add_pipedream_argument, use_pipedream  # noqa: E402

#: (name, CPUs, on Ray) of each run, in the table's order; the first is the reference.
BACKENDS = (("serial", 1, False), ("pool", 2, False), ("ray", 1, True), ("ray", 2, True))


def label_round(config, tasks, cpus: int, on_ray: bool) -> tuple[float, float, list]:
    """(Ray start-up seconds, round seconds, results) of one labelling round."""
    from pacopt.infra.ray_cluster import ray_session
    from pacopt.learned.train import _label_all, _labeller

    config = replace(config, envs=cpus)
    if not on_ray:
        t0 = time.perf_counter()
        with _labeller(config) as label:
            results = _label_all(label, tasks)
            seconds = time.perf_counter() - t0
        return 0.0, seconds, results
    t0 = time.perf_counter()
    with ray_session(None, cpus):  # started here and timed apart; the round uses it as it is
        startup = time.perf_counter() - t0
        t0 = time.perf_counter()
        with _labeller(config, ray="local") as label:
            results = _label_all(label, tasks)
            seconds = time.perf_counter() - t0
    return startup, seconds, results


def same_labels(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        x_blocking == y_blocking and len(x_steps) == len(y_steps) and all(
            np.array_equal(x[1], y[1]) and np.array_equal(x[2], y[2]) and x[3] == y[3]
            for x, y in zip(x_steps, y_steps))
        for (x_blocking, x_steps), (y_blocking, y_steps) in zip(a, b))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=4, help="episodes in the round")
    parser.add_argument("--jobs", type=int, default=200, help="jobs per episode")
    parser.add_argument("--dist", default="A", choices=("A", "B", "C", "D"))
    parser.add_argument("--teacher", default="rollout", help="the labelling teacher")
    add_pipedream_argument(parser)
    args = parser.parse_args()
    if args.episodes < 1 or args.jobs < 1:
        print("--episodes and --jobs must be >= 1", file=sys.stderr)
        return 2
    use_pipedream(args.pipedream, required=True)
    from pacopt.learned.train_config import TrainConfig
    from pacopt.model.paper_workload import TRAIN_SEED_RANGE

    config = TrainConfig(distributions=(args.dist,), num_jobs=args.jobs, teacher=args.teacher)
    config.family()  # the graphs' timing tables built (and cached) before any timing
    rng = np.random.default_rng(0)
    tasks = [(config, args.dist, int(rng.integers(*TRAIN_SEED_RANGE)), int(rng.integers(2**31)),
              None) for _ in range(args.episodes)]
    print(f"One labelling round: {args.episodes} episodes of {args.jobs} jobs, distribution "
          f"{args.dist}, teacher {args.teacher}")
    print(f"{'backend':8} {'CPUs':>4} {'start-up s':>10} {'round s':>8} {'s/episode':>9} "
          f"{'speed-up':>8} {'load avg':>8}")
    reference, serial_seconds, same = None, None, True
    for name, cpus, on_ray in BACKENDS:
        load = os.getloadavg()[0]
        startup, seconds, results = label_round(config, tasks, cpus, on_ray)
        if results is None:
            print("interrupted", file=sys.stderr)
            return 130
        serial_seconds = serial_seconds or seconds
        print(f"{name:8} {cpus:>4} {startup:>10.1f} {seconds:>8.1f} "
              f"{seconds / args.episodes:>9.2f} {serial_seconds / seconds:>8.2f} {load:>8.1f}",
              flush=True)
        if reference is None:
            reference = results
        elif not same_labels(reference, results):
            same = False
            print(f"  {name} with {cpus} CPUs labelled differently from serial", file=sys.stderr)
    print("every backend gave the same labels" if same else "the labels differ (see above)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
