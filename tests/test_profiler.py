"""The model profiler (torch.fx + roofline) and the bundled example graphs it produced."""

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from pacopt.infra.errors import InputError
from pacopt.model.graph import graph_from_dict
from pacopt.model.graph_sources import read_graph_file, save_graph
from pacopt.model.profiler import A100, Hardware, profile_model
from pacopt.model.zoo import ZOO, profile_zoo_model

GRAPHS = Path(__file__).resolve().parents[1] / "examples" / "graphs"


class Residual(nn.Module):
    """conv feeds both relu and the add: a branching dep."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        y = self.conv(x)
        return self.fc(torch.flatten(self.relu(y) + y, 1))


def nbytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def by_id(graph):
    return {op.id: op for op in graph.ops}


def dep_ids(graph):
    return {(graph.ops[u].id, graph.ops[v].id) for u, v in graph.deps}


@pytest.fixture(scope="module")
def residual():
    model = Residual()
    x = torch.randn(2, 3, 8, 8)
    return model, x, profile_model(model, x, "residual")


def test_ops_deps_and_join(residual):
    _, _, graph = residual
    assert [op.id for op in graph.ops] == ["x", "conv", "relu", "add", "flatten", "fc"]
    assert [op.kind for op in graph.ops] == ["Input", "Conv2d", "ReLU", "add", "flatten", "Linear"]
    assert len(graph.deps) == 6
    assert dep_ids(graph) == {("x", "conv"), ("conv", "relu"), ("conv", "add"), ("relu", "add"),
                              ("add", "flatten"), ("flatten", "fc")}
    assert graph.ops[graph.join].id == "fc"


def test_sizes(residual):
    model, x, graph = residual
    ops = by_id(graph)
    assert ops["conv"].parameter_bytes == nbytes(*model.conv.parameters()) == (8 * 27 + 8) * 4
    assert ops["fc"].parameter_bytes == nbytes(*model.fc.parameters())
    assert ops["relu"].parameter_bytes == ops["add"].parameter_bytes == 0
    assert ops["conv"].activation_bytes == nbytes(model.conv(x)) == 2 * 8 * 8 * 8 * 4
    assert ops["flatten"].activation_bytes == 2 * 512 * 4
    assert ops["fc"].activation_bytes == 2 * 10 * 4
    assert ops["x"].activation_bytes == nbytes(x)


def test_times(residual):
    _, x, graph = residual
    ops = by_id(graph)
    for op_id in ("conv", "relu", "add", "fc"):
        assert ops[op_id].forward_ms > 0
    assert ops["flatten"].forward_ms == ops["flatten"].backward_ms == 0
    # ops reading parameters also compute weight gradients: backward is twice the forward
    assert ops["conv"].backward_ms == pytest.approx(2 * ops["conv"].forward_ms, abs=2e-6)
    assert ops["relu"].backward_ms == ops["relu"].forward_ms
    assert ops["x"].forward_ms == pytest.approx(1e3 * nbytes(x) / A100.host_bandwidth, abs=1e-6)
    assert ops["x"].backward_ms == 0


def test_without_input_op_and_model_untouched(residual):
    model, x, _ = residual
    model.train()
    graph = profile_model(model, x, "residual", include_input_op=False)
    assert [op.id for op in graph.ops] == ["conv", "relu", "add", "flatten", "fc"]
    assert graph.predecessors[0] == ()
    # profiling runs a meta-device copy in eval mode: the model itself keeps its state
    assert model.training and model.conv.weight.device.type == "cpu"


def test_get_attr_and_shared_parameters_counted_once():
    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.scale = nn.Parameter(torch.ones(8))

        def forward(self, x):
            return self.fc(self.fc(x)) * self.scale

    graph = profile_model(Shared(), torch.randn(4, 8), "shared")
    ops = by_id(graph)
    assert list(ops) == ["x", "fc", "fc_1", "mul"]  # no op for the get_attr of scale
    assert ops["fc"].parameter_bytes == (64 + 8) * 4
    assert ops["fc_1"].parameter_bytes == 0
    assert ops["fc_1"].forward_ms == ops["fc"].forward_ms  # it still reads the weights
    assert ops["mul"].parameter_bytes == 8 * 4
    assert ops["mul"].backward_ms == pytest.approx(2 * ops["mul"].forward_ms, abs=2e-6)


def test_roofline_is_monotone_in_width():
    x = torch.randn(64, 1024)
    times = [profile_model(nn.Linear(1024, width), x, "fc").ops[-1].forward_ms
             for width in (256, 1024, 4096, 16384)]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_roofline_formula():
    hw = Hardware("toy", peak_flops=1e12, memory_bandwidth=1e11, kernel_overhead_ms=0.5,
                  host_bandwidth=1e9)
    assert hw.roofline_ms(flops=2e9, bytes_moved=1e6) == pytest.approx(2.0 + 0.5)  # compute bound
    assert hw.roofline_ms(flops=1e6, bytes_moved=1e9) == pytest.approx(10.0 + 0.5)  # memory bound
    with pytest.raises(InputError, match="peak_flops"):
        Hardware("bad", peak_flops=0, memory_bandwidth=1, kernel_overhead_ms=1, host_bandwidth=1)


class Gate(nn.Module):
    def forward(self, x):
        return x.relu() if x.shape[-1] > 4 else x


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.gate = Gate()

    def forward(self, x):
        return self.gate(self.fc(x))


def test_untraceable_model_raises_input_error():
    class DataDependent(nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    with pytest.raises(InputError, match="cannot be symbolically traced"):
        profile_model(DataDependent(), torch.randn(4), "dd")
    with pytest.raises(InputError, match="submodule 'gate'"):
        profile_model(Gated(), torch.randn(2, 8), "gated")


def test_leaf_modules_are_single_ops():
    graph = profile_model(Gated(), torch.randn(2, 8), "gated", leaf_modules=(Gate,))
    assert [op.kind for op in graph.ops] == ["Input", "Linear", "Gate"]
    assert graph.ops[2].forward_ms > 0


def test_bad_example_input_names_the_op(residual):
    model, _, _ = residual
    with pytest.raises(InputError, match="op 'conv' \\(Conv2d\\) failed on the example input"):
        profile_model(model, torch.randn(2, 5, 8, 8), "residual")


def test_save_and_load_round_trip(residual, tmp_path):
    _, _, graph = residual
    path = tmp_path / "sub" / "g.json"
    save_graph(graph, path)
    assert read_graph_file(path) == graph
    path.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        read_graph_file(path)
    with pytest.raises(InputError, match="cannot read"):
        read_graph_file(tmp_path / "missing.json")


@pytest.mark.parametrize("name, ops_range", [("cnn", (15, 25)), ("resnet", (40, 70)),
                                             ("transformer", (40, 75))])
def test_bundled_graphs_are_current(name, ops_range):
    path = GRAPHS / f"{name}.json"
    bundled = read_graph_file(path)
    assert bundled == graph_from_dict(json.loads(path.read_text()))
    assert bundled == profile_zoo_model(name), "stale: rerun examples/make_graphs.py"
    assert ops_range[0] <= bundled.num_ops <= ops_range[1]
    assert 10 <= bundled.step_ms <= 1000
    assert bundled.join == bundled.num_ops - 1


def test_zoo_is_exactly_the_bundled_set():
    assert sorted(p.stem for p in GRAPHS.glob("*.json")) == sorted(ZOO)


def test_resnet_and_transformer_branch():
    for name in ("resnet", "transformer"):
        graph = read_graph_file(GRAPHS / f"{name}.json")
        assert any(len(p) == 2 for p in graph.predecessors)  # residual adds
