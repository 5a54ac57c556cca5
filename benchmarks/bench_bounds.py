"""Where the proven gap is: the worker-count relaxation solved as far as it goes, against the best
validated full schedule, on the paper workload.

    python benchmarks/bench_bounds.py [--jobs 200 1001] [--seeds 0 10000] [--betas A B C D]
                                      [--time-limit 180] [--cpsat-time-limit 120] [--threads 1]
                                      [--large-seeds 0] [--large-time-limit 300]
                                      [--large-cpsat-time-limit 300] [--results DIR]
                                      [--out FILE.json]

Per instance (the paper's workload: ddls, 4x4x2, the five graphs, one arrival per 1000 ms, no
horizon unless ``--horizon-ms``; the same instances as ``bench_exact.py``; sizes above 200 jobs
get the ``--large-*`` seeds and limits, where given):

- **the best full schedule known**: CP-SAT (``solve(instance, "cpsat")``, ``--cpsat-time-limit``,
  ``--threads``), validated; its solution is kept as ``DIR/solutions/JOBS-BETA-SEED.json``. A
  solution already there (an earlier run's, or one put there) is re-validated against the
  instance and used instead of running CP-SAT again;
- **the worker-count relaxation** (:func:`pacopt.formulations.bound.solve_relaxation_fully`,
  HiGHS, ``--threads``): its LP value, then its integer search for ``--time-limit`` seconds
  (LP included), started from the schedule's degrees (a feasible point of it): the dual bound,
  the best selection and whether that is proven optimal;
- **the split** of the unproven part (best bound - schedule, in jobs): the relaxation's own
  integrality still unproven, at most (its dual bound - its best selection; 0 when proven), and
  what placement over time and a better schedule add, at least (its best selection, the optimum
  when proven, - the schedule).

Every row checks that every bound (LP, relaxation, CP-SAT's) is >= every validated incumbent,
and the relaxation's best selection >= the schedule: a failure is a bug and stops the run.
Rows go to ``DIR/rows.jsonl`` as each finishes; a row already there is not run again.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from pacopt.formulations.bound import solve_relaxation_fully
from pacopt.formulations.offline import build_problem
from pacopt.model.paper_workload import HELD_OUT_SEEDS, TUNING_SEEDS, paper_instance
from pacopt.model.solution import Solution
from pacopt.solvers.api import solve
from pacopt.solvers.validate import validate

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import (  # noqa: E402
    add_out_argument,
    add_pipedream_argument,
    command_line,
    use_pipedream,
    write_results,
)

#: The seeds played by default: the first tuning seed (``bench_exact.py``'s) and the first
#: held-out one (the gap split's).
SEEDS = (TUNING_SEEDS[0], HELD_OUT_SEEDS[0])
COLUMNS = ["jobs", "β", "seed", "LP", "relaxation: bound / best (s)", "schedule (CP-SAT s)",
           "unproven", "integrality", "placement over time"]


def key_of(jobs: int, beta: str, seed: int) -> str:
    return f"{jobs}-{beta}-{seed}"


def incumbent(instance, path: Path, args, limit: float) -> tuple[Solution, str]:
    """The best full schedule for ``instance``: the validated solution at ``path`` if there is
    one, else CP-SAT's (saved there); with where it came from."""
    if path.is_file():
        solution = validate(instance, Solution.load(path))
        return solution, f"{path.name} (re-validated)"
    solution = solve(instance, "cpsat", time_limit=limit, threads=args.threads)
    if not solution.validated or solution.status == "error":
        raise AssertionError(f"CP-SAT's solution is not validated: {solution.metrics}")
    path.parent.mkdir(parents=True, exist_ok=True)
    solution.save(path)
    return solution, "cpsat"


def measure(jobs: int, beta: str, seed: int, args) -> dict:
    """One row: the schedule, the relaxation and the split, checked."""
    large = jobs > 200
    limit = (args.large_time_limit if large and args.large_time_limit is not None
             else args.time_limit)
    cpsat_limit = (args.large_cpsat_time_limit if large and args.large_cpsat_time_limit
                   is not None else args.cpsat_time_limit)
    instance = paper_instance(beta, seed, jobs, horizon_ms=args.horizon_ms)
    solution, source = incumbent(instance, args.results / "solutions"
                                 / f"{key_of(jobs, beta, seed)}.json", args, cpsat_limit)
    problem = build_problem(instance)
    index = {job.id: j for j, job in enumerate(instance.jobs)}
    start = {index[r.id]: r.degree for r in solution.jobs if r.accepted}
    relaxed = solve_relaxation_fully(problem, limit, args.threads, start)
    accepted = solution.accepted
    bounds = {"LP": math.floor(relaxed.lp + 1e-6), "relaxation": relaxed.bound,
              "CP-SAT": solution.bound_accepted}
    for name, bound in bounds.items():
        assert bound is not None and bound >= accepted, \
            f"{key_of(jobs, beta, seed)}: the {name} bound {bound} is below a validated " \
            f"schedule of {accepted}"
    assert relaxed.bound >= relaxed.best >= accepted, \
        f"{key_of(jobs, beta, seed)}: relaxation bound {relaxed.bound}, best {relaxed.best}, " \
        f"schedule {accepted}"
    best_bound = min(bounds.values())
    return {"jobs": jobs, "beta": beta, "seed": seed, "horizon_ms": args.horizon_ms,
            "lp": relaxed.lp, "relaxation_dual": relaxed.dual, "relaxation_bound": relaxed.bound,
            "relaxation_best": relaxed.best, "relaxation_proven": relaxed.proven,
            "relaxation_seconds": round(relaxed.seconds, 1), "relaxation_limit": limit,
            "schedule": accepted, "schedule_source": source,
            "cpsat_bound": solution.bound_accepted, "cpsat_status": solution.status,
            "cpsat_seconds": round(solution.solve_seconds, 1),
            "cpsat_limit": cpsat_limit, "threads": args.threads,
            "best_bound": best_bound, "unproven": best_bound - accepted,
            "integrality": relaxed.bound - relaxed.best,
            "placement": relaxed.best - accepted}


