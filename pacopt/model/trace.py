"""Trace workloads: a real cluster's job log replayed as explicit pacopt jobs.

An instance's ``workload`` may be ``{"trace": {"file": PATH, "format": FORMAT, ...}}``
(:class:`TraceSpec`); instead of a path, ``file`` may name a trace of the ElasticFlow release
(``cluster04``), found in ``$PACOPT_TRACES_DIR`` or where ``pacopt download-traces`` puts it
(:mod:`pacopt.model.datasets`). Before any method sees the instance, the trace becomes explicit
jobs (:func:`expand_trace`), exactly as a generated workload does. Two formats, both the
ElasticFlow release of Microsoft's ITP traces (``docs/traces.md``):

- ``elasticflow-raw``: ``job_id,submission_time,duration,num_gpu`` (seconds; the measured trace);
- ``elasticflow``: the same jobs plus ``model_name`` and ``deadline`` (an absolute time in
  seconds), which ElasticFlow's authors generated for their simulations.

How a trace job becomes a pacopt job (``docs/traces.md`` defends each step with numbers):

- **window**: ``num_jobs`` consecutive rows (default 1001) from the first row submitted at or
  after ``start_s``, or the ``busiest`` such window (the most requested GPU-time per second);
- **graph**: ``model_name`` through :data:`DEFAULT_MODELS` (overridable by ``models``): the
  PipeDream profiles of vgg16, resnet50 and inception_v3, and the BERT-base, GPT-2 small and
  DeepSpeech2 graphs pacopt profiles itself (:mod:`pacopt.model.zoo`); a raw trace draws each
  job's graph from ``graphs`` (default :data:`RAW_GRAPHS`, uniformly unless ``weights``);
- **requested degree**: the trace's GPUs, capped at the largest degree the cluster can give the
  graph (1 or even, placeable on the empty cluster, at most ``max_partitions_per_op``); kept on
  the job, ``as-requested`` plays it;
- **work**: the job's training steps are set so that its JCT at its requested degree, alone on
  the cluster, equals its trace duration after time compression (``time_compression`` trace
  seconds become one simulated second; the default 1000 makes a trace second a millisecond);
- **arrivals**: submission times after the window's first, compressed alike, then stretched
  so that the window offers ``load`` to the cluster: its jobs' footprint-time at their
  requested degrees over the cluster's worker-time during the arrivals (``null``: the trace's
  own rate);
- **deadline**: ``elasticflow``: the trace's, as beta = (deadline - submission, compressed) /
  the job's sequential JCT; it may exceed 1 (a deadline looser than running unpartitioned);
  ``max_jct_fraction`` instead draws beta from a distribution (the only source for a raw trace,
  default the paper's A), seeded by ``seed``.

Every malformed file is one :class:`~pacopt.infra.errors.InputError` naming the file, the row
(1 = the first data row) and the field.
"""

from __future__ import annotations

import bisect
import csv
import io
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import numpy as np
from pydantic import Field, model_validator

from pacopt.infra.errors import InputError
from pacopt.model.datasets import find_pipedream, trace_path
from pacopt.model.graph import JobGraph
from pacopt.model.graph_sources import EXAMPLES_DIR, read_graph_file
from pacopt.model.input_spec import MAX_JOBS, SpecModel, check_file
from pacopt.model.jct import JctModel, JobTable
from pacopt.model.pipedream import PIPEDREAM_MODELS, read_pipedream
from pacopt.model.settings import ModelSettings
from pacopt.model.topology import RampCluster
from pacopt.model.workload import BetaSpec, Fixed, JobSpec, PaperBeta, Uniform, UniformBeta, paper

FORMATS = ("elasticflow", "elasticflow-raw")
#: The columns each format needs (others are ignored).
COLUMNS = {"elasticflow-raw": ("job_id", "submission_time", "duration", "num_gpu"),
           "elasticflow": ("job_id", "submission_time", "duration", "num_gpu", "model_name",
                           "deadline")}
#: ElasticFlow's model names -> pacopt graph names (a graph of the instance, a PipeDream model
#: or a bundled example graph). ``inception3`` is ElasticFlow's name of Inception-v3.
DEFAULT_MODELS = {"vgg16": "vgg16", "resnet50": "resnet50", "inception3": "inception_v3",
                  "inception_v3": "inception_v3", "bert": "bert", "gpt2": "gpt2",
                  "deepspeech2": "deepspeech2"}
