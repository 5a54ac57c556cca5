"""The solver layer's commands: ``solve INSTANCE.json`` and ``pacopt profile | job | validate |
download-pipedream | download-traces | schema`` (dispatched by :mod:`pacopt.cli`).

``solve`` still writes the best solution found when interrupted, marked ``interrupted`` (see
:mod:`pacopt.infra.interrupt`); exit codes are those of :mod:`pacopt.infra.commandline`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import textwrap
from pathlib import Path

from pacopt.infra.commandline import CommandParser, command_parser, emit_lines
from pacopt.infra.errors import InputError
from pacopt.infra.interrupt import EXIT_INTERRUPTED, stop_requested, stoppable


# ----- solve ---------------------------------------------------------------------------------------
def _solve_parser() -> argparse.ArgumentParser:
    from pacopt.solvers.registry import DEFAULT_METHOD, METHODS

    parser = CommandParser(
        prog="solve", description="Run a method on a pacopt instance and write a validated result.",
        epilog="methods:\n" + "\n".join(_method_lines({name: m.summary for name, m in METHODS.items()})),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("instance", help="path to instance.json")
    parser.add_argument("--method", default=DEFAULT_METHOD, metavar="NAME",
                        help=f"method to run (default {DEFAULT_METHOD}; list below)")
    parser.add_argument("--time-limit", type=float, metavar="S",
                        help="time limit in seconds for exact methods (default 120)")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="solver threads for exact methods (default: all cores)")
    parser.add_argument("--seed", type=int,
                        help="seed of randomised methods (default: drawn, used and recorded)")
    parser.add_argument("--placement", metavar="PLACER",
                        help="the online simulator's placer: first-fit (the reference's), best-fit "
                             "or compact (physical only); default the instance's model.placement "
                             "(first-fit)")
    parser.add_argument("--checkpoint", metavar="FILE",
                        help="the learned agent's checkpoint, played throughout (pac-ml; default: the "
                             "shipped ones, per decision the fine-tune of the distribution "
                             "recognised so far)")
    parser.add_argument("--out", metavar="FILE",
                        help="result file (default: <instance>.<method>.result.json beside the "
                             "instance)")
    parser.add_argument("--json", action="store_true", help="print the result JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    return parser


def _method_lines(methods: dict[str, str], width: int = 100) -> list[str]:
    """``solve --help``'s method list: long descriptions wrap under themselves, never cut."""
    column = max(map(len, methods)) + 4
    lines = []
    for name, text in methods.items():
        wrapped = textwrap.wrap(text, width - column, break_on_hyphens=False,
                                break_long_words=False) or [""]
        lines.append(f"  {name:<{column - 2}}{wrapped[0]}")
        lines += [" " * column + rest for rest in wrapped[1:]]
    return lines


def solve_command(argv: list[str] | None) -> int:
    """``solve INSTANCE.json [options]``: run a method, write and summarise a validated result."""
    from pacopt.model.input_spec import check_file
    from pacopt.model.instance import load_instance
    from pacopt.model.solution import check_output_path
    from pacopt.solvers.api import check_options, check_placement, solve

    args = _solve_parser().parse_args(argv)
    check_options(args.method, args.time_limit, args.threads, args.seed,
                  args.placement)  # before any work
    check_file(args.instance, "instance")  # a folder or a device: one line, before a name is made
    out = check_output_path(args.out if args.out else Path(args.instance).with_name(
        f"{Path(args.instance).stem}.{args.method}.result.json"), inputs=(args.instance,))
    instance = check_placement(load_instance(args.instance), args.placement)
    # one block from the method's start to the written result: a Ctrl-C anywhere in it (the
    # method, its validation, the return from solve(), the write) asks for a stop, and what the
    # method has is validated and written before exit 130
    with stoppable():
        solution = solve(instance, args.method, time_limit=args.time_limit,
                         threads=args.threads, seed=args.seed,
                         progress=not (args.quiet or args.json), checkpoint=args.checkpoint)
        solution.save(out)
        interrupted = solution.interrupted or stop_requested()
    if args.json:
        print(solution.dumps())
    if not args.quiet:
        _summary(solution, out, sys.stderr if args.json else sys.stdout)
    if not solution.validated:
        return 1
    return EXIT_INTERRUPTED if interrupted else 0


