"""The job-level exact problem: both backends, brute force, the count rules, deadline mode."""

from itertools import product
from pathlib import Path

import pytest

from pacopt.formulations.joblevel import allowed_counts, model_jct_ms, optimise_job
from pacopt.model.first_fit import Placement
from pacopt.model.graph import graph_from_dict
from pacopt.model.graph_sources import read_graph_file
from pacopt.model.jct import JctModel
from pacopt.model.partition import op_count
from pacopt.model.settings import ModelSettings
from pacopt.model.topology import RampCluster

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "graphs"
RAMP = RampCluster()
SMALL_RAMP = RampCluster(communication_groups=2, racks_per_group=2, servers_per_rack=2)
PRESETS = ("ddls", "physical")


def _op(name, forward, backward, act, param):
    return {"id": name, "forward_ms": forward, "backward_ms": backward,
            "activation_bytes": act, "parameter_bytes": param}


# Times around the quantum (0.01 ms) keep the counts small; 1e7-byte activations cost about as much
# as the compute in the physical preset, so splitting trades off against communication there.
CHAIN3 = graph_from_dict({
    "name": "chain3",
    "ops": [_op("a", 0.05, 0.1, 2e7, 4e6), _op("b", 0.03, 0.06, 1e7, 2e6),
            _op("c", 0.0, 0.02, 1e5, 0)],
    "deps": [["a", "b"], ["b", "c"]]})
BRANCH5 = graph_from_dict({
    "name": "branch5",
    "ops": [_op("in", 0.0, 0.0, 3e7, 0), _op("a", 0.08, 0.16, 1e7, 8e6),
            _op("b", 0.04, 0.08, 5e6, 1e6), _op("c", 0.015, 0.03, 5e6, 0),
            _op("d", 0.06, 0.12, 1e6, 2e7)],
    "deps": [["in", "a"], ["a", "b"], ["a", "c"], ["b", "d"], ["c", "d"]]})
SIX = graph_from_dict({
    "name": "six",
    "ops": [_op("x", 0.02, 0.0, 2e7, 0), _op("conv", 0.12, 0.24, 4e7, 1e6),
            _op("relu", 0.01, 0.01, 4e7, 0), _op("skip", 0.05, 0.1, 1e7, 3e6),
            _op("add", 0.0, 0.0, 1e7, 0), _op("fc", 0.09, 0.18, 1e5, 6e7)],
    "deps": [["x", "conv"], ["conv", "relu"], ["relu", "add"], ["x", "skip"], ["skip", "add"],
             ["add", "fc"]]})
CNN = read_graph_file(EXAMPLES / "cnn.json")


def _tolerance(graph, settings, jct):
    """Agreement up to CP-SAT's rounding: < 1 ns per cost term per step, plus HiGHS's gap."""
    terms = 2 * graph.num_ops + 2 * len(graph.deps) + 1
    return settings.training_steps * terms * 1e-6 + 1e-8 * jct


def _check_rules(graph, cluster, settings, plan, budget=None):
    """Counts within their quantum cap and on a placeable size, zero-time ops unsplit, one block
    per count, the budget met, and the reported numbers re-derived."""
    assert len(plan.counts) == graph.num_ops
    for op, p, block in zip(graph.ops, plan.counts, plan.placement.blocks):
        assert p <= op_count(op.forward_ms, settings.max_partitions_per_op, settings.quantum_ms)
        if op.forward_ms == 0:
            assert p == 1
        assert cluster.blocks(p) and len(block.servers) == p
    assert len({(len(b.servers), b.mask) for b in plan.placement.blocks}) == len(set(plan.counts))
    assert plan.workers == plan.placement.num_workers
    if budget is not None:
        assert plan.workers <= budget
    assert plan.model_jct_ms == pytest.approx(
        model_jct_ms(graph, cluster, settings, plan.counts, plan.placement), rel=1e-12)
    timing = JctModel(cluster, settings).timing(graph, plan.counts, plan.placement)
    assert plan.simulated_jct_ms == timing.jct_ms


def _brute_force(graph, cluster, settings):
    """Every (counts, one block per count) plan as (model JCT, workers)."""
    plans = []
    for counts in product(*allowed_counts(graph, cluster, settings)):
        distinct = sorted(set(counts))
        for blocks in product(*(cluster.blocks(m) for m in distinct)):
            block_of = dict(zip(distinct, blocks))
            placement = Placement(tuple(block_of[p] for p in counts))
            plans.append((model_jct_ms(graph, cluster, settings, counts, placement),
                          placement.num_workers))
    return plans


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("graph, budgets", [(CHAIN3, (2, 4, 16)), (BRANCH5, (2, 3, 8)),
                                            (SIX, (4, 6, 16)), (CNN, (4, 8))],
                         ids=["chain3", "branch5", "six", "cnn"])
def test_backends_agree(graph, budgets, preset):
    settings = ModelSettings(preset=preset)
    for budget in budgets:
        milp = optimise_job(graph, RAMP, settings, budget=budget, backend="milp")
        cpsat = optimise_job(graph, RAMP, settings, budget=budget, backend="cpsat")
        for plan in (milp, cpsat):
            assert plan.status == "optimal"
            _check_rules(graph, RAMP, settings, plan, budget)
        assert (milp.backend, cpsat.backend) == ("milp", "cpsat")
        assert abs(milp.model_jct_ms - cpsat.model_jct_ms) <= _tolerance(graph, settings,
                                                                          milp.model_jct_ms)
        assert milp.workers == cpsat.workers