#: The graphs a raw trace (no model names) draws from by default: the six of ElasticFlow's.
RAW_GRAPHS = ("vgg16", "resnet50", "inception_v3", "bert", "gpt2", "deepspeech2")
DEFAULT_NUM_JOBS = 1001
DEFAULT_TIME_COMPRESSION = 1000.0
#: The offered load a window is replayed at by default (``docs/traces.md``: where the methods
#: differ on the 4 x 4 x 2 cluster).
DEFAULT_LOAD = 0.5
#: A raw trace's default beta distribution (the paper's A).
DEFAULT_RAW_BETA = {"paper": "A"}


# ----- the format ---------------------------------------------------------------------------------
class TraceSpec(SpecModel):
    """A job trace replayed as the instance's jobs (:mod:`pacopt.model.trace`,
    ``docs/traces.md``). Only ``file`` and ``format`` are required."""

    file: str = Field(min_length=1, description=(
        "the trace CSV, relative to the instance file, or a trace's name (cluster04: in "
        "$PACOPT_TRACES_DIR or where `pacopt download-traces` puts it)"))
    format: Literal[FORMATS] = Field(description=(
        "elasticflow: job_id, submission_time, duration, num_gpu, model_name, deadline; "
        "elasticflow-raw: the first four only"))
    start_s: float | None = Field(None, ge=0, description=(
        "the window starts at the first job submitted at or after this trace time (s); default "
        "the first row"))
    num_jobs: int | None = Field(DEFAULT_NUM_JOBS, ge=1, le=MAX_JOBS, description=(
        "jobs in the window; null: every job from the start on"))
    window: Literal["first", "busiest"] = Field("first", description=(
        "first: from start_s; busiest: the num_jobs consecutive jobs with the most requested "
        "GPU-time per second of their arrivals"))
    time_compression: float = Field(DEFAULT_TIME_COMPRESSION, gt=0, le=1e9, description=(
        "trace seconds per simulated second (1000: a trace second becomes a millisecond); "
        "durations, deadlines and arrival gaps alike"))
    load: float | None = Field(DEFAULT_LOAD, gt=0, le=1e6, description=(
        "stretch the arrivals so that the window offers this load to the cluster (requested "
        "footprint-time over worker-time); null: the trace's own arrival rate"))
    models: dict[str, str] = Field({}, description=(
        "model_name -> graph name, over the defaults (vgg16, resnet50, inception3 -> "
        "inception_v3, bert, gpt2, deepspeech2)"))
    graphs: list[str] | None = Field(None, min_length=1, description=(
        "elasticflow-raw: the graphs jobs are drawn from (default the six mapped models)"))
    weights: list[Annotated[float, Field(ge=0)]] | None = Field(
        None, description="relative probabilities of graphs (default uniform)")
    max_jct_fraction: BetaSpec | None = Field(None, description=(
        "draw beta from this distribution instead (elasticflow: default the trace's deadlines; "
        "elasticflow-raw: default the paper's A)"))
    seed: int = Field(0, ge=0, description="seed of the graph and beta draws")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.window == "busiest" and self.start_s is not None:
            raise ValueError("start_s applies to window 'first' only (the busiest window is "
                             "searched over the whole file)")
        if self.format == "elasticflow" and (self.graphs is not None or self.weights is not None):
            raise ValueError("graphs and weights apply to elasticflow-raw traces only (an "
                             "elasticflow trace names each job's model; map it with models)")
        if self.weights is not None:
            count = len(self.graphs) if self.graphs is not None else len(RAW_GRAPHS)
            if len(self.weights) != count:
                raise ValueError(f"weights: one per graph ({count}), got {len(self.weights)}")
            if not any(self.weights):
                raise ValueError("weights: must not all be zero")
        return self

    def beta_source(self) -> Any:
        """The beta distribution spec used, or None for the trace's own deadlines."""
        if self.max_jct_fraction is not None:
            return self.max_jct_fraction
        return None if self.format == "elasticflow" else PaperBeta.parse(DEFAULT_RAW_BETA)


class TraceWorkload(SpecModel):
    """A workload replayed from a job trace (``docs/traces.md``)."""

    trace: TraceSpec


# ----- reading ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TraceRow:
    """One job of a trace file: times in trace seconds; ``row`` is 1 for the first data row."""

    row: int
    job_id: str
    submission_s: float
    duration_s: float
    num_gpu: int
    model: str | None = None
    deadline_s: float | None = None