def _summary(solution, out: Path, stream) -> None:
    m = solution.metrics
    rows = [("method", solution.method), ("preset", solution.preset),
            *([("placement", solution.placement)] if solution.placement else []),
            ("status", solution.status),
            ("accepted / arrived", f"{solution.accepted} / {solution.arrived}"),
            ("blocking rate", f"{solution.blocking_rate:.4f}"),
            *([("bound on accepted", f"{solution.bound_accepted}  (gap {solution.gap:.2%})")]
              if solution.bound_accepted is not None else []),
            ("blocked by reason", ", ".join(f"{k} {v}" for k, v in
                                            m.get("blocked_by_reason", {}).items())),
            ("worker utilisation", f"{m.get('worker_utilisation', 0):.3f}"),
            ("validated", "yes" if solution.validated else "NO:"),
            *(("", problem) for problem in m.get("validation_problems", [])),
            ("solve time", f"{solution.solve_seconds:.3f} s" + (
                f" (limit {solution.time_limit:g} s, {solution.threads} threads)"
                if solution.time_limit is not None else "")),
            ("seed", str(solution.seed) + (" (not reproducible: a time-limited search)"
                                           if m.get("reproducible") is False else "")),
            *([("interrupted", "yes: the best solution found so far")]
              if solution.interrupted else []),
            ("result", str(out))]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}", file=stream)


def _graph_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", help="a PipeDream graph.txt, an inline-graph .json, a bundled "
                                      "example name (cnn, resnet, transformer) or a downloaded "
                                      "PipeDream model")
    parser.add_argument("--preset", choices=["ddls", "physical"], default="ddls")


