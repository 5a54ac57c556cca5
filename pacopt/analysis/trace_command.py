"""``pacopt trace FILE``: turn a job trace into an instance and print its window's statistics.

The instance it writes (``--out``) holds a ``workload.trace`` section (``docs/traces.md``), not
explicit jobs: it is replayed from the file each time it is read, so it stays small and says
where its jobs come from. The file path in it is relative to the instance's folder, as instance
paths are read. Everything is checked before anything is written: a bad trace or option is one
line naming the row and field, exit 2, and no file.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

from pacopt.infra.commandline import CommandParser, emit_lines
from pacopt.infra.errors import InputError
from pacopt.model.input_spec import check_file


def trace_parser() -> CommandParser:
    """The ``trace`` command's arguments (a bad flag is a one-line error, exit 2)."""
    from pacopt.model.trace import DEFAULT_LOAD, DEFAULT_NUM_JOBS, DEFAULT_TIME_COMPRESSION

    parser = CommandParser(prog="pacopt trace", description=(
        "Turn a job trace (ElasticFlow's release of Microsoft's ITP traces) into a pacopt "
        "instance with a workload.trace section, and print the window's statistics: jobs, "
        "arrival rate, GPU demand and the load it puts on the cluster."))
    parser.add_argument("file", help="the trace CSV, or a trace's name (cluster04) in the traces "
                                     "folder ($PACOPT_TRACES_DIR or `pacopt download-traces`)")
    parser.add_argument("--format", choices=["elasticflow", "elasticflow-raw"],
                        help="default: elasticflow if the header has model_name and deadline, "
                             "else elasticflow-raw")
    parser.add_argument("--num-jobs", default=str(DEFAULT_NUM_JOBS), metavar="N",
                        help=f"jobs in the window, or 'all' (default {DEFAULT_NUM_JOBS})")
    parser.add_argument("--start-s", type=float, metavar="S",
                        help="start at the first job submitted at or after S trace seconds "
                             "(not with --busiest)")
    parser.add_argument("--busiest", action="store_true",
                        help="the busiest window of N jobs (most requested GPU-time per second)")
    parser.add_argument("--load", default=str(DEFAULT_LOAD), metavar="L",
                        help=f"offered load to replay the window at, or 'native' for the "
                             f"trace's own arrival rate (default {DEFAULT_LOAD:g})")
    parser.add_argument("--time-compression", type=float, default=DEFAULT_TIME_COMPRESSION,
                        metavar="C", help=f"trace seconds per simulated second (default "
                                          f"{DEFAULT_TIME_COMPRESSION:g})")
    parser.add_argument("--cluster", metavar="CxRxS",
                        help="RAMP cluster to replay on (default 4x4x2)")
    parser.add_argument("--preset", choices=["ddls", "physical"],
                        help="the JCT model's preset (default ddls)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the graph and beta draws")
    parser.add_argument("--beta", metavar="SPEC",
                        help="draw beta instead of using the trace's deadlines: A, B, C, D (the "
                             "paper's), a number, or lo-hi (uniform); default: the trace's "
                             "deadlines (elasticflow) or A (elasticflow-raw)")
    parser.add_argument("--graphs", metavar="NAME,...",
                        help="elasticflow-raw: the graphs jobs are drawn from, uniformly "
                             "(default vgg16, resnet50, inception_v3, bert, gpt2, deepspeech2)")
    parser.add_argument("--out", metavar="INSTANCE", help="write the instance JSON here")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    return parser


def trace_command(argv: list[str]) -> int:
    """``pacopt trace``'s body, as the ``pacopt`` command registry calls it (inside its
    one-line-error wrapper)."""
    from pacopt.infra.safe_write import write_atomically
    from pacopt.model.datasets import trace_path
    from pacopt.model.instance import InstanceSpec
    from pacopt.model.settings import ModelSettings
    from pacopt.model.solution import check_output_path
    from pacopt.model.topology import RampCluster
    from pacopt.model.trace import expand_trace

    args = trace_parser().parse_args(argv)
    # a path, or a trace's name (cluster04) in the traces folder (pacopt download-traces)
    source = trace_path(args.file, args.format or "elasticflow")
    named = source.resolve() != Path(args.file).resolve()  # kept as the name: the instance travels
    trace = {"file": args.file if named else str(source.resolve()),
             "format": args.format or _guess_format(source)}
    trace["num_jobs"] = None if args.num_jobs == "all" else _int(args.num_jobs, "--num-jobs")
    if args.start_s is not None:
        trace["start_s"] = args.start_s
    if args.busiest:
        trace["window"] = "busiest"
    trace["load"] = None if args.load == "native" else _float(args.load, "--load")
    trace["time_compression"] = args.time_compression
    if args.seed:
        trace["seed"] = args.seed
    if args.beta is not None:
        trace["max_jct_fraction"] = _beta(args.beta)
    if args.graphs:
        trace["graphs"] = [name.strip() for name in args.graphs.split(",") if name.strip()]
    data: dict = {}
    if args.cluster:
        data["cluster"] = _cluster(args.cluster)
    if args.preset:
        data["model"] = {"preset": args.preset}
    out = None
    if args.out:
        out = check_output_path(args.out, inputs=(source,))
        if not named:
            trace["file"] = os.path.relpath(source.resolve(), out.resolve().parent)
    data["workload"] = {"trace": trace}
    base = out.resolve().parent if out else Path(".")
    spec = InstanceSpec.parse(data)  # every option checked, with the format's own messages
    cluster = RampCluster(**spec.cluster.model_dump(exclude={"topology"}))
    settings = ModelSettings(**spec.model.model_dump())
    # the whole file is read and mapped (as loading the instance will) before anything is written
    stats = expand_trace(spec.workload.trace, {}, cluster, settings, base).stats
    if out is not None:
        write_atomically(out, json.dumps(data, indent=1) + "\n")
    if args.json:
        print(json.dumps(stats, indent=1))
    else:
        emit_lines(stats_lines(stats) + ([f"instance: {out}"] if out else []))
    return 0