def read_trace(path: str | Path, fmt: str,
               models: Mapping[str, str] | None = None) -> list[TraceRow]:
    """Every row of trace ``path`` in format ``fmt``, checked: the file exists and is a CSV with
    the format's columns; every row has a job id used once, a submission time >= 0 and not
    before the previous row's, a duration > 0, a whole number of GPUs >= 1, and (``elasticflow``)
    a deadline after its submission and a model name in ``models``. The first problem found is
    an :class:`InputError` naming the file, the row and the field. A file read before (same
    path, size and modification time) is not read again: a study maps one trace many times."""
    path = Path(path)
    try:
        stat = path.stat()
        key = (str(path.resolve()), fmt, stat.st_mtime_ns, stat.st_size,
               None if models is None else tuple(sorted(models.items())))
    except OSError:
        key = None  # _read_text says why
    if key is not None:
        return list(_read_cached(*key))
    return _read(path, fmt, models)


@lru_cache(maxsize=16)
def _read_cached(path: str, fmt: str, mtime_ns: int, size: int,
                 models: tuple | None) -> tuple[TraceRow, ...]:
    return tuple(_read(Path(path), fmt, None if models is None else dict(models)))


def _read(path: Path, fmt: str, models: Mapping[str, str] | None) -> list[TraceRow]:
    text = _read_text(path)
    where = f"trace '{path}'"
    if not text.strip():
        raise InputError(f"{where}: the file is empty, not a CSV trace")
    reader = csv.reader(io.StringIO(text))
    try:
        header = [name.strip() for name in next(reader)]
    except csv.Error as err:
        raise InputError(f"{where}: not a CSV file ({err})") from None
    missing = [c for c in COLUMNS[fmt] if c not in header]
    if len(header) < 2 or len(missing) == len(COLUMNS[fmt]):
        raise InputError(f"{where}: not a CSV trace file: its first line is not a "
                         f"comma-separated header naming {', '.join(COLUMNS[fmt])}")
    if missing:
        raise InputError(f"{where}: column '{missing[0]}' is missing (format '{fmt}' needs "
                         f"{', '.join(COLUMNS[fmt])}; the header has {', '.join(header)})")
    at = {c: header.index(c) for c in COLUMNS[fmt]}
    rows: list[TraceRow] = []
    seen: dict[str, int] = {}
    previous = -math.inf
    try:
        for number, fields in enumerate(reader, start=1):
            if not fields or all(not f.strip() for f in fields):
                continue  # a blank line (the usual trailing one)
            here = f"{where} row {number}"
            if len(fields) != len(header):
                raise InputError(f"{here}: {len(fields)} fields, the header has {len(header)}")
            job_id = fields[at["job_id"]].strip()
            if not job_id:
                raise InputError(f"{here}, field 'job_id': empty")
            if job_id in seen:
                raise InputError(f"{here}, field 'job_id': '{job_id}' duplicates row "
                                 f"{seen[job_id]}")
            seen[job_id] = number
            submitted = _number(fields[at["submission_time"]], here, "submission_time")
            if submitted < 0:
                raise InputError(f"{here}, field 'submission_time': must be >= 0, got "
                                 f"{submitted:g}")
            if submitted < previous:
                raise InputError(f"{here}, field 'submission_time': {submitted:g} is before the "
                                 f"previous row's {previous:g} (the trace must be sorted by "
                                 "submission time)")
            previous = submitted
            duration = _number(fields[at["duration"]], here, "duration")
            if duration <= 0:
                raise InputError(f"{here}, field 'duration': must be > 0 seconds, got "
                                 f"{duration:g}")
            gpus = _number(fields[at["num_gpu"]], here, "num_gpu")
            if gpus != int(gpus) or gpus < 1:
                raise InputError(f"{here}, field 'num_gpu': must be a whole number >= 1, got "
                                 f"{fields[at['num_gpu']].strip()}")
            model = deadline = None
            if fmt == "elasticflow":
                model = fields[at["model_name"]].strip()
                if models is not None and model not in models:
                    raise InputError(f"{here}, field 'model_name': '{model}' has no graph "
                                     f"mapping (known: {', '.join(sorted(models))}; add it to "
                                     "workload.trace.models)")
                deadline = _number(fields[at["deadline"]], here, "deadline")
                if deadline <= submitted:
                    raise InputError(f"{here}, field 'deadline': {deadline:g} is not after the "
                                     f"submission time {submitted:g}")
            rows.append(TraceRow(row=number, job_id=job_id, submission_s=submitted,
                                 duration_s=duration, num_gpu=int(gpus), model=model,
                                 deadline_s=deadline))
    except csv.Error as err:
        raise InputError(f"{where}: not a CSV file ({err})") from None
    if not rows:
        raise InputError(f"{where}: no jobs (a header only)")
    return rows


