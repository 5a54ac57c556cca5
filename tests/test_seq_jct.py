"""The sequential JCT is summed as the reference sums it, so beta = 1.0 at degree 1 is decided by
the same last bit: vgg16 accepted, resnet18 blocked (deadline), with no tolerance."""

import math

import pytest

from pacopt.model.instance import instance_from_dict
from pacopt.model.pipedream import read_pipedream
from pacopt.model.simulator import simulate

#: The reference's 50-step sequential JCTs (left-to-right float sums, then x 50).
REFERENCE_SEQ_JCT = {"vgg16": 34525.350000000006, "resnet18": 36668.350000000006,
                     "alexnet": 36061.15}


class DegreeOne:
    name = "degree-one"

    def reset(self, seed):
        pass

    def choose(self, decision):
        return 1


@pytest.mark.parametrize("model", sorted(REFERENCE_SEQ_JCT))
def test_seq_jct_is_the_reference_left_to_right_sum(pipedream_dir, model):
    graph = read_pipedream(pipedream_dir / f"{model}.txt")
    assert graph.seq_jct_ms(50) == REFERENCE_SEQ_JCT[model]  # exact, not approx
    if model != "alexnet":  # the correctly rounded sum differs in the last bit
        exact = 50 * (math.fsum(op.forward_ms for op in graph.ops)
                      + math.fsum(op.backward_ms for op in graph.ops))
        assert exact != REFERENCE_SEQ_JCT[model]


@pytest.mark.parametrize("preset", ["ddls", "physical"])
def test_beta_one_at_degree_one_accepts_vgg16_and_blocks_resnet18(pipedream_dir, preset):
    data = {"model": {"preset": preset},
            "graphs": {m: {"pipedream": str(pipedream_dir / f"{m}.txt")}
                       for m in ("vgg16", "resnet18")},
            "jobs": [{"id": "v", "graph": "vgg16", "arrival_ms": 0, "max_jct_fraction": 1.0},
                     {"id": "r", "graph": "resnet18", "arrival_ms": 0, "max_jct_fraction": 1.0}]}
    vgg, resnet = simulate(instance_from_dict(data), DegreeOne()).jobs
    assert vgg.accepted and vgg.degree == 1
    assert not resnet.accepted and resnet.reason == "deadline"
