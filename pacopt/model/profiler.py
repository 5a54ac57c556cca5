"""Profile a PyTorch model defined in code into a :class:`JobGraph` (a roofline estimate, no GPU).

The model is traced with ``torch.fx`` and its graph is run once on the example input on the
``meta`` device (shapes and dtypes only, so it is fast, needs no GPU and is deterministic). Each fx
node becomes one forward op whose time is a roofline estimate for one A100. PipeDream's profiles
(``pacopt.model.pipedream``) are measured; these graphs are estimated, so use them for workloads
that have no measured profile.

This module and :mod:`pacopt.model.zoo` are the only parts of ``pacopt.model`` that import torch.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

from pacopt.infra.extras import require

# torch is the learned extra's: without it, importing this module is one line naming the extra
require("learned", "torch", "profiling a torch model (pacopt.model.profiler)")

import torch
from torch import fx, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from pacopt.infra.errors import InputError
from pacopt.model.graph import JobGraph, Op

#: FLOPs per output element for ops the FLOP counter has no formula for (elementwise, norms,
#: pooling, softmax, embedding lookups). These ops are memory bound on an A100 for any small
#: constant, so its exact value hardly matters.
FLOPS_PER_ELEMENT = 4
#: Decimal places kept for times (ms) in profiled graphs and graph files.
MS_DIGITS = 6
#: fx node kinds that become ops (``placeholder`` too, as the ``Input`` op, if asked).
_COMPUTE_NODES = ("call_module", "call_function", "call_method")


@dataclass(frozen=True)
class Hardware:
    """The roofline constants of one accelerator.

    ``peak_flops`` (FLOP/s), ``memory_bandwidth`` (B/s, device memory), ``kernel_overhead_ms``
    (fixed cost added to every op that runs a kernel), ``host_bandwidth`` (B/s, host to device,
    for the ``Input`` op).
    """

    name: str
    peak_flops: float
    memory_bandwidth: float
    kernel_overhead_ms: float
    host_bandwidth: float

    def __post_init__(self) -> None:
        for field in ("peak_flops", "memory_bandwidth", "kernel_overhead_ms", "host_bandwidth"):
            value = getattr(self, field)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise InputError(f"hardware '{self.name}': {field} must be a number > 0, got {value!r}")

    def roofline_ms(self, flops: float, bytes_moved: float) -> float:
        """One kernel's time: compute or memory bound, whichever is slower, plus the overhead."""
        compute_s = flops / self.peak_flops
        memory_s = bytes_moved / self.memory_bandwidth
        return 1e3 * max(compute_s, memory_s) + self.kernel_overhead_ms


#: NVIDIA A100 80 GB SXM: 19.5 TFLOP/s dense FP32 (no tensor cores: PyTorch's default for matmul),
#: 2.039 TB/s HBM2e, 5 us per kernel launch, 25 GB/s host to device (PCIe 4.0 x16, achieved).
A100 = Hardware(name="A100", peak_flops=19.5e12, memory_bandwidth=2.039e12,
                kernel_overhead_ms=5e-3, host_bandwidth=25e9)


@dataclass(frozen=True)
class _NodeRun:
    """What running one fx node on the example input showed."""

    flops: int
    moves_data: bool  # False if it dispatched only view ops (or none): a zero-cost op
    out_bytes: int
    out_elements: int


class _AtenRecorder(TorchDispatchMode):
    """Records whether any dispatched aten op is more than a view of its inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.moves_data = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.moves_data = self.moves_data or not func.is_view
        return func(*args, **(kwargs or {}))


class _Tracer(fx.Tracer):
    """fx's default tracer, with extra leaf classes, remembering the module being traced."""

    def __init__(self, leaf_modules: tuple[type[nn.Module], ...]) -> None:
        super().__init__()
        self.leaf_modules = leaf_modules
        self.where = ""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return isinstance(m, self.leaf_modules) or super().is_leaf_module(m, module_qualified_name)

    def call_module(self, m, forward, args, kwargs):
        outer = self.where
        self.where = self.path_of_module(m)
        out = super().call_module(m, forward, args, kwargs)
        self.where = outer  # not restored on error, so it then names the failing submodule
        return out


