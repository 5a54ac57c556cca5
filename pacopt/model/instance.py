"""Problem instances (``instance.json``, ``docs/formats.md``): reading, checking, freezing.

The pydantic models below are the format's single definition: they validate input, and
:func:`instance_json_schema` (committed as ``pacopt/schema/instance.schema.json``; regenerate it
with ``python -m pacopt.model.instance``) is derived from them. Every bad input raises one
:class:`InputError` whose message starts with the offending field's path, e.g.
``jobs[3].max_jct_fraction: must be less than or equal to 1, got 1.5``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from pacopt.infra.errors import InputError
from pacopt.model.datasets import find_pipedream
from pacopt.model.graph import JobGraph, graph_from_dict
from pacopt.model.input_spec import (
    MAX_BYTES,
    MAX_DEPS,
    MAX_JOBS,
    MAX_MS,
    MAX_OPS,
    MAX_SERVERS,
    MIN_QUANTUM_MS,
    SpecModel,
    check_file,
    field_path,
    tagged_union,
)
from pacopt.model.pipedream import PIPEDREAM_MODELS, read_pipedream
from pacopt.model.placers import PLACER_PRESETS, PLACERS
from pacopt.model.settings import PRESETS, ModelSettings
from pacopt.model.topology import RampCluster
from pacopt.model.trace import TraceWorkload, expand_trace
from pacopt.model.workload import Beta, JobSpec, WorkloadSpec, generate_jobs, require_graph

__all__ = ["Instance", "InstanceSpec", "JobSpec", "SCHEMA_PATH", "check_graph",
           "instance_from_dict", "instance_json_schema", "load_instance", "read_json_file",
           "write_schema"]

#: Where the committed JSON schema lives (shipped as package data).
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema" / "instance.schema.json"


# ----- the format --------------------------------------------------------------------------------
class ClusterSpec(SpecModel):
    """The RAMP cluster; every field defaults to PAC-ML's 4 x 4 x 2 A100 cluster."""

    topology: Literal["ramp"] = "ramp"
    communication_groups: int = Field(RampCluster.communication_groups, ge=1, le=MAX_SERVERS)
    racks_per_group: int = Field(RampCluster.racks_per_group, ge=1, le=MAX_SERVERS,
                                 description="at most communication_groups")
    servers_per_rack: int = Field(RampCluster.servers_per_rack, ge=1, le=MAX_SERVERS)
    channels: int = Field(RampCluster.channels, ge=1, le=1024,
                          description="channels per link direction")
    total_node_bandwidth: float = Field(RampCluster.total_node_bandwidth, gt=0, le=MAX_BYTES,
                                        description="bytes/s; a channel gets 1/communication_groups")
    propagation_latency: float = Field(RampCluster.propagation_latency, ge=0, le=MAX_MS / 1000,
                                       description="seconds")
    worker_io_latency: float = Field(RampCluster.worker_io_latency, ge=0, le=MAX_MS / 1000,
                                     description="seconds")
    worker_memory: float = Field(RampCluster.worker_memory, gt=0, le=MAX_BYTES, description="bytes")

    @model_validator(mode="after")
    def _not_too_large(self) -> Self:
        servers = self.communication_groups * self.racks_per_group * self.servers_per_rack
        if servers > MAX_SERVERS:
            raise ValueError(f"communication_groups x racks_per_group x servers_per_rack = "
                             f"{servers} servers; pacopt handles at most {MAX_SERVERS}")
        groups = self.communication_groups
        if -(-self.servers_per_rack // groups) > groups + 1:
            # RAMP's all-reduce gives a stage of m participants groups // (m - 1) transceivers
            raise ValueError(f"servers_per_rack {self.servers_per_rack} needs more transceivers "
                             f"than {groups} communication groups give RAMP's all-reduce (at "
                             f"most {groups * (groups + 1)} servers per rack)")
        return self


class ModelSpec(SpecModel):
    """The JCT model's settings; every field defaults to PAC-ML's."""

    preset: Literal[PRESETS] = Field(ModelSettings.preset, description=(
        "ddls reproduces the reference simulator's numbers; physical uses consistent units"))
    max_partitions_per_op: int = Field(ModelSettings.max_partitions_per_op, ge=1, le=MAX_SERVERS)
    quantum_ms: float = Field(ModelSettings.quantum_ms, ge=MIN_QUANTUM_MS, le=MAX_MS,
                              description="minimum sub-op time (ms)")
    training_steps: int = Field(ModelSettings.training_steps, ge=1, le=10**9)
    placement: Literal[tuple(PLACERS)] = Field(ModelSettings.placement, description=(
        "the online simulator's placer: first-fit (the reference's), best-fit, or compact "
        "(physical only); solve --placement overrides it"))

    @model_validator(mode="after")
    def _placer_fits_preset(self) -> Self:
        if self.preset not in PLACER_PRESETS[self.placement]:
            raise ValueError(f"placer '{self.placement}' does not fit the '{self.preset}' preset "
                             f"(it fits {', '.join(PLACER_PRESETS[self.placement])})")
        return self


class OpSpec(SpecModel):
    """One forward op, profiled on one A100."""

    id: str = Field(min_length=1)
    forward_ms: float = Field(ge=0, le=MAX_MS)
    backward_ms: float = Field(ge=0, le=MAX_MS)
    activation_bytes: float = Field(ge=0, le=MAX_BYTES)
    parameter_bytes: float = Field(ge=0, le=MAX_BYTES)
    kind: str = Field("", description="informational op type, e.g. Conv2d")


class InlineGraph(SpecModel):
    """A forward graph given inline; the backward graph is derived from it."""

    ops: list[OpSpec] = Field(min_length=1, max_length=MAX_OPS)
    deps: list[Annotated[list[str], Field(min_length=2, max_length=2)]] = Field(
        [], max_length=MAX_DEPS, description="[source, destination] op id pairs (acyclic)")
    join: str | None = Field(None, description="the op whose backward op starts the backward pass "
                                               "(default: the last op without children)")
    name: str | None = Field(None, description="informational; the key in graphs names the graph")


class PipedreamGraph(SpecModel):
    """A PipeDream profile (graph.txt): a path, or a bare model name such as "alexnet", looked
    up in $PACOPT_PIPEDREAM_DIR then ~/.cache/pacopt/pipedream (``pacopt download-pipedream``)."""

    pipedream: str = Field(min_length=1)


class GraphFile(SpecModel):
    """A JSON file holding an inline graph."""

    file: str = Field(min_length=1)


def _graph_form(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    return next((f"<{key}>" for key in ("pipedream", "file") if key in value),
                "<inline>" if "ops" in value else None)


GraphSpec = tagged_union({"<pipedream>": PipedreamGraph, "<file>": GraphFile,
                          "<inline>": InlineGraph}, _graph_form,
                         'must be {"pipedream": path}, {"file": path} or an inline graph '
                         '{"ops": [...], "deps": [...]}')


def _workload_form(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    return "<trace>" if "trace" in value else "<generated>"


AnyWorkload = tagged_union({"<generated>": WorkloadSpec, "<trace>": TraceWorkload}, _workload_form,
                           'must be a generated workload {"graphs": [...], "num_jobs": n, ...} '
                           'or a trace {"trace": {"file": path, "format": ...}}')


class JobEntry(SpecModel):
    """One explicit job."""

    id: str = Field(min_length=1)
    graph: str = Field(description="a key of graphs")
    arrival_ms: float = Field(ge=0, le=MAX_MS)
    max_jct_fraction: Beta = Field(description="beta: the deadline is beta x the sequential JCT")
    training_steps: float | None = Field(None, gt=0, le=MAX_MS, description=(
        "this job's work in training steps (default: model.training_steps); its JCTs and "
        "deadline scale with it"))
    requested_degree: int | None = Field(None, ge=1, le=MAX_SERVERS, description=(
        "the degree the user asked for (a trace's GPUs); the as-requested method plays it"))


class InstanceSpec(SpecModel):
    """A pacopt problem instance: a cluster, job graphs, and the jobs (explicit, generated, or
    both). Times are in ms, sizes in bytes, bandwidth in bytes/s, latencies in seconds."""

    model_config = ConfigDict(title="pacopt instance")

    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    model: ModelSpec = Field(default_factory=ModelSpec)
    graphs: dict[str, GraphSpec] = Field({}, description=(
        "at least one, unless the workload is a trace (it brings the graphs it maps to)"))
    jobs: list[JobEntry] = Field([], max_length=MAX_JOBS)
    workload: AnyWorkload | None = None
    horizon_ms: float | None = Field(None, gt=0, le=MAX_MS, description=(
        "stop the episode here; jobs still running, or arriving at or after it, count as blocked"))

    @model_validator(mode="after")
    def _has_jobs(self) -> Self:
        if not self.jobs and self.workload is None:
            raise ValueError("give explicit 'jobs', a 'workload', or both")
        trace = isinstance(self.workload, TraceWorkload)
        if not self.graphs and not trace:
            raise ValueError("graphs: required field is missing (only a trace workload "
                             "brings its own graphs)")
        size = (0 if self.workload is None else (self.workload.trace.num_jobs or 0) if trace
                else self.workload.num_jobs)
        total = len(self.jobs) + size
        if total > MAX_JOBS:
            raise ValueError(f"{total} jobs (explicit and generated); pacopt handles at most "
                             f"{MAX_JOBS}")
        return self


def instance_json_schema() -> dict:
    """The JSON schema (draft 2020-12) of ``instance.json``, derived from the pydantic models."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            **InstanceSpec.model_json_schema()}


def write_schema(path: str | Path = SCHEMA_PATH) -> Path:
    """Write :func:`instance_json_schema` to ``path`` (default: the committed schema file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(instance_json_schema(), indent=2) + "\n")
    return path


# ----- the checked instance ----------------------------------------------------------------------
@dataclass
class Instance:
    """A validated instance. ``jobs`` are kept sorted by arrival (stable); ``source`` is the file
    it was read from, if any."""

    cluster: RampCluster
    model: ModelSettings
    graphs: dict[str, JobGraph]
    jobs: list[JobSpec]
    horizon_ms: float | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        self.jobs = sorted(self.jobs, key=lambda job: job.arrival_ms)

    def deadline_ms(self, job: JobSpec) -> float:
        """The job's deadline (ms after arrival): beta x its sequential JCT (its graph's, times
        its work scale), computed as :meth:`pacopt.model.jct.JctModel.job_table` does."""
        seq = self.graphs[job.graph].seq_jct_ms(self.model.training_steps)
        scale = self.work_scale(job)
        return job.max_jct_fraction * (seq * scale if scale != 1.0 else seq)

    def work_scale(self, job: JobSpec) -> float:
        """The job's training steps over the model's (1 unless the job has its own amount of
        work, as trace jobs do): every JCT of the job is its graph's times this."""
        if job.training_steps is None:
            return 1.0
        return job.training_steps / self.model.training_steps

    def to_dict(self) -> dict:
        """A self-contained instance JSON dict: inline graphs and explicit jobs, so that a
        generated workload or a PipeDream-based instance can be frozen into one file."""
        data = {
            "cluster": self.cluster.to_dict(),
            "model": self.model.to_dict(),
            "graphs": {name: {k: v for k, v in graph.to_dict().items() if k != "name"}
                       for name, graph in self.graphs.items()},
            "jobs": [{k: v for k, v in asdict(job).items() if v is not None}
                     for job in self.jobs],
        }
        if self.horizon_ms is not None:
            data["horizon_ms"] = self.horizon_ms
        return data


def load_instance(path: str | Path) -> Instance:
    """Read and check an ``instance.json``; relative paths in it resolve against its folder."""
    path = Path(path)
    data = read_json_file(path, "instance")
    if isinstance(data, dict) and "ops" in data and "graphs" not in data:
        raise InputError(f"'{path}' is a graph, not an instance: profile it with `pacopt profile "
                         f"{path}`, or name it in an instance's graphs")
    return instance_from_dict(data, path.parent, source=str(path))


def instance_from_dict(data: Any, base_dir: str | Path = ".", *, source: str | None = None) -> Instance:
    """Check parsed instance JSON and build the :class:`Instance`.

    Relative graph paths resolve against ``base_dir``. Raises :class:`InputError` naming the
    offending field for any problem.
    """
    spec = InstanceSpec.parse(data)
    graphs = {name: _load_graph(name, entry, Path(base_dir)) for name, entry in spec.graphs.items()}
    jobs = []
    for i, job in enumerate(spec.jobs):
        require_graph(job.graph, graphs, f"jobs[{i}].graph")
        jobs.append(JobSpec(**job.model_dump()))
    cluster = RampCluster(**spec.cluster.model_dump(exclude={"topology"}))
    settings = ModelSettings(**spec.model.model_dump())
    if isinstance(spec.workload, TraceWorkload):  # the trace becomes explicit jobs here
        replay = expand_trace(spec.workload.trace, graphs, cluster, settings, base_dir)
        graphs.update(replay.graphs)
        jobs += replay.jobs
    elif spec.workload is not None:
        jobs += generate_jobs(spec.workload, graphs)
    first_use: dict[str, int] = {}
    for i, job in enumerate(jobs):
        j = first_use.setdefault(job.id, i)
        if j != i:  # generated ids are distinct, so jobs[j] is always an explicit job
            where = f"jobs[{i}].id" if i < len(spec.jobs) else "workload"
            raise InputError(f"{where}: job id '{job.id}' is already used by jobs[{j}]")
    return Instance(cluster=cluster, model=settings, graphs=graphs, jobs=jobs,
                    horizon_ms=spec.horizon_ms, source=source)


def _pipedream_path(ref: str, base_dir: Path) -> Path:
    if ref in PIPEDREAM_MODELS:  # a bare model name (these contain neither '/' nor '.txt')
        return find_pipedream(ref)
    return base_dir / Path(ref).expanduser()


def _load_graph(name: str, entry: SpecModel, base_dir: Path) -> JobGraph:
    where = field_path(("graphs", name))
    try:
        if isinstance(entry, PipedreamGraph):
            path = _pipedream_path(entry.pipedream, base_dir)
            check_file(path, "PipeDream graph")
            return check_graph(read_pipedream(path, name))
        if isinstance(entry, GraphFile):
            path = base_dir / Path(entry.file).expanduser()
            where += f" (file '{path}')"
            entry = InlineGraph.parse(read_json_file(path, "graph"))
        return check_graph(graph_from_dict(entry.model_dump(exclude_none=True), name))
    except InputError as err:
        raise InputError(f"{where}: {err}") from None
    except UnicodeDecodeError:
        raise InputError(f"{where}: the PipeDream file is not UTF-8 text") from None
    except TypeError as err:  # the PipeDream parser on a size such as [1; [2]]
        raise InputError(f"{where}: not a valid PipeDream profile: {err}") from None


def check_graph(graph: JobGraph) -> JobGraph:
    """``graph`` if its size and values are within pacopt's limits (:mod:`pacopt.model.input_spec`),
    whatever its source (inline, a file, a PipeDream profile); else InputError saying which."""
    if graph.num_ops > MAX_OPS or len(graph.deps) > MAX_DEPS:
        raise InputError(f"graph '{graph.name}': {graph.num_ops} ops and {len(graph.deps)} "
                         f"dependencies; pacopt handles at most {MAX_OPS} and {MAX_DEPS}")
    for op in graph.ops:
        for key, limit in (("forward_ms", MAX_MS), ("backward_ms", MAX_MS),
                           ("activation_bytes", MAX_BYTES), ("parameter_bytes", MAX_BYTES)):
            if getattr(op, key) > limit:
                raise InputError(f"graph '{graph.name}': op '{op.id}' {key} "
                                 f"{getattr(op, key):g} is above pacopt's limit {limit:g}")
    return graph


def read_json_file(path: str | Path, what: str = "file") -> Any:
    """The parsed JSON of file ``path`` (checked by :func:`check_file`); InputError naming the
    ``what`` and why for an unreadable, oversized, non-UTF-8 or invalid file."""
    path = check_file(path, what)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot read {what} '{path}': {err.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{what} '{path}' is not UTF-8 text") from None
    if path.suffix == ".txt" and not text.lstrip().startswith(("{", "[")):
        raise InputError(f"{what} '{path}' is not JSON (a PipeDream graph? name it in an "
                         "instance's graphs as {\"pipedream\": path})")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        # json's own message for some errors ends in "at" ("Invalid control character at")
        raise InputError(f"{what} '{path}' is not valid JSON: {err.msg.removesuffix(' at')} at "
                         f"line {err.lineno}, column {err.colno}") from None
    except RecursionError:
        raise InputError(f"{what} '{path}': JSON nested too deeply") from None


if __name__ == "__main__":
    print(write_schema())
