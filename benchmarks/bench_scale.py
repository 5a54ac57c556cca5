"""The cost curve: every method on RAMP clusters of 32 to 1024 servers.

Clusters (C x R x S, servers): 4x4x2 (32, the paper's), 4x4x4 (64), 8x4x4 (128), 8x8x4 (256),
16x8x4 (512), 16x16x4 (1024): 4 servers per rack from 64 up, groups and racks doubled in turn,
so that from 128 up the cluster is made of 4x4x4 tiles (:mod:`pacopt.model.tiles`). The load
scales with the cluster: the paper's workload (five PipeDream graphs, beta A, held-out seed
10000) with jobs ``1000 x 32 / servers`` ms apart and no horizon, so every size sees the same
offered load per server.

Each run is its own process (``s``: the whole ``solve``, validation included; ``start``: of
it, the start-up paid once per process, imports and checkpoints, measured as
:func:`~pacopt.solvers.api.check_run` before the run; peak RSS is the process's
``ru_maxrss`` plus its children's, the validator's helper (:mod:`pacopt.solvers.presimulate`).
Every point gets a fresh, empty cache folder (``PACOPT_CACHE_DIR``): an online method runs
there twice, first cold (``cold s``, ``cold MB``: a user's first run, every step timing
simulated) and then warm (``s``, ``MB``: as a user running a study sees it). Online methods play
``--jobs`` arrivals (2001); ``bound`` and ``cpsat`` (``--time-limit`` s, 2 threads) play
``--exact-jobs`` (300). Printed: time, peak
memory, blocking; for the exact methods the incumbent and bound with the time each was first
reached; then the fitted exponent of time against size per method (least squares on log-log),
and the plot ``docs/img/scale.png``.

    PACOPT_PIPEDREAM_DIR=... python benchmarks/bench_scale.py            # the full table
    PACOPT_PIPEDREAM_DIR=... python benchmarks/bench_scale.py --quick    # 3 sizes, fewer jobs
    PACOPT_PIPEDREAM_DIR=... python benchmarks/bench_scale.py --servers-per-rack 8 --sizes 512 1024

``--every-placer`` runs every online method under every placer and preset at 1024 servers
instead (``--out``: that grid, warm and cold seconds per cell).

``--repeat N`` runs each point N times, each in its own fresh cache folder, and reports the
fastest cold and warm seconds and the most memory (on a noisy machine; the exact methods
run once).

``--out FILE.json`` also writes the cost curve as a results data file (``docs/results/NAME.json``):
per row of the table its seconds at each size, its memory at the largest and its blocking (the
exact methods: accepted and bound).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import (  # noqa: E402
    REPOSITORY,
    SHAPES,
    SHAPES_8,
    add_out_argument,
    scaled_instance,
    use_pipedream,
    write_results,
)

#: (method, placer, preset): every online method family (one K each for the parametric ones)
#: and each placer; compact needs the physical preset.
ONLINE = [("sequential", None, "ddls"), ("para-max", None, "ddls"), ("para-min", None, "ddls"),
          ("random", None, "ddls"), ("min-feasible", None, "ddls"), ("fixed:4", None, "ddls"),
          ("fixed-or-min:8", None, "ddls"), ("tuned", None, "ddls"), ("elasticflow", None, "ddls"),
          ("pac-ml", None, "ddls"), ("lp-online", None, "ddls"),
          ("min-feasible", "best-fit", "ddls"), ("tuned", "best-fit", "ddls"),
          ("pac-ml", "best-fit", "ddls"), ("lp-online", "best-fit", "ddls"),
          ("min-feasible", "compact", "physical"),
          ("pac-ml", "compact", "physical")]
EXACT = ["bound", "cpsat"]
#: ``--every-placer``: every online method (one K each for the parametric ones, the oracles
#: beside their online forms) under every (placer, preset) pair, at the largest size.
EVERY_METHOD = ["sequential", "para-max", "para-min", "random", "min-feasible", "fixed:8",
                "fixed-or-min:4", "tuned", "tuned-given-label", "elasticflow", "lp-online",
                "pac-ml", "pac-ml-given-label"]
PLACEMENTS = [("first-fit", "ddls", "first fit"), ("first-fit", "physical", "first fit (physical)"),
              ("best-fit", "ddls", "best fit"), ("best-fit", "physical", "best fit (physical)"),
              ("compact", "physical", "compact (physical)")]
ROOT = REPOSITORY


def run_one(spec: dict) -> dict:
    """One run in this process (``--one``): the row of the table."""
    from pacopt.solvers.api import check_run, solve

    inst = scaled_instance(spec["servers"], spec["jobs"], spec["preset"], spec.get("shape"),
                           spec.get("max_degree"))
    started = time.perf_counter()
    check_run(inst, spec["method"], placement=spec["placer"])  # imports, checkpoints: once
    ready = time.perf_counter()
    solution = solve(inst, spec["method"], seed=0, placement=spec["placer"],
                     time_limit=spec.get("time_limit"), threads=2)
    row = {**spec, "seconds": time.perf_counter() - started, "startup_s": ready - started,
           "rss_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                      + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024,
           "blocking": solution.blocking_rate, "accepted": solution.accepted,
           "bound": solution.bound_accepted, "status": solution.status,
           "validated": solution.validated, "stopped": solution.metrics.get("stopped")}
    trace = solution.metrics.get("trace") or []
    row["incumbent_s"] = next((t for t, inc, _ in trace if inc == solution.accepted), None)
    row["bound_s"] = next((t for t, _, b in trace if b == solution.bound_accepted), None)
    return row


def measure(spec: dict, repeat: int = 1) -> dict:
    """:func:`run_one` in a fresh process with a fresh, empty cache; an online method then
    once more, warm (the row's ``cold_s`` and ``cold_mb`` are of the first run). ``repeat``:
    that many times, each in its own fresh folder: the fastest cold and warm seconds (the
    machine's noise only ever adds time) and the most memory; every repeat must block the
    same jobs (a run is reproducible). An exact method runs once (its time limit and threads
    make it neither cold nor reproducible)."""
    command = [sys.executable, "-m", "benchmarks", "scale", "--one", json.dumps(spec)]
    best = None
    for _ in range(1 if spec["method"] in EXACT else repeat):
        with tempfile.TemporaryDirectory(prefix="pacopt-scale-") as cache:
            env = {**os.environ, "PACOPT_CACHE_DIR": cache}
            cold = None
            for _ in range(1 if spec["method"] in EXACT else 2):
                done = subprocess.run(command, capture_output=True, text=True, env=env,
                                      cwd=ROOT, check=False)
                if done.returncode:
                    return {**spec, "error": done.stderr.strip().splitlines()[-1:]}
                row = json.loads(done.stdout.strip().splitlines()[-1])
                cold = cold or row
        row = {**row, "cold_s": cold["seconds"], "cold_mb": cold["rss_mb"]}
        if best is not None:
            if (row["accepted"], row["blocking"]) != (best["accepted"], best["blocking"]):
                gone = f"not reproducible: {best['accepted']} accepted, then {row['accepted']}"
                return {**spec, "error": [gone]}
            row = {**row, **{k: min(row[k], best[k]) for k in ("seconds", "cold_s")},
                   **{k: max(row[k], best[k]) for k in ("rss_mb", "cold_mb")}}
        best = row
    return best


def exponent(sizes: list[int], seconds: list[float]) -> float:
    """The slope of log(time) against log(size), least squares."""
    xs, ys = [math.log(s) for s in sizes], [math.log(max(t, 1e-3)) for t in seconds]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


def label(row: dict) -> str:
    placer = f" @{row['placer']}" if row["placer"] else ""
    return f"{row['method']}{placer}" + (" (physical)" if row["preset"] == "physical" else "")


def plot(rows: list[dict], fits: dict[str, float], path: Path) -> None:
    """Time against size, log-log, one line per method with its exponent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (name, slope) in enumerate(fits.items()):
        points = sorted((r["servers"], r["seconds"]) for r in rows
                        if label(r) == name and "seconds" in r)
        ax.plot(*zip(*points), marker="o", linestyle=("-", "--", ":")[i // 10 % 3],
                label=f"{name} (n^{slope:.2f})")  # 10 colours, then the next line style
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("servers")
    ax.set_ylabel("seconds per episode (solve, validation included)")
    ax.set_title("pacopt on RAMP clusters, load scaled with size")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="sizes 32, 256 and 1024, 501 jobs, 100 exact jobs, 20 s limit")
    parser.add_argument("--jobs", type=int, default=2001)
    parser.add_argument("--exact-jobs", type=int, default=300)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--plot", help="where the plot goes (default docs/img/scale.png; "
                        "with --sizes or --methods, no plot unless given)")
    parser.add_argument("--sizes", type=int, nargs="+", choices=list(SHAPES),
                        help="cluster sizes to run (default: all, or --quick's)")
    parser.add_argument("--methods", nargs="+", metavar="LABEL",
                        help="only these rows, named as the table names them (e.g. 'pac-ml', "
                        "'tuned @best-fit', 'min-feasible @compact (physical)', 'cpsat')")
    parser.add_argument("--servers-per-rack", type=int, choices=(4, 8), default=4,
                        help="8: the shapes with 8 servers per rack (4x1x8 ... 16x8x8; no plot "
                        "unless --plot)")
    parser.add_argument("--max-degree", type=int, default=None, metavar="K",
                        help="the model's max_partitions_per_op (default 16, the paper's)")
    add_out_argument(parser)
    parser.add_argument("--every-placer", action="store_true",
                        help="every online method under every placer and preset at the largest "
                             "of --sizes (default 1024), cold and warm; --out writes that grid")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run each online point N times, each in a fresh cache folder, and "
                             "report the fastest cold and warm seconds and the most memory (on a "
                             "noisy machine; default 1)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be 1 or more")
    use_pipedream()
    if args.one:
        print(json.dumps(run_one(json.loads(args.one))))
        return
    if args.every_placer:
        every_placer(max(args.sizes or [1024]), args.jobs, args.max_degree, args.out,
                     args.repeat)
        return
    sizes = args.sizes or ([32, 256, 1024] if args.quick else list(SHAPES))
    jobs, exact_jobs, limit = ((501, 100, 20.0) if args.quick
                               else (args.jobs, args.exact_jobs, args.time_limit))
    rows = []
    print(f"{'method':34s} {'servers':>7s} {'shape':>8s} {'jobs':>5s} {'cold s':>7s} "
          f"{'s':>7s} {'c/w':>5s} {'start':>6s} {'cold MB':>7s} {'MB':>6s} {'blocking':>8s} "
          f"{'acc':>5s} {'bound':>5s} {'inc@s':>6s} {'bnd@s':>6s}")
    degree = {"max_degree": args.max_degree} if args.max_degree else {}
    specs = [{"method": m, "placer": p, "preset": pr, "jobs": jobs, **degree}
             for m, p, pr in ONLINE]
    specs += [{"method": m, "placer": None, "preset": "ddls", "jobs": exact_jobs,
               "time_limit": limit, **degree} for m in EXACT]
    if args.methods:
        specs = [spec for spec in specs if label(spec) in args.methods]
        if not specs:
            parser.error(f"--methods: none of {args.methods} is a row of the table")
    shapes = SHAPES_8 if args.servers_per_rack == 8 else SHAPES
    for spec in specs:
        for servers in sizes:
            row = measure({**spec, "servers": servers, "shape": shapes[servers]}, args.repeat)
            rows.append(row)
            shape = "x".join(map(str, shapes[servers]))
            if "error" in row:
                print(f"{label(row):34s} {servers:7d} {shape:>8s} error: {row['error']}")
                continue
            fmt = lambda v: "-" if v is None else f"{v:.1f}"
            print(f"{label(row):34s} {servers:7d} {shape:>8s} {row['jobs']:5d} "
                  f"{row['cold_s']:7.2f} {row['seconds']:7.2f} "
                  f"{row['cold_s'] / row['seconds']:5.2f} {row['startup_s']:6.2f} "
                  f"{row['cold_mb']:7.0f} {row['rss_mb']:6.0f} {row['blocking']:8.3f} "
                  f"{row['accepted']:5d} {fmt(row['bound']):>5s} {fmt(row['incumbent_s']):>6s} "
                  f"{fmt(row['bound_s']):>6s}", flush=True)
    fits = {}
    for name in dict.fromkeys(label(r) for r in rows):
        points = [(r["servers"], r["seconds"]) for r in rows if label(r) == name and "seconds" in r]
        if len(points) >= 2:
            fits[name] = exponent(*zip(*points))
    print("\nfitted exponent of time against servers (time ~ servers^k):")
    for name, slope in fits.items():
        print(f"  {name:34s} k = {slope:.2f}")
    path = args.plot or (None if args.sizes or args.methods or args.servers_per_rack != 4
                         else str(ROOT / "docs" / "img" / "scale.png"))
    if path:
        plot(rows, fits, Path(path))
        print(f"plot: {path}")
    if args.out:
        write_cost_curve(args.out, rows, sizes, shapes, jobs, exact_jobs, limit,
                         args.max_degree, args.repeat)


def every_placer(servers: int, jobs: int, max_degree: int | None, out: Path | None,
                 repeat: int = 1) -> None:
    """Every method of :data:`EVERY_METHOD` under every pair of :data:`PLACEMENTS` on
    ``servers`` servers, each cold then warm (:func:`measure`): a line per run, then the grid
    (warm / cold seconds per cell, the most memory of a row cold)."""
    degree = {"max_degree": max_degree} if max_degree else {}
    cells: dict[str, dict[str, dict]] = {}
    print(f"{'method':20s} {'placement':22s} {'cold s':>7s} {'s':>6s} {'c/w':>5s} "
          f"{'cold MB':>7s} {'blocking':>8s}")
    for method in EVERY_METHOD:
        for placer, preset, name in PLACEMENTS:
            row = measure({"method": method, "placer": placer, "preset": preset, "jobs": jobs,
                           "servers": servers, "shape": SHAPES[servers], **degree}, repeat)
            cells.setdefault(method, {})[name] = row
            if "error" in row:
                print(f"{method:20s} {name:22s} error: {row['error']}", flush=True)
                continue
            print(f"{method:20s} {name:22s} {row['cold_s']:7.2f} {row['seconds']:6.2f} "
                  f"{row['cold_s'] / row['seconds']:5.2f} {row['cold_mb']:7.0f} "
                  f"{row['blocking']:8.3f}", flush=True)
    runs = [r for by in cells.values() for r in by.values() if "error" not in r]
    if runs:
        worst = max(runs, key=lambda r: r["cold_s"])
        ratio = max(runs, key=lambda r: r["cold_s"] / r["seconds"])
        print(f"\n{len(runs)} runs: cold at most {worst['cold_s']:.2f} s ({label(worst)}), "
              f"cold / warm at most {ratio['cold_s'] / ratio['seconds']:.2f} ({label(ratio)}), "
              f"at most {max(r['cold_mb'] for r in runs):.0f} MB cold")
    if out:
        table = [[f"`{method}`",
                  *(f"{by[name]['seconds']:.2f} / {by[name]['cold_s']:.2f} s"
                    if "error" not in by[name] else None for _, _, name in PLACEMENTS),
                  max((round(r["cold_mb"]) for r in by.values() if "error" not in r),
                      default=None)]
                 for method, by in cells.items()]
        shape = "x".join(map(str, SHAPES[servers]))
        write_results(out, f"Every online method under every placer, {servers} servers "
                           f"({jobs} jobs): warm / cold seconds",
                      ["method", *(name for _, _, name in PLACEMENTS), "cold MB, most"], table,
                      notes=f"The paper's workload (beta A, held-out seed 10000) on {shape}, "
                            f"jobs 1000 x 32 / {servers} ms apart, no horizon; the whole "
                            "solve, validation included; each run cold (an empty cache folder) "
                            "then warm in the same folder."
                            + (f" Degrees up to {max_degree}." if max_degree else "")
                            + _repeats(repeat))


def _repeats(repeat: int) -> str:
    return (f" Each online point run {repeat} times, each in a fresh cache folder: the fastest "
            "cold and warm seconds, the most memory." if repeat > 1 else "")


def write_cost_curve(path: Path, rows: list[dict], sizes: list[int], shapes: dict, jobs: int,
                     exact_jobs: int, limit: float, max_degree: int | None = None,
                     repeat: int = 1) -> None:
    """The results data file of ``--out``: one row per method, its seconds per size (warm),
    and at the largest size cold and warm, their ratio and the memory of each."""
    table = []
    for name in dict.fromkeys(label(r) for r in rows):
        mine = {r["servers"]: r for r in rows if label(r) == name and "seconds" in r}
        exact = name in EXACT
        seconds = [f"{mine[s]['seconds']:.2f} s" if s in mine else None for s in sizes]
        top = mine.get(sizes[-1])
        if top is None or exact:
            cold = [None, None, None]
        else:
            cold = [f"{top['cold_s']:.2f} s", f"{top['cold_s'] / top['seconds']:.2f}",
                    round(top["cold_mb"])]
        memory = round(top["rss_mb"]) if top else None
        if exact:
            outcome = (" / ".join(str(mine[s]["accepted"]) if s in mine else "-" for s in sizes)
                       + " accepted, bound "
                       + " / ".join(f"{mine[s]['bound']:.0f}" if s in mine and
                                    mine[s]["bound"] is not None else "-" for s in sizes))
            name = f"{name} ({exact_jobs} jobs, {limit:g} s)"
        else:
            outcome = " / ".join(f"{mine[s]['blocking']:.3f}" if s in mine else "-"
                                 for s in sizes)
        table.append([f"`{name}`", *seconds, cold[0], cold[1], memory, cold[2], outcome])
    largest = sizes[-1]
    write_results(
        path, f"Seconds per episode against cluster size ({jobs} jobs online"
              + (f", {exact_jobs} exact)" if any(label(r) in EXACT for r in rows) else ")")
              + (f", degrees up to {max_degree}" if max_degree else ""),
        ["method", f"{sizes[0]} servers", *map(str, sizes[1:]), f"cold at {largest}",
         "cold / warm", f"MB at {largest}", "cold MB", "blocking at " + " / ".join(map(str, sizes))],
        table,
        notes="The paper's workload (beta A, held-out seed 10000) on "
              + ", ".join("x".join(map(str, shapes[s])) for s in sizes)
              + ", jobs 1000 x 32 / servers ms apart, no horizon; validation included. Seconds "
              "and MB are of a warm cache; cold: the first run in an empty cache folder."
              + (f" Degrees up to {max_degree} (model.max_partitions_per_op)." if max_degree
                 else "") + _repeats(repeat))


if __name__ == "__main__":
    main()