@pytest.mark.parametrize("backend", ["milp", "cpsat"])
@pytest.mark.parametrize("graph", [SIX, CNN], ids=["six", "cnn"])
def test_budget_one_is_sequential(graph, backend):
    settings = ModelSettings(preset="physical")
    plan = optimise_job(graph, RAMP, settings, budget=1, backend=backend)
    assert plan.status == "optimal"
    assert plan.counts == (1,) * graph.num_ops and plan.workers == 1
    seq = graph.seq_jct_ms(settings.training_steps)
    assert plan.model_jct_ms == pytest.approx(seq, rel=1e-12)
    assert plan.simulated_jct_ms == pytest.approx(seq, rel=1e-12)


@pytest.mark.parametrize("preset", PRESETS)
def test_brute_force_budget(preset):
    settings = ModelSettings(preset=preset, max_partitions_per_op=8)
    plans = _brute_force(CHAIN3, SMALL_RAMP, settings)
    for budget in (1, 2, 3, 4, 8):
        best = min(jct for jct, workers in plans if workers <= budget)
        tol = _tolerance(CHAIN3, settings, best)
        fewest = min(w for jct, w in plans if w <= budget and jct <= best + tol)
        for backend in ("milp", "cpsat"):
            plan = optimise_job(CHAIN3, SMALL_RAMP, settings, budget=budget, backend=backend)
            assert plan.status == "optimal"
            _check_rules(CHAIN3, SMALL_RAMP, settings, plan, budget)
            assert abs(plan.model_jct_ms - best) <= tol
            assert plan.workers == fewest


@pytest.mark.parametrize("preset", PRESETS)
def test_brute_force_deadline(preset):
    settings = ModelSettings(preset=preset, max_partitions_per_op=8)
    plans = _brute_force(CHAIN3, SMALL_RAMP, settings)
    seq = CHAIN3.seq_jct_ms(settings.training_steps)
    # 0.4 is within reach in ddls; in physical only compute-wise, so the search must prove it.
    for fraction in (1.0, 0.8, 0.55, 0.5, 0.4):
        deadline = fraction * seq
        fewest = min((w for jct, w in plans if jct <= deadline), default=None)
        for backend in ("milp", "cpsat"):
            plan = optimise_job(CHAIN3, SMALL_RAMP, settings, deadline_ms=deadline,
                                backend=backend)
            if fewest is None:
                assert plan.status == "infeasible" and plan.placement is None
                continue
            fastest = min(jct for jct, w in plans if jct <= deadline and w == fewest)
            assert plan.status == "optimal"
            _check_rules(CHAIN3, SMALL_RAMP, settings, plan)
            assert plan.workers == fewest
            assert plan.model_jct_ms <= deadline * (1 + 1e-12)
            assert abs(plan.model_jct_ms - fastest) <= _tolerance(CHAIN3, settings, fastest)


@pytest.mark.parametrize("backend", ["milp", "cpsat"])
def test_impossible_deadline_is_infeasible(backend):
    settings = ModelSettings(preset="ddls")
    plan = optimise_job(SIX, RAMP, settings, deadline_ms=1.0, backend=backend)
    assert plan.status == "infeasible"
    assert plan.counts == () and plan.placement is None and plan.workers == 0


@pytest.mark.parametrize("backend", ["milp", "cpsat"])
def test_memory_forces_a_split(backend):
    """Two 50 GB ops do not fit one 80 GB worker together: budget 1 is infeasible, and with
    two workers one of them is split so that no server holds more than 80 GB."""
    big = graph_from_dict({"name": "big", "ops": [_op("a", 0.02, 0.04, 4e10, 1e10),
                                                   _op("b", 0.02, 0.04, 4e10, 1e10)],
                           "deps": [["a", "b"]]})
    settings = ModelSettings(preset="physical")
    assert optimise_job(big, RAMP, settings, budget=1, backend=backend).status == "infeasible"
    plan = optimise_job(big, RAMP, settings, budget=2, backend=backend)
    assert plan.status == "optimal" and plan.counts != (1, 1)
    load: dict[int, float] = {}
    for op, block in zip(big.ops, plan.placement.blocks):
        for s in block.servers:
            load[s] = load.get(s, 0.0) + op.memory_bytes / len(block.servers)
    assert max(load.values()) <= RAMP.worker_memory


@pytest.mark.parametrize("backend", ["milp", "cpsat"])
def test_time_limit_is_honoured(backend):
    """The limit reaches the solver: a limit far below what the proof takes stops it unproven,
    within model building and a little overshoot (generous: loaded CI machines)."""
    settings = ModelSettings(preset="physical")
    optimise_job(CHAIN3, RAMP, settings, budget=2, backend=backend)  # imports out of the timing
    deadline = 0.1 * CNN.seq_jct_ms(50)
    assert optimise_job(CNN, RAMP, settings, deadline_ms=deadline,
                        backend=backend).status == "optimal"  # about 0.1-0.3 s unlimited
    plan = optimise_job(CNN, RAMP, settings, deadline_ms=deadline, backend=backend,
                        time_limit=0.001)
    assert plan.status in ("feasible", "unknown")
    assert plan.seconds < 0.001 + 2.0


def test_arguments_are_checked():
    settings = ModelSettings()
    with pytest.raises(ValueError, match="exactly one"):
        optimise_job(CHAIN3, RAMP, settings)
    with pytest.raises(ValueError, match="exactly one"):
        optimise_job(CHAIN3, RAMP, settings, budget=2, deadline_ms=10.0)
    with pytest.raises(ValueError, match="budget"):
        optimise_job(CHAIN3, RAMP, settings, budget=0)
    with pytest.raises(ValueError, match="backend"):
        optimise_job(CHAIN3, RAMP, settings, budget=2, backend="gurobi")