class _Runner(fx.Interpreter):
    """Runs the traced graph, counting each node's FLOPs and output sizes."""

    def __init__(self, module: fx.GraphModule, name: str) -> None:
        super().__init__(module)
        self.name = name
        self.runs: dict[fx.Node, _NodeRun] = {}

    def run_node(self, n: fx.Node):
        with FlopCounterMode(display=False) as counter, _AtenRecorder() as recorder:
            try:
                out = super().run_node(n)
            except Exception as exc:  # any failure is the model's or the input's: report it plainly
                raise InputError(f"model '{self.name}': op '{n.name}' ({_kind(self.module, n)}) "
                                 f"failed on the example input: {type(exc).__name__}: {exc}") from None
        tensors = _tensors(out)
        self.runs[n] = _NodeRun(flops=counter.get_total_flops(), moves_data=recorder.moves_data,
                                out_bytes=sum(_nbytes(t) for t in tensors),
                                out_elements=sum(t.numel() for t in tensors))
        return out


def _tensors(value) -> list[torch.Tensor]:
    """The tensors in a node's value (a tensor, or nested tuples/lists/dicts of them)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _kind(module: nn.Module, n: fx.Node) -> str:
    if n.op == "placeholder":
        return "Input"
    if n.op == "call_module":
        return type(module.get_submodule(n.target)).__name__
    return n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))


def _parameters(module: nn.Module, n: fx.Node) -> list[nn.Parameter]:
    """The parameters an op reads: its module's (call_module) and those of its get_attr inputs."""
    params = list(module.get_submodule(n.target).parameters()) if n.op == "call_module" else []
    for src in n.all_input_nodes:
        if src.op == "get_attr":
            owner, _, attr = src.target.rpartition(".")
            value = getattr(module.get_submodule(owner), attr)
            if isinstance(value, nn.Parameter):
                params.append(value)
    return params