def table_row(r: dict) -> list:
    proven = ", proven" if r["relaxation_proven"] else ""
    relaxation = (f"{r['relaxation_bound']} / {r['relaxation_best']}{proven} "
                  f"({r['relaxation_seconds']:.0f})")
    return [r["jobs"], r["beta"], r["seed"], f"{r['lp']:.2f}", relaxation,
            f"{r['schedule']} ({r['cpsat_seconds']:.0f})", r["unproven"], r["integrality"],
            r["placement"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[200])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--betas", nargs="+", default=["A", "B", "C", "D"],
                        choices=["A", "B", "C", "D"])
    parser.add_argument("--time-limit", type=float, default=180.0,
                        help="seconds for the relaxation (LP and integer search) per instance")
    parser.add_argument("--cpsat-time-limit", type=float, default=120.0,
                        help="seconds for CP-SAT's schedule per instance")
    parser.add_argument("--large-seeds", type=int, nargs="+", default=None,
                        help="seeds for sizes above 200 jobs (default: --seeds)")
    parser.add_argument("--large-time-limit", type=float, default=None,
                        help="--time-limit for sizes above 200 jobs (default: --time-limit)")
    parser.add_argument("--large-cpsat-time-limit", type=float, default=None,
                        help="--cpsat-time-limit above 200 jobs (default: --cpsat-time-limit)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--horizon-ms", type=float, default=None)
    parser.add_argument("--results", type=Path, default=Path("bounds-results"), metavar="DIR",
                        help="rows.jsonl and the schedules (resumable)")
    add_pipedream_argument(parser)
    add_out_argument(parser)
    args = parser.parse_args()
    use_pipedream(args.pipedream, required=True)
    rows_path = args.results / "rows.jsonl"
    done: dict[tuple, dict] = {}
    if rows_path.is_file():
        for line in rows_path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                done[r["jobs"], r["beta"], r["seed"], r["horizon_ms"]] = r
    args.results.mkdir(parents=True, exist_ok=True)
    print("| " + " | ".join(COLUMNS) + " |", flush=True)
    rows = []
    for jobs in args.jobs:
        seeds = args.large_seeds if jobs > 200 and args.large_seeds else args.seeds
        for seed in seeds:
            for beta in args.betas:
                key = (jobs, beta, seed, args.horizon_ms)
                if key not in done:
                    started = time.perf_counter()
                    done[key] = measure(jobs, beta, seed, args)
                    done[key]["seconds"] = round(time.perf_counter() - started, 1)
                    with rows_path.open("a", encoding="utf-8") as out:
                        out.write(json.dumps(done[key]) + "\n")
                rows.append(done[key])
                print("| " + " | ".join(map(str, table_row(done[key]))) + " |", flush=True)
    if args.out:
        argv = list(sys.argv)  # the command without where its rows are kept
        if "--results" in argv:
            del argv[argv.index("--results"):argv.index("--results") + 2]
        write_results(
            command=command_line([a for a in argv if not a.startswith("--results=")]),
            path=args.out,
            title="Where the gap is: the worker-count relaxation against the best schedule",
            columns=COLUMNS, rows=[table_row(r) for r in rows],
            notes="The paper's workload, ddls, 4x4x2, "
                  + ("no horizon" if args.horizon_ms is None else f"horizon {args.horizon_ms:g} ms")
                  + f", threads: {args.threads}. LP: the relaxation's LP value. Relaxation: "
                    "HiGHS's dual bound / best selection (started from the schedule's degrees), "
                    "seconds for LP and search; limits "
                  + ", ".join(sorted({f"{r['relaxation_limit']:g} s at {r['jobs']} jobs"
                                      for r in rows}))
                  + ". Schedule: CP-SAT's validated incumbent (limits "
                  + ", ".join(sorted({f"{r['cpsat_limit']:g} s at {r['jobs']} jobs"
                                      for r in rows}))
                  + "). In jobs: unproven = the best bound (relaxation or CP-SAT's) - schedule; "
                    "integrality = the relaxation's bound - its best selection (0: proven; at most "
                    "the relaxation's own integrality); placement over time = its best "
                    "selection - schedule (at least what placement over time and a better "
                    "schedule add). Every bound is checked >= every validated schedule.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
