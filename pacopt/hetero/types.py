"""Resource types of a heterogeneous cluster (``types.json``): reading, checking, per-type op times.

A types file names worker types, each with a price per instance-hour, a roofline (peak FLOP/s,
memory bandwidth, kernel overhead, host bandwidth: the constants of
:class:`pacopt.model.profiler.Hardware`) and a ``speed_factor`` relative to the A100 that
measured graphs were profiled on; and the links between types (bandwidth in B/s, latency in s)::

    {"max_replicas": 64,
     "types": {"a100": {"price_per_hour": 4.1, "peak_flops": 19.5e12,
                        "memory_bandwidth": 2.039e12, "kernel_overhead_ms": 0.005,
                        "host_bandwidth": 25e9, "speed_factor": 1.0}, ...},
     "links": {"default": {"bandwidth": 3.125e9, "latency": 2e-5},
               "pairs": [{"types": ["a100", "a100"], "bandwidth": 5e10, "latency": 5e-6}]}}

A pair's link serves both directions; ``default`` serves every pair not listed, including a type
with itself (the link between two replicas of one stage). Bad files raise one
:class:`InputError` naming the field, as instance files do.

**Per-type op times** (:func:`type_op_times`). A graph pacopt profiled itself from a model of its
zoo (``cnn``, ``resnet``, ``transformer``: recognised by name and content) is re-profiled on each
type's roofline, so a memory-bound op gains less from a type with more FLOP/s than a
compute-bound one. Any other graph (PipeDream's measured profiles, inline graphs) carries only A100
times, so an op's time on a type is its A100 time divided by the type's ``speed_factor``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Self

import numpy as np
from pydantic import Field, model_validator

from pacopt.infra.errors import InputError
from pacopt.model.graph import JobGraph
from pacopt.model.input_spec import SpecModel

#: The bundled example types (illustrative prices and speeds; see the file's ``note``).
EXAMPLE_TYPES = Path(__file__).resolve().parents[2] / "examples" / "hetero" / "types.json"


class TypeSpec(SpecModel):
    """One worker type: an instance holds one such device."""

    price_per_hour: float = Field(ge=0, description="price of one instance per hour ($)")
    peak_flops: float = Field(gt=0, description="FLOP/s (roofline)")
    memory_bandwidth: float = Field(gt=0, description="device memory B/s (roofline)")
    kernel_overhead_ms: float = Field(gt=0, description="fixed time per kernel (roofline)")
    host_bandwidth: float = Field(gt=0, description="host to device B/s (the Input op)")
    speed_factor: float = Field(gt=0, description="speed relative to an A100 on measured graphs")
    note: str = ""


class LinkSpec(SpecModel):
    """A network link: bandwidth (B/s) and latency (s)."""

    bandwidth: float = Field(gt=0, description="bytes/s")
    latency: float = Field(ge=0, description="seconds")


class PairLinkSpec(LinkSpec):
    """The link between two named types (either order)."""

    types: list[str] = Field(min_length=2, max_length=2)


class LinksSpec(SpecModel):
    """The default link and the pairs that differ from it."""

    default: LinkSpec
    pairs: list[PairLinkSpec] = []


class TypesSpec(SpecModel):
    """The whole types file."""

    note: str = ""
    max_replicas: int = Field(64, ge=1, description="most data-parallel replicas of one stage")
    types: dict[str, TypeSpec] = Field(min_length=1)
    links: LinksSpec

    @model_validator(mode="after")
    def _known_pairs(self) -> Self:
        seen = set()
        for i, pair in enumerate(self.links.pairs):
            for name in pair.types:
                if name not in self.types:
                    raise ValueError(f"links.pairs[{i}].types names unknown type '{name}'")
            key = frozenset(pair.types)
            if key in seen:
                raise ValueError(f"links.pairs[{i}]: the pair {pair.types} is listed twice")
            seen.add(key)
        return self


@dataclass(frozen=True)
class Link:
    """A link's bandwidth (B/s) and latency (s)."""

    bandwidth: float
    latency: float


@dataclass(frozen=True)
class ResourceTypes:
    """Checked types: ``names`` in file order, their specs, and the link of every ordered pair."""

    names: tuple[str, ...]
    specs: tuple[TypeSpec, ...]
    links: dict[tuple[str, str], Link]
    max_replicas: int

    @property
    def prices(self) -> np.ndarray:
        """Price per instance-hour of each type, in ``names`` order."""
        return np.array([s.price_per_hour for s in self.specs])

    def link(self, a: str, b: str) -> Link:
        """The link between types ``a`` and ``b`` (either order)."""
        return self.links[a, b]


def types_from_dict(data, source: str = "types") -> ResourceTypes:
    """Check a parsed types file; raises :class:`InputError` naming the bad field."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: must be an object with 'types' and 'links'")
    try:
        spec = TypesSpec.parse(data)
    except InputError as err:
        raise InputError(f"{source}: {err}") from None
    names = tuple(spec.types)
    default = Link(spec.links.default.bandwidth, spec.links.default.latency)
    links = {(a, b): default for a in names for b in names}
    for pair in spec.links.pairs:
        a, b = pair.types
        links[a, b] = links[b, a] = Link(pair.bandwidth, pair.latency)
    return ResourceTypes(names=names, specs=tuple(spec.types.values()), links=links,
                         max_replicas=spec.max_replicas)


def load_types(path: str | Path) -> ResourceTypes:
    """Read and check a types file (the checked JSON reader of instances: a regular file of at
    most 256 MB, UTF-8, valid JSON, not nested too deeply; then the format)."""
    from pacopt.model.instance import read_json_file

    return types_from_dict(read_json_file(path, "types file"), str(path))


# ----- per-type op times -----------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _zoo_profile(name: str, hardware=None) -> JobGraph:
    from pacopt.model.profiler import A100, profile_model
    from pacopt.model.zoo import ZOO

    model, example_input = ZOO[name]()
    return profile_model(model, example_input, name, hardware=hardware or A100)


def is_zoo_graph(graph: JobGraph) -> bool:
    """Whether ``graph`` is pacopt's own A100 profile of the zoo model of the same name."""
    from pacopt.model.graph_sources import EXAMPLES_DIR

    if not (EXAMPLES_DIR / f"{graph.name}.json").is_file():  # no zoo model: skip importing torch
        return False
    from pacopt.model.zoo import ZOO

    return graph.name in ZOO and _zoo_profile(graph.name).fingerprint == graph.fingerprint


def type_op_times(graph: JobGraph, types: ResourceTypes) -> tuple[np.ndarray, str]:
    """Per-op step time (forward + backward, ms) on each type: an ``(num_ops, num_types)`` array,
    and how it was obtained (``roofline`` or ``speed_factor``; see the module docstring)."""
    a100 = np.array([op.forward_ms + op.backward_ms for op in graph.ops])
    if not is_zoo_graph(graph):
        return a100[:, None] / np.array([s.speed_factor for s in types.specs])[None, :], \
            "speed_factor"
    from pacopt.model.profiler import Hardware

    columns = []
    for name, s in zip(types.names, types.specs):
        hardware = Hardware(name=name, peak_flops=s.peak_flops, memory_bandwidth=s.memory_bandwidth,
                            kernel_overhead_ms=s.kernel_overhead_ms, host_bandwidth=s.host_bandwidth)
        profiled = _zoo_profile(graph.name, hardware)
        columns.append([op.forward_ms + op.backward_ms for op in profiled.ops])
    return np.array(columns).T, "roofline"