def profile_command(argv: list[str]) -> int:
    """``pacopt profile GRAPH``: the per-degree table of one graph on an empty cluster."""
    parser = command_parser("profile", "Per-degree table of one graph on an empty cluster.")
    _graph_argument(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON list of rows")
    return _profile(parser.parse_args(argv))


def job_command(argv: list[str]) -> int:
    """``pacopt job GRAPH --budget W | --deadline-ms T``: the job-level optimum."""
    parser = command_parser("job", "Job-level optimum: per-op split counts for one graph.")
    _graph_argument(parser)
    goal = parser.add_mutually_exclusive_group(required=True)
    goal.add_argument("--budget", type=int, help="minimise the JCT using at most this many workers")
    goal.add_argument("--deadline-ms", type=float, help="minimise the workers meeting this JCT")
    parser.add_argument("--backend", choices=["milp", "cpsat"], default="milp")
    parser.add_argument("--time-limit", type=float, default=60.0, metavar="S")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    return _job(parser.parse_args(argv))


def validate_command(argv: list[str]) -> int:
    """``pacopt validate INSTANCE RESULT``: exit 0 if the result is valid, 1 if not."""
    parser = command_parser("validate", "Re-check a result file against its instance.")
    parser.add_argument("instance")
    parser.add_argument("result")
    return _validate(parser.parse_args(argv))


def download_command(argv: list[str]) -> int:
    """``pacopt download-pipedream [MODEL ...]``: fetch the public PipeDream profiles."""
    parser = command_parser("download-pipedream", "Fetch the public PipeDream profiles.")
    parser.add_argument("models", nargs="*", help="models to fetch (default: all 14)")
    parser.add_argument("--dest", help="folder (default: $PACOPT_CACHE_DIR/pipedream, "
                                       "~/.cache/pacopt/pipedream without it)")
    return _download(parser.parse_args(argv))


def download_traces_command(argv: list[str]) -> int:
    """``pacopt download-traces [TRACE ...] [--list]``: fetch Microsoft's ITP job traces."""
    from pacopt.model.datasets import TRACES, TRACES_REPOSITORY

    parser = command_parser(
        "download-traces", f"Fetch Microsoft's ITP job traces as published with ElasticFlow "
        f"(github.com/{TRACES_REPOSITORY}, MIT licence): generated/ (format elasticflow) and "
        "raw/ (elasticflow-raw) CSVs, found afterwards by name (a trace workload's file: "
        "cluster04).")
    parser.add_argument("traces", nargs="*", metavar="TRACE",
                        help=f"traces to fetch (default: all {len(TRACES)}; see --list)")
    parser.add_argument("--dest", help="folder (default: $PACOPT_CACHE_DIR/traces/elasticflow, "
                                       "~/.cache/pacopt/traces/elasticflow without it)")
    parser.add_argument("--list", action="store_true",
                        help="list the release's traces and which are here; fetch nothing")
    return _download_traces(parser.parse_args(argv))


def schema_command(argv: list[str]) -> int:
    """``pacopt schema``: print the instance JSON Schema."""
    command_parser("schema", "Print the instance JSON Schema.").parse_args(argv)
    return _schema()


def _graph(spec: str):
    """The graph ``spec`` names (see :func:`resolve_graph`), a file checked first: its size, its
    encoding, and that it holds a graph (an instance given here says so)."""
    from pacopt.model.graph_sources import resolve_graph
    from pacopt.model.input_spec import check_file
    from pacopt.model.instance import check_graph, read_json_file

    path = Path(spec)
    if path.suffix == ".json" or (path.exists() and path.suffix != ".txt"):
        data = read_json_file(path, "graph")
        if isinstance(data, dict) and "ops" not in data and data.keys() & {"graphs", "jobs",
                                                                            "workload"}:
            raise InputError(f"'{path}' is an instance, not a graph: solve it with `solve {path}`")
    elif path.suffix == ".txt":
        check_file(path, "graph")
    try:
        return check_graph(resolve_graph(spec))
    except UnicodeDecodeError:
        raise InputError(f"graph '{spec}' is not UTF-8 text") from None
    except TypeError as err:  # the PipeDream parser on a size such as [1; [2]]
        raise InputError(f"graph '{spec}' is not a valid PipeDream profile: {err}") from None


def _profile(args) -> int:
    from pacopt.model.jct import JctModel
    from pacopt.model.settings import ModelSettings
    from pacopt.model.topology import RampCluster

    graph = _graph(args.graph)
    table = JctModel(RampCluster(), ModelSettings(preset=args.preset)).table(graph, not args.json)
    rows = table.rows()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{graph.name}: {graph.num_ops} forward ops, sequential JCT {table.seq_jct_ms:.2f} ms, "
          f"preset {args.preset}, 4x4x2 RAMP")
    print(f"{'degree':>6} {'placed':>6} {'workers':>7} {'jct_ms':>12} {'speed-up':>8} "
          f"{'comm_ms':>10}")
    for row in rows:
        if row["placed"]:
            print(f"{row['degree']:>6} {'yes':>6} {row['workers']:>7} {row['jct_ms']:>12.2f} "
                  f"{table.seq_jct_ms / row['jct_ms']:>8.2f} {row['comm_overhead_ms']:>10.2f}")
        else:
            print(f"{row['degree']:>6} {'no':>6} {'-':>7} {'-':>12} {'-':>8} {'-':>10}")
    return 0


def _job(args) -> int:
    from collections import Counter

    from pacopt.formulations.joblevel import optimise_job
    from pacopt.model.decision import single_degree
    from pacopt.model.jct import JctModel
    from pacopt.model.settings import ModelSettings
    from pacopt.model.topology import RampCluster
    from pacopt.solvers.api import check_time_limit

    check_time_limit(args.time_limit)
    graph = _graph(args.graph)
    cluster, settings = RampCluster(), ModelSettings(preset=args.preset)
    # Ctrl-C: CP-SAT stops with its best plan, printed and exit 130 (HiGHS, called through
    # Pyomo, cannot be stopped from outside: it ends with KeyboardInterrupt, no plan, 130)
    with stoppable() if args.backend == "cpsat" else contextlib.nullcontext():
        try:
            plan = optimise_job(graph, cluster, settings, budget=args.budget,
                                deadline_ms=args.deadline_ms, backend=args.backend,
                                time_limit=args.time_limit)
        except ValueError as err:
            raise InputError(str(err)) from None
        interrupted = stop_requested()
    table = JctModel(cluster, settings).table(graph)
    # PAC-ML's single-degree rule with the same resources, for comparison
    rule = single_degree(table, budget=args.budget, deadline_ms=args.deadline_ms)
    result = {"graph": graph.name, "preset": args.preset, "backend": plan.backend,
              "status": plan.status, "workers": plan.workers,
              "counts": dict(sorted(Counter(plan.counts).items())),
              "model_jct_ms": plan.model_jct_ms, "simulated_jct_ms": plan.simulated_jct_ms,
              "seq_jct_ms": table.seq_jct_ms, "seconds": plan.seconds,
              "single_degree": None if rule is None else {
                  "degree": rule, "workers": int(table.workers[rule]),
                  "jct_ms": float(table.jct_ms[rule])}}
    result["interrupted"] = interrupted
    if args.json:
        print(json.dumps(result, indent=1))
        return EXIT_INTERRUPTED if interrupted else 0
    print(f"{graph.name} ({args.preset}, {plan.backend}): {plan.status} in {plan.seconds:.1f} s")
    if plan.counts:
        print(f"  split counts (count: ops)  {result['counts']}")
        print(f"  workers {plan.workers}, JCT model {plan.model_jct_ms:.2f} ms, simulated "
              f"{plan.simulated_jct_ms:.2f} ms (sequential {table.seq_jct_ms:.2f} ms)")
    if rule is not None:
        print(f"  PAC-ML single degree {rule}: {int(table.workers[rule])} workers, "
              f"JCT {table.jct_ms[rule]:.2f} ms")
    if interrupted:
        print("  interrupted: the best plan found so far")
    return EXIT_INTERRUPTED if interrupted else 0