def _read_text(path: Path) -> str:
    check_file(path, "trace")  # not a folder, a FIFO (it would block) or an oversized file
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read trace '{path}': {err.strerror}") from None
    if b"\0" in raw:
        raise InputError(f"trace '{path}' is not a CSV file (binary content)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"trace '{path}' is not a CSV file (not UTF-8 text)") from None


def _number(text: str, where: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}, field '{column}': not a number: '{text.strip()}'") from None
    if not math.isfinite(value):
        raise InputError(f"{where}, field '{column}': must be finite, got '{text.strip()}'")
    return value


# ----- the mapping --------------------------------------------------------------------------------
@dataclass
class TraceJobs:
    """What a trace becomes: the ``jobs``, the ``graphs`` they use that the instance did not
    define (named as the mapping names them), and the window's statistics (``stats``, see
    :func:`expand_trace`)."""

    jobs: list[JobSpec]
    graphs: dict[str, JobGraph] = field(default_factory=dict)
    stats: dict = field(default_factory=dict)


def builtin_graph(name: str) -> JobGraph:
    """A graph pacopt knows by name: a PipeDream model (``$PACOPT_PIPEDREAM_DIR`` or the
    download cache) or a bundled example graph (``examples/graphs``: bert, gpt2, deepspeech2,
    ...); InputError otherwise."""
    if name in PIPEDREAM_MODELS:
        return read_pipedream(find_pipedream(name), name)
    path = EXAMPLES_DIR / f"{name}.json"
    if path.is_file():
        return read_graph_file(path, name)
    examples = sorted(p.stem for p in EXAMPLES_DIR.glob("*.json"))
    raise InputError(f"no graph '{name}': not a graph of the instance, a PipeDream model or a "
                     f"bundled example ({', '.join(examples)})")


def requested_degree(table: JobTable, gpus: int) -> int:
    """The degree a job asking for ``gpus`` GPUs gets on the table's cluster: the largest legal
    degree (1 or even, placeable on the empty cluster) of at most ``gpus``; if there is none
    (a graph too big for one worker's memory), the smallest degree that can be placed at all."""
    legal = [d for d in range(1, table.max_degree + 1)
             if (d == 1 or d % 2 == 0) and table.placed[d]]
    within = [d for d in legal if d <= gpus]
    if within:
        return within[-1]
    placed = legal or [int(d) for d in np.flatnonzero(table.placed)]
    return placed[0]


def expand_trace(spec: TraceSpec, graphs: Mapping[str, JobGraph], cluster: RampCluster,
                 settings: ModelSettings, base_dir: str | Path = ".") -> TraceJobs:
    """The jobs of trace workload ``spec`` on ``cluster`` under ``settings`` (module doc).

    ``graphs`` are the instance's own graphs (a mapped name found there is used as it is);
    relative paths resolve against ``base_dir``; a bare name such as ``cluster04`` that is no
    file there is the ElasticFlow trace of that name (:func:`pacopt.model.datasets.trace_path`).
    Deterministic: the same spec, file and seed always give the same jobs. ``stats`` holds the
    window's numbers (jobs, trace span, arrival rate, requested GPUs and GPU-hours, capped jobs,
    native and replayed load, the model mix and the deadlines), what ``pacopt trace`` prints.
    """
    path = trace_path(spec.file, spec.format, base_dir)  # a path, or a trace named: cluster04
    models = {**DEFAULT_MODELS, **spec.models}
    rows = read_trace(path, spec.format, models if spec.format == "elasticflow" else None)
    model = JctModel(cluster, settings)
    known: dict[str, JobGraph] = dict(graphs)
    added: dict[str, JobGraph] = {}

    def graph(name: str, where: str) -> JobGraph:
        if name not in known:
            try:
                known[name] = added[name] = builtin_graph(name)
            except InputError as err:
                raise InputError(f"{where}: {err}") from None
        return known[name]

    start, stop = _window(spec, rows, settings.max_partitions_per_op, path)
    window = rows[start:stop]
    rng = np.random.default_rng(spec.seed)
    if spec.format == "elasticflow":
        names = [models[r.model] for r in window]
        where = {models[r.model]: f"workload.trace.models.{r.model}" for r in window}
    else:
        choices = list(spec.graphs or RAW_GRAPHS)
        weights = np.ones(len(choices)) if spec.weights is None else np.asarray(spec.weights)
        picks = rng.choice(len(choices), size=len(window), p=weights / weights.sum())
        names = [choices[k] for k in picks]
        where = {name: "workload.trace.graphs" for name in choices}
    tables = {}
    for name in dict.fromkeys(names):
        table = tables[name] = model.table(graph(name, where[name]))
        if not table.placed.any():
            raise InputError(f"{where[name]}: graph '{name}' cannot be placed on this cluster "
                             "at any degree")
    beta_spec = spec.beta_source()
    drawn = (_distribution(beta_spec).sample(rng, len(window)) if beta_spec is not None
             else None)

    ms_per_s = 1000.0 / spec.time_compression
    steps = settings.training_steps
    degrees, scales, footprints = [], [], []
    for r, name in zip(window, names):
        table = tables[name]
        degree = requested_degree(table, r.num_gpu)
        scale = r.duration_s * ms_per_s / float(table.jct_ms[degree])
        degrees.append(degree)
        scales.append(scale)
        footprints.append(int(table.workers[degree]))
    first = window[0].submission_s
    span_ms = (window[-1].submission_s - first) * ms_per_s
    work = float(np.dot(footprints, [r.duration_s * ms_per_s for r in window]))
    native = work / (cluster.num_servers * span_ms) if span_ms > 0 else math.inf
    if spec.load is None:
        stretch = 1.0
    elif span_ms > 0:
        stretch = native / spec.load
    else:
        raise InputError(f"workload.trace.load: the window's {len(window)} jobs all arrive at "
                         f"the same second ({first:g} s), so no arrival rate gives a load; "
                         "set load to null or widen the window")
    jobs = []
    betas = []
    for i, (r, name) in enumerate(zip(window, names)):
        table, scale = tables[name], scales[i]
        if drawn is not None:
            beta = float(drawn[i])
        else:  # the trace's deadline over the job's sequential JCT, both compressed
            seq = table.seq_jct_ms * scale
            beta = (r.deadline_s - r.submission_s) * ms_per_s / seq
        betas.append(beta)
        jobs.append(JobSpec(id=r.job_id, graph=name,
                            arrival_ms=(r.submission_s - first) * ms_per_s * stretch,
                            max_jct_fraction=beta, training_steps=scale * steps,
                            requested_degree=degrees[i]))
    stats = _stats(spec, path, rows, start, stop, names, degrees, footprints, betas, tables,
                   native, stretch, span_ms, cluster)
    return TraceJobs(jobs=jobs, graphs=added, stats=stats)


def _distribution(beta: Any):
    if isinstance(beta, UniformBeta):
        return Uniform(*beta.uniform, beta.decimals)
    if isinstance(beta, PaperBeta):
        return paper(beta.paper)
    return Fixed(beta)


def _window(spec: TraceSpec, rows: list[TraceRow], max_degree: int, path: Path) -> tuple[int, int]:
    """[start, stop) row indices of the window ``spec`` names."""
    n = len(rows) if spec.num_jobs is None else spec.num_jobs
    if spec.window == "busiest":
        if n > len(rows):
            raise InputError(f"workload.trace.num_jobs: the busiest window of {n} jobs needs at "
                             f"least that many rows; '{path}' has {len(rows)}")
        start = busiest_window(rows, n, max_degree)
        return start, start + n
    start = 0
    if spec.start_s is not None:
        times = [r.submission_s for r in rows]
        start = bisect.bisect_left(times, spec.start_s)
        if start == len(rows):
            raise InputError(f"workload.trace.start_s: no job of '{path}' is submitted at or after "
                             f"{spec.start_s:g} s (the last at {times[-1]:g} s)")
    return start, min(start + n, len(rows))


#: The windows the project's trace tables are measured on (``studies/trace.yaml``,
#: ``docs/traces.md``): the first 1001 jobs, 1001 jobs from trace second 2,592,000, and the
#: busiest 200 jobs. Training on traces draws its windows outside them.
EVALUATION_WINDOWS = ({"num_jobs": 1001}, {"start_s": 2_592_000.0, "num_jobs": 1001},
                      {"window": "busiest", "num_jobs": 200})


def evaluation_rows(rows: list[TraceRow], max_degree: int = 16) -> list[tuple[int, int]]:
    """The [start, stop) row ranges of :data:`EVALUATION_WINDOWS` in ``rows`` (a window that
    does not fit the file is left out)."""
    times = [r.submission_s for r in rows]
    ranges = []
    for window in EVALUATION_WINDOWS:
        n = window["num_jobs"]
        if window.get("window") == "busiest":
            if n <= len(rows):
                start = busiest_window(rows, n, max_degree)
                ranges.append((start, start + n))
            continue
        start = bisect.bisect_left(times, window.get("start_s", 0.0))
        if start < len(rows):
            ranges.append((start, min(start + n, len(rows))))
    return ranges


def busiest_window(rows: list[TraceRow], n: int, max_degree: int = 16) -> int:
    """The first row index of the ``n`` consecutive rows with the most requested GPU-time
    (GPUs capped at ``max_degree``, times duration) per second between their first and last
    submissions; windows whose jobs all arrive at once are skipped (no rate). 0 if every window
    is such."""
    demand = np.array([min(r.num_gpu, max_degree) * r.duration_s for r in rows])
    times = np.array([r.submission_s for r in rows])
    total = np.concatenate([[0.0], np.cumsum(demand)])
    sums = total[n:] - total[:-n]
    spans = times[n - 1:] - times[:len(rows) - n + 1]
    rate = np.where(spans > 0, sums / np.where(spans > 0, spans, 1.0), -np.inf)
    return int(np.argmax(rate)) if np.isfinite(rate).any() else 0


def _stats(spec, path, rows, start, stop, names, degrees, footprints, betas, tables, native,
           stretch, span_ms, cluster) -> dict:
    window = rows[start:stop]
    gpus = np.array([r.num_gpu for r in window])
    durations = np.array([r.duration_s for r in window])
    span_s = window[-1].submission_s - window[0].submission_s
    betas = np.array(betas)
    # a job meets its deadline at its requested degree iff its JCT there (its compressed
    # duration) is within it: beta x sequential JCT >= JCT at the requested degree
    at_request = np.array([tables[name].jct_ms[d] / tables[name].seq_jct_ms
                           for name, d in zip(names, degrees)])
    out = {
        "file": str(path), "format": spec.format, "rows_in_file": len(rows),
        "window": spec.window, "first_row": window[0].row, "last_row": window[-1].row,
        "jobs": len(window), "start_s": window[0].submission_s, "end_s": window[-1].submission_s,
        "span_days": span_s / 86400,
        "arrivals_per_hour": (len(window) - 1) / (span_s / 3600) if span_s > 0 else None,
        "gpu_hours_requested": float((gpus * durations).sum() / 3600),
        "mean_gpus": float(gpus.mean()), "multi_gpu_share": float((gpus > 1).mean()),
        "max_gpus": int(gpus.max()),
        "capped_jobs": int(sum(d < g for d, g in zip(degrees, gpus))),
        "requested_degrees": dict(sorted(Counter(degrees).items())),
        "mean_duration_s": float(durations.mean()),
        "cluster": f"{cluster.communication_groups}x{cluster.racks_per_group}x"
                   f"{cluster.servers_per_rack}",
        "servers": cluster.num_servers,
        "native_load": native, "load": native / stretch if math.isfinite(native) else None,
        "arrival_stretch": stretch, "time_compression": spec.time_compression,
        "replay_span_ms": span_ms * stretch,
        "mean_interarrival_ms": span_ms * stretch / (len(window) - 1) if len(window) > 1 else None,
        "mean_footprint": float(np.mean(footprints)),
        "graphs": dict(sorted(Counter(names).items())),
        "beta_source": "trace deadlines" if spec.beta_source() is None else "distribution",
        "beta_quantiles": {q: float(np.quantile(betas, q)) for q in (0.1, 0.5, 0.9)},
        "beta_above_1": float((betas > 1).mean()),
        "deadline_met_as_requested": float((betas >= at_request).mean()),
    }
    return out
