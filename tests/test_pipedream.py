"""Reading PipeDream profiles: all 14 load, with the paper's characteristics."""

import pytest

from pacopt.infra.errors import InputError
from pacopt.model.pipedream import PIPEDREAM_MODELS, parse_pipedream, read_pipedream

# (forward ops, forward deps, sequential JCT over 50 steps): PAC-ML's graph table
# (the paper's graph table gives 2n ops and 2|E|+1 deps).
PAPER = {"alexnet": (23, 23, 36061.15), "vgg16": (41, 41, 34525.35),
         "resnet18": (71, 79, 36668.35), "squeezenet1_0": (68, 76, 38000.15),
         "gnmt": (48, 58, 4470.80)}


def test_all_fourteen_profiles_load(pipedream_dir):
    files = sorted(p for p in pipedream_dir.glob("*.txt") if p.stem in PIPEDREAM_MODELS)
    assert [p.stem for p in files] == sorted(PIPEDREAM_MODELS)
    for path in files:
        graph = read_pipedream(path)
        assert graph.name == path.stem
        assert graph.num_ops > 0 and graph.deps
        assert graph.topological_order is not None
        # the join op is the op with the largest PipeDream id, as the reference assumes
        assert graph.ops[graph.join].id == f"node{graph.num_ops}"


@pytest.mark.parametrize("name", sorted(PAPER))
def test_paper_graph_characteristics(pipedream_dir, name):
    graph = read_pipedream(pipedream_dir / f"{name}.txt")
    ops, deps, seq = PAPER[name]
    assert (graph.num_ops, len(graph.deps)) == (ops, deps)
    assert graph.seq_jct_ms(50) == pytest.approx(seq, abs=0.01)


def test_list_valued_sizes_are_summed(pipedream_dir):
    gnmt = read_pipedream(pipedream_dir / "gnmt.txt")
    lstm = next(op for op in gnmt.ops if op.id == "node7")
    assert lstm.activation_bytes == 6291456.0 + 131072.0 + 131072.0
    assert lstm.kind == "LSTM"


def test_file_order_is_kept(pipedream_dir):
    alexnet = read_pipedream(pipedream_dir / "alexnet.txt")
    assert [op.id for op in alexnet.ops[:3]] == ["node11", "node10", "node13"]
    assert alexnet.ops[0].forward_ms == 0.539


@pytest.mark.parametrize("text, message", [
    ("node1 -- Input -- forward_compute_time=1, backward_compute_time=0", "expected"),
    ("node1 -- Input -- forward_compute_time=x, backward_compute_time=0, activation_size=1, "
     "parameter_size=0", "not a number"),
    ("node1 -- Input -- forward_compute_time=1, backward_compute_time=0, activation_size=1, "
     "parameter_size=0\n\tnode1 -- node2", "unknown node"),
    ("", "no node lines"),
])
def test_bad_profiles_are_clear_errors(text, message):
    with pytest.raises(InputError, match=message):
        parse_pipedream(text, "bad")


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        read_pipedream(tmp_path / "nope.txt")
