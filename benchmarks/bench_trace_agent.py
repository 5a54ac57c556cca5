"""The learned agent on Microsoft's ITP traces, on the windows no training or selection saw.

    python benchmarks/bench_trace_agent.py [--workers 2] [--checkpoint PATH]
                                           [--preset ddls|physical] [--placement P]
                                           [--windows first,later,busiest] [--no-teacher]
                                           [--out FILE.json] [--cells FILE.json]

Each cluster's evaluation windows (``pacopt.model.trace.EVALUATION_WINDOWS``: the first 1001
jobs, 1001 jobs from trace second 2,592,000 on the clusters whose file reaches it, the busiest
200), load 0.5, 4x4x2, by default ddls and first fit: the instances of ``docs/traces.md``.
``pac-ml`` training on traces (``pacopt train --trace``) draws its windows outside these, and
validates on others again, so every number here is on windows used for nothing else. Methods:
``pac-ml`` (online: the shipped checkpoints, which give trace jobs ``trace-ddls.zip``; or
``--checkpoint``), the four online rules ``min-feasible``, ``tuned``, ``as-requested`` and
``elasticflow``, and on the first windows the agent's teacher, the hindsight rollout over
``min-feasible`` (it forks every degree on the window's own future: it reads jobs that have not
arrived, so it is a reference, not an online method). Prints per window kind the blocking rate
per cluster, the mean ± sample std over the clusters, and how often ``pac-ml`` blocks less / the
same / more than each rule and than each cluster's best rule; then the same counts on each
cluster's mean over the window kinds. Every number comes from a validated solution. ``--out``
writes the first windows' table as a results data file, ``--cells`` every cell.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pacopt.infra.errors import InputError
from pacopt.model.trace import EVALUATION_WINDOWS

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import (  # noqa: E402
    add_out_argument, use_pipedream, use_traces, write_results)

CLUSTERS = ("01", "02", "03", "04", "05", "07", "08", "09")
RULES = ("min-feasible", "tuned", "as-requested", "elasticflow")
TEACHER = "teacher (hindsight rollout over min-feasible)"
#: window kind -> its ``workload.trace`` fields
WINDOWS = dict(zip(("first", "later", "busiest"), EVALUATION_WINDOWS))
LOAD = 0.5


def trace_instance(cluster: str, window: str, model: dict):
    """The evaluation window ``window`` of ``cluster``'s trace under ``model`` (the instance's
    ``model`` section), or None when the file does not reach it."""
    from pacopt.model.instance import instance_from_dict

    trace = {"file": f"cluster{cluster}", "format": "elasticflow", "load": LOAD,
             **WINDOWS[window]}
    try:
        return instance_from_dict({"model": model, "workload": {"trace": trace}},
                                  source=f"cluster{cluster} {window}")
    except InputError:
        return None


def one_cell(task) -> tuple[str, str, str, float | None]:
    """Blocking rate of one (method, window kind, cluster), validated; None without the
    window."""
    label, window, cluster, checkpoint, model = task
    from pacopt.solvers.api import solve
    from pacopt.solvers.validate import validate

    instance = trace_instance(cluster, window, model)
    if instance is None:
        return label, window, cluster, None
    if label == TEACHER:
        from pacopt.learned.teacher import TeacherSpec, make_teacher
        from pacopt.online.rollout import play_rollout

        rollout = make_teacher(TeacherSpec.parse("lookahead:min-feasible"), "trace").rollout
        solution = validate(instance, play_rollout(instance, rollout))
    else:
        solution = solve(instance, label, seed=0,
                         checkpoint=checkpoint if label == "pac-ml" else None)
    if not solution.validated:
        raise SystemExit(f"{label} on {instance.source}: not validated")
    return label, window, cluster, solution.blocking_rate


def mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values, ddof=1) if len(values) > 1 else 0:.3f}"


def record(wins: int, ties: int, total: int) -> str:
    return f"{wins} / {ties} / {total - wins - ties}"


def print_window(window: str, cells: dict[str, dict[str, float]], setting: str) -> list[list]:
    """One window kind's table (printed) and its rows as a results file holds them."""
    clusters = [c for c in CLUSTERS if c in cells.get("pac-ml", {})]
    labels = [label for label in ("pac-ml", *RULES, TEACHER) if label in cells]
    print(f"\n{window} windows, load {LOAD}, {setting}: blocking rate (mean ± sample std over "
          f"the {len(clusters)} clusters)\n")
    print("| method | " + " | ".join(clusters) + " | mean |")
    print("|---" * (len(clusters) + 2) + "|")
    rows = []
    for label in labels:
        values = [cells[label][c] for c in clusters]
        shown = [f"{v:.3f}".lstrip("0") for v in values]
        print(f"| {label} | " + " | ".join(shown) + f" | {mean_std(values)} |")
        rows.append([f"`{label}`", *shown, mean_std(values)])
    if "pac-ml" in cells:
        agent = [cells["pac-ml"][c] for c in clusters]
        rules = [label for label in RULES if label in cells]
        best = [min(cells[label][c] for label in rules) for c in clusters]
        print("\npac-ml per cluster: wins / ties / losses (lower blocking wins)")
        print_record(agent, [*((label, [cells[label][c] for c in clusters]) for label in rules),
                             ("each cluster's best rule", best)])
    return rows


