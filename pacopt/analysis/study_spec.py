"""Study files (``STUDY.yaml``): their format, checked up front, and their expansion into cells.

A study is a list of grids. A grid is a set of instances (explicit ``instance.json`` files, or
workloads generated from parameters whose list values are crossed) times a list of methods. One
**cell** is one instance run by one method: the unit of work, of resumption and of the tidy
table's rows. Example::

    name: paper-comparison
    grids:
      - name: online
        workload:
          distributions: [A, B, C, D]   # paper names, a fixed beta, or {uniform: [lo, hi]}
          seeds: 3                      # a count (from first_seed, default the held-out seeds)
          num_jobs: 1001                #   or a list of seeds; lists below are crossed
          interarrival_ms: 1000
          preset: ddls
        methods: [para-max, para-min, random, {name: milp, time_limit: 60, threads: 2}]

A grid may replay job traces instead (``trace``: files x windows x loads, see
:class:`TraceGrid` and ``docs/traces.md``); a file is a CSV path relative to the study file, or
the name of a trace of the ElasticFlow release (``cluster04``), found in ``$PACOPT_TRACES_DIR``
or where ``pacopt download-traces`` puts it::

      - name: busiest
        trace:
          files: [cluster04]
          windows: [{window: busiest, num_jobs: 200}]
          loads: [0.5, 1.0]
        methods: [as-requested, elasticflow, min-feasible]

Every problem is reported as one :class:`InputError` line naming the field, before anything runs:
:func:`load_study` checks the format, the method names (against :func:`pacopt.solvers.api.
method_known` when the api offers it) and options (against ``solve``'s signature), the
distributions, and builds every cell's instance (so a missing instance file or graph profile is
found at once).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pacopt.infra.errors import InputError
from pacopt.model.input_spec import SpecModel, field_path
from pacopt.model.instance import ClusterSpec, GraphSpec, instance_from_dict, load_instance
from pacopt.model.paper_workload import HELD_OUT_SEEDS, PAPER_DISTRIBUTIONS, PAPER_GRAPHS
from pacopt.model.placers import check_placer
from pacopt.model.settings import PRESETS
from pacopt.model.sizes import check_result_size
from pacopt.model.trace import DEFAULT_LOAD, DEFAULT_NUM_JOBS, DEFAULT_TIME_COMPRESSION
from pacopt.solvers.api import check_options, check_run, solve
from pacopt.solvers.registry import METHODS, method_family

#: ``solve()`` parameters a study sets itself; every other keyword of ``solve()`` is a method
#: option (``time_limit``, ``threads``, ``seed``, a learned agent's ``checkpoint``, ...).
_NOT_OPTIONS = {"instance", "method", "progress", "model"}
_NUMBER_OPTIONS = {"time_limit": (int, float), "threads": int, "seed": int}


# ----- the format ----------------------------------------------------------------------------------
def _listify(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


class MethodSpec(BaseModel):
    """A method and its options; ``label`` names it in tables and plots (default: ``name``).
    Options are open-ended here (``extra="allow"``): they are checked against ``solve()``."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)
    name: str = Field(min_length=1)
    label: str | None = Field(None, min_length=1)

    @property
    def options(self) -> dict:
        return dict(self.model_extra or {})


def _presets(value: list[str]) -> list[str]:
    """The grid's presets, each one :data:`PRESETS` knows (a pydantic validator's check)."""
    for preset in value:
        if preset not in PRESETS:
            raise ValueError(f"unknown preset '{preset}'; expected one of {', '.join(PRESETS)}")
    return value