def _meta_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` in eval mode with every parameter and buffer on the meta device.

    Pre-filling deepcopy's memo swaps each tensor for a meta one without copying its data, and
    keeps tied parameters tied (``Module.to("meta")`` would untie them).
    """
    memo = {}
    for p in model.parameters():
        memo[id(p)] = nn.Parameter(torch.empty_like(p, device="meta"), p.requires_grad)
    for b in model.buffers():
        memo[id(b)] = torch.empty_like(b, device="meta")
    return copy.deepcopy(model, memo).eval()


def profile_model(model: nn.Module, example_input: torch.Tensor | tuple, name: str, *,
                  hardware: Hardware = A100, include_input_op: bool = True,
                  leaf_modules: tuple[type[nn.Module], ...] = ()) -> JobGraph:
    """Estimate the forward job graph of one training step of ``model`` on ``hardware``.

    ``example_input`` is the model's input (a tensor, or a tuple for several positional
    arguments); its batch size is the job's batch size. Only its shape and dtype are used: the
    model is run once, in eval mode and without gradients, on the meta device (so leaf modules
    must not depend on tensor values), and ``model`` itself is not changed.

    One op per fx node that calls a module, function or method, in fx (topological) order, with
    the fx node name as its id and the module class or function name as its kind. ``torch.nn``
    layers, and the classes in ``leaf_modules``, are single ops. ``get_attr`` and ``output``
    nodes are dropped, and edges through them reconnected. Per op:

    * ``activation_bytes``: the bytes of the op's output tensors (summed if several);
    * ``parameter_bytes``: the bytes of the parameters it reads (its module's, plus any
      ``get_attr`` parameter it consumes), each parameter counted once, on its first op;
    * ``forward_ms``: ``hardware.roofline_ms(flops, input + output + parameter bytes)``, FLOPs
      from ``torch.utils.flop_counter`` (conv, matmul, linear, attention); where it counts none
      (elementwise, norms, pooling, softmax, ...) ``FLOPS_PER_ELEMENT`` x output elements;
    * ``backward_ms``: 2 x forward for ops that read parameters (gradients of both the input and
      the weights), 1 x forward otherwise (gradient of the input only);
    * ops that only make views (view, reshape, flatten, transpose, size, getitem, eval-mode
      dropout, identity: nothing but aten view ops dispatched) cost 0 ms, like PipeDream's.

    With ``include_input_op``, each input is an ``Input`` op moving its bytes from the host at
    ``hardware.host_bandwidth``, with no backward, as in PipeDream's profiles. The join op is the
    last op (the forward sink producing the loss or logits). Times are rounded to 1e-6 ms and
    bytes to integers, as :func:`pacopt.model.graph_sources.save_graph` writes them.

    Raises :class:`InputError` if the model cannot be traced or fails on the example input.
    """
    tracer = _Tracer(tuple(leaf_modules))
    try:
        graph = tracer.trace(model)
    except Exception as exc:  # fx raises many types; users need the reason, not the traceback
        where = f" (in submodule '{tracer.where}')" if tracer.where else ""
        raise InputError(
            f"model '{name}' cannot be symbolically traced by torch.fx{where}: "
            f"{type(exc).__name__}: {exc}. Python control flow must not depend on tensor values; "
            "a submodule whose control flow depends only on shapes can be passed in "
            "leaf_modules") from None
    module = fx.GraphModule(_meta_copy(model), graph)
    inputs = example_input if isinstance(example_input, tuple) else (example_input,)
    runner = _Runner(module, name)
    with torch.no_grad():
        runner.run(*(x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs))

    ops: list[Op] = []
    deps: list[tuple[int, int]] = []
    feeds: dict[fx.Node, tuple[int, ...]] = {}  # the ops whose data a node carries
    counted: set[int] = set()  # ids of parameters already attributed to an op
    for n in graph.nodes:
        sources = tuple(dict.fromkeys(i for src in n.all_input_nodes for i in feeds[src]))
        if n.op == "placeholder" and include_input_op:
            size = runner.runs[n].out_bytes
            upload_ms = round(1e3 * size / hardware.host_bandwidth, MS_DIGITS)
            op = Op(id=n.name, kind="Input", forward_ms=upload_ms, backward_ms=0.0,
                    activation_bytes=float(size), parameter_bytes=0.0)
        elif n.op in _COMPUTE_NODES:
            op = _compute_op(module, n, runner.runs, hardware, counted)
        else:
            feeds[n] = sources
            continue
        deps.extend((i, len(ops)) for i in sources)
        feeds[n] = (len(ops),)
        ops.append(op)
    if not ops:
        raise InputError(f"model '{name}' has no ops to profile")
    return JobGraph(name=name, ops=tuple(ops), deps=tuple(deps), join=len(ops) - 1)


def _compute_op(module: nn.Module, n: fx.Node, runs: dict[fx.Node, _NodeRun], hardware: Hardware,
                counted: set[int]) -> Op:
    run = runs[n]
    params = _parameters(module, n)
    owned = sum(_nbytes(p) for p in params if id(p) not in counted)
    counted.update(id(p) for p in params)
    forward_ms = backward_ms = 0.0
    if run.moves_data:
        flops = run.flops or FLOPS_PER_ELEMENT * run.out_elements
        read = sum(runs[src].out_bytes for src in n.all_input_nodes if src.op != "get_attr")
        weights = sum(_nbytes(p) for p in params)
        forward_ms = hardware.roofline_ms(flops, read + run.out_bytes + weights)
        backward_ms = (2 if params else 1) * forward_ms
    return Op(id=n.name, kind=_kind(module, n), forward_ms=round(forward_ms, MS_DIGITS),
              backward_ms=round(backward_ms, MS_DIGITS), activation_bytes=float(run.out_bytes),
              parameter_bytes=float(owned))