def print_record(agent: list[float], others: list[tuple[str, list[float]]]) -> None:
    """``agent``'s wins / ties / losses against each of ``others``, case by case."""
    for label, other in others:
        wins = sum(a < b - 1e-12 for a, b in zip(agent, other))
        ties = sum(abs(a - b) <= 1e-12 for a, b in zip(agent, other))
        print(f"- against {label}: {record(wins, ties, len(agent))}")


def print_over_windows(cells: dict[str, dict[str, dict[str, float]]]) -> None:
    """``pac-ml`` against each rule on each cluster's mean over the window kinds (the clusters
    that have them all)."""
    kinds = [w for w in WINDOWS if "pac-ml" in cells.get(w, {})]
    clusters = [c for c in CLUSTERS if all(c in cells[w]["pac-ml"] for w in kinds)]
    rules = [label for label in RULES if all(label in cells[w] for w in kinds)]
    if len(kinds) < 2 or not clusters:
        return
    mean = {label: [float(np.mean([cells[w][label][c] for w in kinds])) for c in clusters]
            for label in ("pac-ml", *rules)}
    print(f"\nover the {', '.join(kinds)} windows: each cluster's mean; pac-ml "
          f"{mean_std(mean['pac-ml'])}, " + ", ".join(f"{label} {mean_std(mean[label])}"
                                                       for label in rules))
    print_record(mean["pac-ml"], [(label, mean[label]) for label in rules])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="play this checkpoint as pac-ml (default: the shipped ones)")
    parser.add_argument("--preset", choices=("ddls", "physical"), default="ddls")
    parser.add_argument("--placement", choices=("first-fit", "best-fit", "compact"),
                        default="first-fit")
    parser.add_argument("--windows", default=",".join(WINDOWS))
    parser.add_argument("--no-teacher", action="store_true",
                        help="leave out the hindsight teacher (it takes seconds a window)")
    add_out_argument(parser)
    parser.add_argument("--cells", type=Path, default=None, metavar="FILE.json",
                        help="also write every cell's blocking rate as JSON")
    args = parser.parse_args()
    windows = [w for w in args.windows.split(",") if w]
    if unknown := sorted(set(windows) - set(WINDOWS)):
        parser.error(f"--windows: unknown {', '.join(unknown)}; known: {', '.join(WINDOWS)}")
    if args.placement == "compact" and args.preset == "ddls":
        parser.error("--placement compact: only under --preset physical")
    use_pipedream(required=True)
    use_traces()
    model = {"preset": args.preset, "placement": args.placement}
    setting = f"{args.preset}, 4x4x2, {args.placement.replace('-', ' ')}"
    tasks = [(TEACHER, "first", c, None, model) for c in CLUSTERS
             if "first" in windows and not args.no_teacher]  # the slow ones first
    tasks += [(label, w, c, args.checkpoint, model) for w in windows for c in CLUSTERS
              for label in ("pac-ml", *RULES)]
    cells: dict[str, dict[str, dict[str, float]]] = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for label, window, cluster, rate in tqdm(pool.map(one_cell, tasks), total=len(tasks),
                                                 unit="window", desc="traces", disable=None):
            if rate is not None:
                cells.setdefault(window, {}).setdefault(label, {})[cluster] = rate
    tables = {window: print_window(window, cells[window], setting)
              for window in windows if window in cells}
    print_over_windows(cells)
    if args.out and "first" in tables:
        clusters = [c for c in CLUSTERS if c in cells["first"].get("pac-ml", {})]
        write_results(args.out, "Blocking rate on the first 1001 jobs of each ITP cluster, "
                      f"load {LOAD}, {setting}", ["method", *clusters, "mean"],
                      tables["first"],
                      notes="Windows no training or selection used (01 and 05: clusters the "
                            "agent never saw); mean ± sample std over the clusters. The "
                            "teacher reads the window's future: a reference, not an online "
                            "method.")
    if args.cells:
        args.cells.write_text(json.dumps(cells, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