class WorkloadGrid(SpecModel):
    """Generated workloads: every combination of the list-valued parameters, for every seed."""

    graphs: list[str] | dict[str, GraphSpec] = Field(
        list(PAPER_GRAPHS), description="PipeDream model names, or name -> graph as in "
                                        "instance.json (paths relative to the study file)")
    distributions: list[Any] = Field(["A"], min_length=1, description=(
        "beta distributions: A, B, C, D (the paper's), a fixed beta, or {uniform: [lo, hi]}"))
    seeds: Annotated[int, Field(ge=1)] | list[Annotated[int, Field(ge=0)]] = Field(
        1, description="a number of seeds counted from first_seed, or a list of seeds")
    first_seed: int = Field(HELD_OUT_SEEDS[0], ge=0)
    num_jobs: list[Annotated[int, Field(ge=1)]] = [1001]
    interarrival_ms: list[Annotated[float, Field(gt=0)]] = [1000.0]
    preset: list[str] = ["ddls"]
    cluster: list[ClusterSpec] = Field(default_factory=lambda: [ClusterSpec()])
    horizon_ms: float | None = Field(None, gt=0)

    @field_validator("distributions", "num_jobs", "interarrival_ms", "preset", "cluster",
                     mode="before")
    @classmethod
    def _one_or_many(cls, value):
        return _listify(value)

    _known_presets = field_validator("preset")(classmethod(lambda cls, value: _presets(value)))

    def seed_list(self) -> list[int]:
        if isinstance(self.seeds, int):
            return list(range(self.first_seed, self.first_seed + self.seeds))
        return list(self.seeds)


class TraceWindow(SpecModel):
    """One window of a trace (:class:`pacopt.model.trace.TraceSpec`'s window fields)."""

    start_s: float | None = Field(None, ge=0)
    num_jobs: int | None = Field(DEFAULT_NUM_JOBS, ge=1)
    window: Literal["first", "busiest"] = "first"

    @property
    def label(self) -> str:
        size = "all" if self.num_jobs is None else str(self.num_jobs)
        if self.window == "busiest":
            return f"busiest{size}"
        return f"first{size}" + ("" if self.start_s is None else f"from{self.start_s:.0f}s")


class TraceGrid(SpecModel):
    """Trace workloads (``docs/traces.md``): every file x window x load x preset x cluster x
    seed; each becomes an instance with a ``workload.trace`` section."""

    files: list[str] = Field(min_length=1, description=(
        "trace CSVs, relative to the study file, or trace names (cluster04: "
        "$PACOPT_TRACES_DIR or `pacopt download-traces`)"))
    format: Literal["elasticflow", "elasticflow-raw"] = "elasticflow"
    windows: list[TraceWindow] = Field(default_factory=lambda: [TraceWindow()], min_length=1)
    loads: list[Annotated[float, Field(gt=0)] | None] = Field(
        [DEFAULT_LOAD], min_length=1, description="offered loads; null: the trace's own rate")
    time_compression: float = Field(DEFAULT_TIME_COMPRESSION, gt=0)
    preset: list[str] = ["ddls"]
    cluster: list[ClusterSpec] = Field(default_factory=lambda: [ClusterSpec()])
    seeds: list[Annotated[int, Field(ge=0)]] = Field([0], min_length=1, description=(
        "seeds of the graph and beta draws (they matter for elasticflow-raw only)"))
    models: dict[str, str] = Field({}, description="model_name -> graph name, over the defaults")
    graphs: list[str] | None = Field(None, min_length=1,
                                     description="elasticflow-raw: the graphs jobs are drawn from")
    horizon_ms: float | None = Field(None, gt=0)

    @field_validator("windows", "loads", "preset", "cluster", "files", mode="before")
    @classmethod
    def _one_or_many(cls, value):
        return _listify(value)

    _known_presets = field_validator("preset")(classmethod(lambda cls, value: _presets(value)))


class GridSpec(SpecModel):
    """Instances (``workload``, ``trace`` or ``instances``) times ``methods``."""

    name: str = Field("grid", pattern=r"^[A-Za-z0-9_.-]+$")
    workload: WorkloadGrid | None = None
    trace: TraceGrid | None = None
    instances: list[str] = Field([], description="instance.json files, relative to the study")
    methods: list[MethodSpec] = Field(min_length=1)

    @field_validator("methods", mode="before")
    @classmethod
    def _method_objects(cls, value):
        return [{"name": m} if isinstance(m, str) else m for m in _listify(value)]