def _validate(args) -> int:
    from pacopt.model.instance import load_instance, read_json_file
    from pacopt.model.solution import Solution
    from pacopt.solvers.validate import find_problems, summary_problems

    instance = load_instance(args.instance)
    data = read_json_file(args.result, "result")
    try:
        solution = Solution.from_dict(data)
    except InputError as err:
        raise InputError(f"result '{args.result}': {err}") from None
    problems = find_problems(instance, solution) + summary_problems(data, solution)
    code = 1 if problems else 0
    emit_lines(problems + ["valid" if not problems else f"INVALID: {len(problems)} problem(s)"])
    return code


def _download(args) -> int:
    from pacopt.model.datasets import data_cache_dirs
    from pacopt.model.pipedream import download_pipedream

    dest = Path(args.dest) if args.dest else data_cache_dirs("pipedream")[0]
    emit_lines([str(path) for path in _fetch(dest, download_pipedream, args.models or None)])
    return 0


def _download_traces(args) -> int:
    from pacopt.model.datasets import download_traces, traces_cache

    if args.list:
        emit_lines(_trace_list(Path(args.dest) if args.dest else None))
        return 0
    dest = Path(args.dest) if args.dest else traces_cache()
    emit_lines([str(path) for path in _fetch(dest, download_traces, args.traces or None)])
    return 0


def _fetch(dest: Path, download, names: list[str] | None) -> list[Path]:
    """``download(dest, names)``, its failures one line; a failed download leaves none of the
    folders it created behind."""
    if dest.exists() and not dest.is_dir():
        raise InputError(f"--dest '{dest}' is a file, not a folder")
    created = [folder for folder in (dest, *dest.parents) if not folder.exists()]  # deepest first
    try:
        return download(dest, names)
    except (OSError, InputError) as err:
        for folder in created:
            try:
                folder.rmdir()
            except OSError:  # not empty (another file arrived meanwhile): keep it and its parents
                break
        if isinstance(err, InputError):
            raise
        raise InputError(f"download failed (is there internet access?): {err}") from None


def _trace_list(dest: Path | None) -> list[str]:
    """The release's traces, their jobs, and which of their files are in ``dest`` (default: the
    folder :func:`~pacopt.model.datasets.find_traces` finds)."""
    from pacopt.model.datasets import TRACES, find_traces, trace_folders_of

    try:
        dest = dest or find_traces()
        lines = [f"traces folder: {dest}"]
    except InputError as err:
        lines = [f"traces folder: none: {err}"]
    for name, jobs in TRACES.items():
        folders = trace_folders_of(name)
        here = [sub for sub in folders
                if dest is not None and (dest / sub / f"{name}.csv").is_file()]
        lines.append(f"{name:<10} {jobs:>6} jobs  {', '.join(folders):<15} "
                     f"here: {', '.join(here) or '-'}")
    return lines


def _schema() -> int:
    from pacopt.model.instance import instance_json_schema

    print(json.dumps(instance_json_schema(), indent=1))
    return 0