def stats_lines(stats: dict) -> list[str]:
    """The statistics of a trace window (:func:`pacopt.model.trace.expand_trace`) as aligned
    text lines."""
    q = stats["beta_quantiles"]
    rate = stats["arrivals_per_hour"]
    rows = [
        ("trace", f"{stats['file']} ({stats['format']}, {stats['rows_in_file']} jobs)"),
        ("window", f"{stats['window']}: rows {stats['first_row']}-{stats['last_row']}, "
                   f"{stats['jobs']} jobs over {stats['span_days']:.2f} days "
                   f"(from {stats['start_s']:g} s)"),
        ("arrival rate", f"{rate:.2f} jobs per trace hour" if rate is not None else "-"),
        ("GPUs requested", f"mean {stats['mean_gpus']:.2f}, max {stats['max_gpus']}, "
                           f"{stats['multi_gpu_share']:.1%} multi-GPU; "
                           f"{stats['gpu_hours_requested']:.0f} GPU-hours"),
        ("on the cluster", f"{stats['cluster']} ({stats['servers']} servers): requested degrees "
                           f"{_counts(stats['requested_degrees'])}; {stats['capped_jobs']} jobs "
                           f"capped; mean footprint {stats['mean_footprint']:.2f} workers"),
        ("load", f"native {stats['native_load']:.3g} on this cluster; replayed at "
                 + (f"{stats['load']:.3g}" if stats["load"] is not None else "-")
                 + f" (arrival gaps x {stats['arrival_stretch']:.4g}, time compression "
                   f"{stats['time_compression']:g})"),
        ("replay", f"{stats['replay_span_ms'] / 1000:.1f} simulated s of arrivals"
                   + (f", mean gap {stats['mean_interarrival_ms']:.1f} ms"
                      if stats["mean_interarrival_ms"] is not None else "")),
        ("graphs", _counts(stats["graphs"])),
        ("deadlines", f"{stats['beta_source']}: beta 10/50/90% {q[0.1]:.3f} / {q[0.5]:.3f} / "
                      f"{q[0.9]:.3f}; {stats['beta_above_1']:.1%} above 1; "
                      f"{stats['deadline_met_as_requested']:.1%} met at the requested degree"),
    ]
    width = max(len(k) for k, _ in rows)
    return [f"{k:<{width}}  {v}" for k, v in rows]


def _counts(counts: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in counts.items())


def _guess_format(path: Path) -> str:
    """``elasticflow`` when the header names model_name and deadline; else the raw format (the
    reader then says what is missing)."""
    try:
        check_file(path, "trace")  # never open a FIFO or a folder
        with path.open(newline="", encoding="utf-8-sig") as handle:
            header = next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError, csv.Error, InputError):
        return "elasticflow-raw"  # the reader reports the real problem
    names = {h.strip() for h in header}
    return "elasticflow" if {"model_name", "deadline"} <= names else "elasticflow-raw"


def _int(text: str, flag: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{flag}: not a whole number or 'all': '{text}'") from None


def _float(text: str, flag: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{flag}: not a number: '{text}'") from None


def _beta(text: str):
    if text in ("A", "B", "C", "D"):
        return {"paper": text}
    if "-" in text.strip("-"):
        lo, _, hi = text.partition("-")
        return {"uniform": [_float(lo, "--beta"), _float(hi, "--beta")], "decimals": 2}
    return _float(text, "--beta")


def _cluster(text: str) -> dict:
    parts = text.lower().split("x")
    if len(parts) != 3:
        raise InputError(f"--cluster: expected CxRxS (groups x racks x servers), got '{text}'")
    c, r, s = (_int(p, "--cluster") for p in parts)
    return {"communication_groups": c, "racks_per_group": r, "servers_per_rack": s}


if __name__ == "__main__":
    from pacopt.infra.commandline import run_command

    sys.exit(run_command(trace_command, None))