class StudySpec(SpecModel):
    """A study: named grids of instances x methods."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    grids: list[GridSpec] = Field(min_length=1)


# ----- cells ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One instance run by one method; ``id`` is stable across runs (it names the result file)."""

    id: str
    instance_key: str
    method: str            # the label
    method_name: str
    options: dict          # keyword arguments for solve(), the run seed included
    params: dict           # the cell's parameters, as table columns
    instance_data: dict | None = None  # generated: instance.json data
    instance_file: str | None = None
    base_dir: str = "."

    @property
    def cpus(self) -> int:
        """CPUs the cell asks for: its ``threads`` option, else 1."""
        return int(self.options.get("threads") or 1)


@dataclass
class Study:
    """A checked study: its spec, the file it came from and its cells, in table order."""

    spec: StudySpec
    path: Path | None
    cells: list[Cell] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec.name


#: A study file's limits: its size, and the values it may expand to through YAML aliases (a
#: "billion laughs" file of a few hundred bytes expands to billions: measured, 56 s and 2.4 GB
#: before pydantic could even reject it). Real studies hold hundreds of values.
MAX_STUDY_BYTES = 16 * 2**20
MAX_STUDY_VALUES = 100_000


def safe_yaml(text: str, what: str) -> Any:
    """``yaml.safe_load(text)``, refusing (InputError naming ``what``) a document whose aliases
    expand it beyond :data:`MAX_STUDY_VALUES` values or refer to themselves: the node graph is
    measured before any Python object is built from it."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        sizes: dict[int, int] = {}

        def size(each, open_: set) -> int:
            key = id(each)
            if key in sizes:
                return sizes[key]
            if key in open_:
                raise InputError(f"{what}: a YAML alias refers to itself")
            open_.add(key)
            if isinstance(each, yaml.MappingNode):
                total = 1 + sum(size(k, open_) + size(v, open_) for k, v in each.value)
            elif isinstance(each, yaml.SequenceNode):
                total = 1 + sum(size(v, open_) for v in each.value)
            else:
                total = 1
            open_.discard(key)
            if total > MAX_STUDY_VALUES:
                raise InputError(f"{what} expands to more than {MAX_STUDY_VALUES:,} values "
                                 "(YAML aliases repeat its parts); write it out plainly")
            sizes[key] = total
            return total

        try:
            size(node, set())
        except RecursionError:
            raise InputError(f"{what} is nested too deeply") from None
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_study(path: str | Path) -> Study:
    """Read and check ``STUDY.yaml`` and expand it into cells (raises :class:`InputError`)."""
    path = Path(path)
    try:
        if path.exists() and not path.is_file():  # a folder, or a FIFO that would never end
            raise InputError(f"study '{path}' is not a regular file")
        if path.exists() and path.stat().st_size > MAX_STUDY_BYTES:
            raise InputError(f"study '{path}' is larger than {MAX_STUDY_BYTES >> 20} MB")
        data = safe_yaml(path.read_text(encoding="utf-8"), f"study '{path}'")
    except OSError as err:
        raise InputError(f"cannot read study '{path}': {err.strerror}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise InputError(f"study '{path}' is not valid YAML: {str(err).splitlines()[0]}") from None
    except RecursionError:  # the YAML parser itself recurses per nesting level
        raise InputError(f"study '{path}' is nested too deeply") from None
    if isinstance(data, dict):
        data.setdefault("name", re.sub(r"[^A-Za-z0-9_.-]", "-", path.stem))
    return study_from_dict(data, path.parent, path=path)


def study_from_dict(data: Any, base_dir: str | Path = ".", path: Path | None = None) -> Study:
    """Check parsed study data and expand it; relative paths resolve against ``base_dir``."""
    spec = StudySpec.parse(_yaml_numbers(data))
    study = Study(spec=spec, path=path)
    ids: set[str] = set()
    checked: set[tuple] = set()  # (method, checkpoint, placer, cluster, model) built once
    for g, grid in enumerate(spec.grids):
        where = ("grids", g)
        if (grid.workload is not None) + (grid.trace is not None) + bool(grid.instances) != 1:
            raise InputError(f"{field_path(where)}: give exactly one of 'workload', 'trace' and "
                             "'instances'")
        methods = [_check_method(m, (*where, "methods", i)) for i, m in enumerate(grid.methods)]
        instances = (_workload_instances(grid, Path(base_dir), where) if grid.workload
                     else _trace_instances(grid, Path(base_dir), where) if grid.trace
                     else _file_instances(grid, Path(base_dir), where))
        for key, params, run_seed, data_or_file, instance in instances:
            for method in methods:
                options = {"seed": run_seed, **method.options}
                label = method.label or method.name
                _check_cell(instance, method, options, f"{field_path(where)} ({params['slug']}): "
                            f"method '{label}'", checked)
                if options.get("placement") is not None:  # the placer must fit the preset
                    try:
                        check_placer(options["placement"], params["preset"], "placement")
                    except InputError as err:
                        raise InputError(f"{field_path(where)} ({params['slug']}): method "
                                         f"'{label}': {err}") from None
                cell_id = _cell_id(params["slug"], label, key, method.name, options)
                if cell_id in ids:
                    raise InputError(f"{field_path(where)}: method '{label}' appears twice on the "
                                     f"same instance; give one of them a different label")
                ids.add(cell_id)
                study.cells.append(Cell(
                    id=cell_id, instance_key=key, method=label, method_name=method.name,
                    options=_resolved(options, Path(base_dir)),
                    params={k: v for k, v in params.items() if k != "slug"},
                    instance_data=data_or_file if isinstance(data_or_file, dict) else None,
                    instance_file=data_or_file if isinstance(data_or_file, str) else None,
                    base_dir=str(base_dir)))
    return study


def _yaml_numbers(data: Any) -> Any:
    """YAML reads ``1e6`` as a string (it wants ``1.0e+6``): turn such strings into floats."""
    if isinstance(data, dict):
        return {k: _yaml_numbers(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_yaml_numbers(v) for v in data]
    if isinstance(data, str) and re.fullmatch(r"[-+]?\d+(\.\d*)?[eE][-+]?\d+", data):
        return float(data)
    return data


def _check_method(method: MethodSpec, loc: tuple) -> MethodSpec:
    where = field_path(loc)
    if not method_known(method.name):
        raise InputError(f"{where}.name: unknown method '{method.name}'; known: "
                         f"{', '.join(METHODS)}")
    params = inspect.signature(solve).parameters
    for option, value in method.options.items():
        if option in _NOT_OPTIONS or option not in params:
            known = [p for p in params if p not in _NOT_OPTIONS]
            raise InputError(f"{where}.{option}: unknown method option; known: "
                             f"label, {', '.join(known)}")
        kind = _NUMBER_OPTIONS.get(option)
        if kind and (isinstance(value, bool) or not isinstance(value, kind)):
            raise InputError(f"{where}.{option}: must be a number, got {json.dumps(value)}")
    options = method.options  # the api's own ranges (time limit > 0, threads >= 1, ...)
    try:
        check_options(method.name, options.get("time_limit"), options.get("threads"),
                      options.get("seed"), options.get("placement"))
    except InputError as err:
        raise InputError(f"{where}: {err}") from None
    return method


def method_known(name: str) -> bool:
    """Whether ``solve`` knows method ``name`` (parametric names such as ``fixed:4`` included)."""
    try:
        method_family(name)
    except InputError:
        return False
    return True


def _beta(value: Any, loc: tuple) -> tuple[str, Any]:
    """A distribution entry -> (its label in tables, its instance.json form)."""
    if isinstance(value, str) and value in PAPER_DISTRIBUTIONS:
        return value, {"paper": value}
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1:
        return f"{value:g}", float(value)
    if (isinstance(value, dict) and set(value) <= {"uniform", "decimals"}
            and isinstance(value.get("uniform"), list) and len(value["uniform"]) == 2):
        lo, hi = value["uniform"]
        return f"U{lo:g}-{hi:g}", {"decimals": 2, **value}
    raise InputError(f"{field_path(loc)}: unknown beta distribution {json.dumps(value)}; expected "
                     f"one of {', '.join(PAPER_DISTRIBUTIONS)}, a number in (0, 1] or "
                     "{uniform: [lo, hi]}")


def _workload_instances(grid: GridSpec, base_dir: Path, where: tuple):
    """(instance key, params, run seed, instance data) for every generated instance of a grid."""
    w = grid.workload
    graphs = ({name: {"pipedream": name} for name in w.graphs} if isinstance(w.graphs, list)
              else {name: g.model_dump(exclude_none=True) for name, g in w.graphs.items()})
    betas = [_beta(d, (*where, "workload", "distributions", i))
             for i, d in enumerate(w.distributions)]
    for (label, beta), jobs, gap, preset, cluster, seed in itertools.product(
            betas, w.num_jobs, w.interarrival_ms, w.preset, w.cluster, w.seed_list()):
        cluster_data = cluster.model_dump(exclude={"topology"})
        data = {"cluster": cluster_data, "model": {"preset": preset}, "graphs": graphs,
                "workload": {"graphs": list(graphs), "num_jobs": jobs, "interarrival_ms": gap,
                             "max_jct_fraction": beta, "seed": seed}}
        if w.horizon_ms is not None:
            data["horizon_ms"] = w.horizon_ms
        shape = (f"{cluster.communication_groups}x{cluster.racks_per_group}x"
                 f"{cluster.servers_per_rack}")
        params = {"grid": grid.name, "distribution": label, "seed": seed, "num_jobs": jobs,
                  "interarrival_ms": gap, "preset": preset, "cluster": shape,
                  "num_servers": (cluster.communication_groups * cluster.racks_per_group
                                  * cluster.servers_per_rack),
                  "horizon_ms": w.horizon_ms, "instance_file": None,
                  "slug": f"{grid.name}-{label}-s{seed}-n{jobs}-ia{gap:g}-{preset}-{shape}"}
        try:  # builds the instance now: unknown graphs, missing profiles are found before running
            instance = instance_from_dict(data, base_dir)
        except InputError as err:
            raise InputError(f"{field_path(where)} ({params['slug']}): {err}") from None
        yield _content_key(instance), params, seed, data, instance


def _trace_instances(grid: GridSpec, base_dir: Path, where: tuple):
    """(instance key, params, run seed, instance data) for every trace instance of a grid: the
    ``distribution`` column names the trace, window and load (what the blocking plot groups)."""
    t = grid.trace
    for file, window, load, preset, cluster, seed in itertools.product(
            t.files, t.windows, t.loads, t.preset, t.cluster, t.seeds):
        trace = {"file": file, "format": t.format, **window.model_dump(), "load": load,
                 "time_compression": t.time_compression, "seed": seed,
                 **({"models": t.models} if t.models else {}),
                 **({"graphs": t.graphs} if t.graphs is not None else {})}
        data = {"cluster": cluster.model_dump(exclude={"topology"}), "model": {"preset": preset},
                "workload": {"trace": trace}}
        if t.horizon_ms is not None:
            data["horizon_ms"] = t.horizon_ms
        shape = (f"{cluster.communication_groups}x{cluster.racks_per_group}x"
                 f"{cluster.servers_per_rack}")
        stem = Path(file).stem
        load_label = "native" if load is None else f"{load:g}"
        params = {"grid": grid.name, "distribution": f"{stem} {window.label} L{load_label}",
                  "seed": seed, "num_jobs": window.num_jobs, "interarrival_ms": None,
                  "preset": preset, "cluster": shape,
                  "num_servers": (cluster.communication_groups * cluster.racks_per_group
                                  * cluster.servers_per_rack),
                  "horizon_ms": t.horizon_ms, "instance_file": None, "trace": stem,
                  "window": window.label, "load": load,
                  "slug": f"{grid.name}-{stem}-{window.label}-L{load_label}-s{seed}-{preset}-"
                          f"{shape}"}
        try:  # reads and maps the trace now: a missing file or bad row is found before running
            instance = instance_from_dict(data, base_dir)
        except InputError as err:
            raise InputError(f"{field_path(where)} ({params['slug']}): {err}") from None
        params["num_jobs"] = len(instance.jobs)
        yield _content_key(instance), params, seed, data, instance


def _file_instances(grid: GridSpec, base_dir: Path, where: tuple):
    """(instance key, params, run seed, path) for every instance file of a grid."""
    for i, name in enumerate(grid.instances):
        path = (base_dir / Path(name).expanduser()).resolve()
        try:
            instance = load_instance(path)
        except InputError as err:
            raise InputError(f"{field_path((*where, 'instances', i))}: {err}") from None
        c = instance.cluster
        params = {"grid": grid.name, "distribution": None, "seed": None,
                  "num_jobs": len(instance.jobs), "interarrival_ms": None,
                  "preset": instance.model.preset,
                  "cluster": f"{c.communication_groups}x{c.racks_per_group}x{c.servers_per_rack}",
                  "num_servers": c.num_servers, "horizon_ms": instance.horizon_ms,
                  "instance_file": str(path), "slug": f"{grid.name}-{path.stem}"}
        yield _content_key(instance), params, 0, str(path), instance


def _content_key(instance) -> str:
    """An instance's cell key: a digest of its content (cluster, model, horizon, each graph's
    content fingerprint, the jobs), never of the path it was reached by, so that a study resumes
    however its file or folder is spelled (``studies/x.yaml``, ``./x.yaml``, an absolute path, a
    notebook's working folder)."""
    return _digest(instance.cluster.to_dict(), instance.model.to_dict(), instance.horizon_ms,
                   {name: graph.fingerprint for name, graph in sorted(instance.graphs.items())},
                   [dataclasses.astuple(job) for job in instance.jobs])


def _check_cell(instance, method: MethodSpec, options: dict, where: str, checked: set) -> None:
    """Every check ``solve`` makes before running this cell
    (:func:`pacopt.solvers.api.check_run`: the result's size, the placer, the policy built for
    this instance: ``fixed:99`` where degrees stop at 16, a checkpoint for another cluster), so a
    bad cell is one line before anything runs instead of a failure in every cell. Policies are
    built once per method, checkpoint, placer, cluster and model."""
    try:
        check_result_size(instance)
        key = (method.name, options.get("checkpoint"), options.get("placement"),
               instance.cluster, instance.model)
        if key not in checked:
            check_run(instance, method.name, checkpoint=options.get("checkpoint"),
                      placement=options.get("placement"))
            checked.add(key)
    except InputError as err:
        raise InputError(f"{where}: {err}") from None


def _resolved(options: dict, base_dir: Path) -> dict:
    """A cell's options as ``solve`` takes them: a relative ``checkpoint`` resolved against the
    study's folder, as every other path in a study is (its cell id keeps the path as written)."""
    checkpoint = options.get("checkpoint")
    if isinstance(checkpoint, str) and not Path(checkpoint).expanduser().is_absolute():
        return {**options, "checkpoint": str((base_dir / checkpoint).resolve())}
    return options


def _digest(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def _cell_id(slug: str, label: str, key: str, method: str, options: dict) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", label)
    return f"{slug}.{safe}.{_digest(key, label, method, options)}"
