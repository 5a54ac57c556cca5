"""The step simulation's compiled event loop gives the Python loop's bits (``pacopt.model.step``).

The Python loop is the specification; the compiled one (``step_loop.c``) runs wherever the
package was built with a C compiler, as every install from the README is. Random graphs with
coarse times and sizes make ties (between sub-ops, flows and channels) common.
"""

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacopt.model import step
from pacopt.model.first_fit import Placement, first_fit
from pacopt.model.graph import JobGraph, Op
from pacopt.model.partition import partition
from pacopt.model.settings import ModelSettings
from pacopt.model.topology import RampCluster

CLUSTERS = (RampCluster(), RampCluster(communication_groups=4, racks_per_group=2,
                                       servers_per_rack=4))


def _random_case(seed: int):
    rng = random.Random(seed)
    n = rng.randint(1, 7)
    ops = tuple(Op(id=f"op{i}", forward_ms=rng.choice([0.0, 0.01, 0.02, 0.05, 0.3]),
                   backward_ms=rng.choice([0.0, 0.02, 0.04, 0.1]),
                   activation_bytes=rng.choice([0.0, 1e6, 2e6, 3.3e7]),
                   parameter_bytes=rng.choice([0.0, 4e6, 1e8])) for i in range(n))
    deps = tuple(sorted({(u, v) for v in range(1, n) for u in range(v)
                         if rng.random() < 0.4} | {(v - 1, v) for v in range(1, n)
                                                   if rng.random() < 0.7}))
    graph = JobGraph(name=f"random{seed}", ops=ops, deps=deps, join=n - 1)
    cluster = rng.choice(CLUSTERS)
    counts = tuple(rng.choice([1, 1, 2, 3, 4, 6]) for _ in range(n))
    if rng.random() < 0.5:
        placement = first_fit(graph, counts, cluster)
        if placement is None:
            counts = (1,) * n
            placement = first_fit(graph, counts, cluster)
    else:
        placement = Placement(tuple(rng.choice(cluster.blocks(c)) for c in counts))
    preset = rng.choice(["ddls", "physical"])
    return graph, counts, placement, cluster, ModelSettings(preset=preset)


def test_the_compiled_loop_is_built():
    """An install from the README builds it; without it the step simulation is many times slower."""
    assert step._compiled is not None, "pacopt/model/step_loop.c was not built (pip install -e .)"


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**9))
def test_compiled_and_python_loops_agree_to_the_bit(seed):
    if step._compiled is None:
        pytest.skip("the compiled loop is not built")
    graph, counts, placement, cluster, model = _random_case(seed)
    job = partition(graph, counts)
    compiled = step.simulate_step(job, placement, cluster, model)
    saved, step._compiled = step._compiled, None
    try:
        python = step.simulate_step(job, placement, cluster, model)
    finally:
        step._compiled = saved
    assert (compiled.step_ms.hex(), compiled.exposed_comm_ms.hex()) == (
        python.step_ms.hex(), python.exposed_comm_ms.hex())
    longest = max(float(np.sum(job.sub_compute[job.sub_op == o])) / counts[o % graph.num_ops]
                  for o in range(2 * graph.num_ops))
    assert compiled.step_ms >= longest * (1 - 1e-12)  # no sub-op is cut short


def test_a_bad_array_is_refused():
    if step._compiled is None:
        pytest.skip("the compiled loop is not built")
    one = np.zeros(1, dtype=np.int32)
    with pytest.raises(ValueError, match="compute"):
        step._compiled.simulate(1, 0, 1, 0, one, one, np.zeros(1, np.int64), one,
                                np.zeros(2, np.int64), one[:0], np.zeros(0), one[:0], one[:0],
                                np.zeros(0, np.int8))
