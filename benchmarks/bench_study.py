"""Speed of studies: the paper comparison (4 beta distributions x 3 held-out seeds x 6 online
methods, 1001-job paper episodes) on a local process pool and on a local Ray instance, with 1 and
2 CPUs.

    python benchmarks/bench_study.py [--pipedream DIR] [--cpus 1 2]

The timing tables are built once first (the target is "tables cached"): a fresh cache folder is
warmed by one pass over the paper graphs, then every run starts from an empty output folder (no
resumption). Ray's start-up is timed apart from the study. Every run must give the same table
(all columns but time); the script says so. The 1-minute load average before each run is shown:
on a machine busy with other work, speed-ups from more CPUs cannot show. Target: the study in
under 60 s on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import add_pipedream_argument, use_pipedream  # noqa: E402

#: Online methods in order of preference; the first six the api knows are benchmarked.
CANDIDATES = ("para-max", "para-min", "random", "min-feasible", "sequential", "fixed:4", "tuned",
              "fixed:8")


def paper_study(methods: list[str]):
    from pacopt.analysis import study_from_dict

    return study_from_dict({"name": "bench", "grids": [{"name": "paper", "methods": methods,
                                                         "workload": {
        "distributions": ["A", "B", "C", "D"], "seeds": 3, "num_jobs": 1001,
        "interarrival_ms": 1000, "horizon_ms": 1e6}}]})


def timed(study, workers: int, ray: bool) -> tuple[float, float, pd.DataFrame]:
    """(Ray start-up seconds, study seconds, table) of one run into a fresh folder."""
    from pacopt.analysis import run_study

    startup = 0.0
    if ray:
        import ray as ray_module
        t0 = time.perf_counter()
        ray_module.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        startup = time.perf_counter() - t0
    try:
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            table = run_study(study, out, workers=workers, ray=ray, progress=False, plots=False)
            seconds = time.perf_counter() - t0
    finally:
        if ray:
            ray_module.shutdown()
    return startup, seconds, table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_pipedream_argument(parser)
    parser.add_argument("--cpus", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    use_pipedream(args.pipedream, required=True)
    os.environ["PACOPT_CACHE_DIR"] = tempfile.mkdtemp(prefix="pacopt-bench-")
    from pacopt.analysis import comparable, method_known
    from pacopt.model.jct import JctModel
    from pacopt.model.paper_workload import paper_instance

    methods = [m for m in CANDIDATES if method_known(m)][:6]
    study = paper_study(methods)
    t0 = time.perf_counter()
    for preset in ("ddls",):  # warm the on-disk timing cache the workers read
        instance = paper_instance("A", num_jobs=1, preset=preset)
        model = JctModel(instance.cluster, instance.model)
        for graph in instance.graphs.values():
            model.table(graph)
    print(f"Paper comparison study: {len(study.cells)} cells (4 distributions x 3 seeds x "
          f"{len(methods)} methods: {', '.join(methods)}), 1001 jobs each; tables built in "
          f"{time.perf_counter() - t0:.1f} s, then cached")
    print(f"{'backend':10} {'CPUs':>4} {'start-up s':>10} {'study s':>8} {'cells/s':>8} "
          f"{'speed-up':>8} {'load avg':>8}")
    reference, base = None, {}
    for backend in ("pool", "ray"):
        for cpus in args.cpus:
            load = os.getloadavg()[0]  # other work on the machine: speed-ups need it near 0
            startup, seconds, table = timed(study, cpus, backend == "ray")
            failed = int((table["status"] == "error").sum())
            base.setdefault(backend, seconds)
            print(f"{backend:10} {cpus:>4} {startup:>10.1f} {seconds:>8.1f} "
                  f"{len(table) / seconds:>8.2f} {base[backend] / seconds:>8.2f} {load:>8.1f}"
                  + (f"  ({failed} failed)" if failed else ""), flush=True)
            if reference is None:
                reference = comparable(table)
            else:
                pd.testing.assert_frame_equal(reference, comparable(table))
    print("every run gave the same table (all columns but solve time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
