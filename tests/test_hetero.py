"""The heterogeneous problem: types files, the model, its validator, the exact
methods' agreement, the greedy and the CLI."""

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pacopt.hetero import (
    EXAMPLE_TYPES,
    build_hetero_problem,
    load_types,
    plan_from_types,
    plan_problems,
    step_budget,
    types_from_dict,
)
from pacopt.hetero.command import hetero_main, run_method
from pacopt.hetero.exact import solve_dp, solve_hetero_cpsat, solve_hetero_milp
from pacopt.hetero.model import cut_bytes
from pacopt.model.graph import graph_from_dict


def _type(price, speed):
    return {"price_per_hour": price, "peak_flops": 1e13 * speed, "memory_bandwidth": 1e12 * speed,
            "kernel_overhead_ms": 0.005, "host_bandwidth": 1e10, "speed_factor": speed}


def _types(specs, bandwidth=1e9, latency=0.0, max_replicas=64):
    return {"max_replicas": max_replicas, "types": {name: _type(*s) for name, s in specs.items()},
            "links": {"default": {"bandwidth": bandwidth, "latency": latency}}}


def _chain(times, activations=None, params=None, name="chain"):
    n = len(times)
    activations = activations or [0] * n
    params = params or [0] * n
    return graph_from_dict({"ops": [{"id": f"o{i}", "forward_ms": t / 2, "backward_ms": t / 2,
                                     "activation_bytes": activations[i],
                                     "parameter_bytes": params[i]} for i, t in enumerate(times)],
                            "deps": [[f"o{i}", f"o{i + 1}"] for i in range(n - 1)]}, name)


# ----- hand-checked -------------------------------------------------------------------------------
#: slow: price 2, half an A100; fast: price 3, an A100. Chain times (A100, fwd + bwd) 10, 40, 10
#: ms; 1 MB crosses each boundary (2 ms at 1 GB/s, both directions); budget 50 ms (20 steps/s).
#: Plans (cost/h): all fast: 60 ms -> 2 replicas = 6; all slow: 120 ms -> 3 = 6;
#: [fast fast | slow]: 50 ms -> 1 (3) + 20 + 2 ms -> 1 (2) = 5; [slow | fast fast]: 2 + (50 + 2
#: -> 2) 6 = 8; [fast | slow slow]: 3 + (100 + 2 -> 3) 6 = 9; [slow | fast | slow]: 2 + 3 + 2 = 7;
#: [fast | slow | fast]: 3 + (80 + 2 -> 2) 4 + 3 = 10. The optimum is 5, and unique.
HAND_TYPES = _types({"slow": (2.0, 0.5), "fast": (3.0, 1.0)})
HAND_CHAIN = _chain([10, 40, 10], activations=[1e6, 1e6, 0])


@pytest.fixture
def hand_problem():
    return build_hetero_problem(HAND_CHAIN, types_from_dict(HAND_TYPES), step_budget(throughput=20))


@pytest.mark.parametrize("method", ["dp", "milp", "cpsat"])
def test_hand_checked_optimum(hand_problem, method):
    plan = run_method(hand_problem, method, time_limit=30)
    assert plan.status == "optimal" and plan.validated
    assert plan.cost_per_hour == pytest.approx(5.0)
    assert plan.assignment == {"o0": "fast", "o1": "fast", "o2": "slow"}
    assert [(s.type, s.replicas) for s in plan.stages] == [("fast", 1), ("slow", 1)]
    assert plan.stages[1].comm_ms == pytest.approx(2.0)
    assert plan.step_ms == pytest.approx(50.0)


def test_hand_checked_every_plan_priced_as_by_hand(hand_problem):
    costs = {"ffs": 5, "fff": 6, "sss": 6, "sff": 8, "fss": 9, "sfs": 7, "fsf": 10}
    for labels, cost in costs.items():
        plan = plan_from_types(hand_problem, [1 if c == "f" else 0 for c in labels], "x",
                               "heuristic")
        assert plan.cost_per_hour == pytest.approx(cost), labels
        assert plan_problems(hand_problem, plan) == []


def test_greedy_is_valid_and_never_below_the_optimum(hand_problem):
    plan = run_method(hand_problem, "greedy")
    assert plan.status == "heuristic" and plan.validated
    assert plan.cost_per_hour >= 5.0 - 1e-9


def test_all_reduce_and_latency_in_the_stage_time():
    # one op of 30 ms with 1 GB of parameters on 1 GB/s: r replicas take 30/r + (r-1)/r * 2000
    # ms (ring all-reduce, 2 (r-1)/r P / bw), so only r = 1 fits a 40 ms budget, and a 20 ms
    # budget cannot be met at all
    types = types_from_dict(_types({"gpu": (1.0, 1.0)}, bandwidth=1e9, latency=1e-3))
    graph = _chain([30], params=[1e9])
    plan = solve_dp(build_hetero_problem(graph, types, 40.0))
    assert plan.status == "optimal" and plan.stages[0].replicas == 1
    assert plan.stages[0].allreduce_ms == pytest.approx(2000.0)
    assert solve_dp(build_hetero_problem(graph, types, 20.0)).status == "infeasible"
    # two ops: the second stage pays the transfer (2 x 1 MB at 1 GB/s) and 2 x 1 ms latency
    types2 = types_from_dict(_types({"a": (1.0, 1.0), "b": (1.0, 1.0)}, latency=1e-3))
    problem = build_hetero_problem(_chain([10, 10], activations=[1e6, 0]), types2, 100.0)
    plan = plan_from_types(problem, [0, 1], "x", "heuristic")
    assert plan.stages[1].time_ms == pytest.approx(10 + 2 + 2)
    # the latency decides: 39 + 2 + 2 = 43 ms > 42 on one instance, (39 + 2) / 2 + 2 on two
    problem = build_hetero_problem(_chain([10, 39], activations=[1e6, 0]), types2, 42.0)
    plan = plan_from_types(problem, [0, 1], "x", "heuristic")
    assert plan.stages[1].replicas == 2 and plan_problems(problem, plan) == []
    assert plan.stages[1].time_ms == pytest.approx(22.5)


def test_deadline_gives_the_step_budget():
    assert step_budget(deadline_ms=5000, training_steps=50) == 100.0
    assert step_budget(throughput=4) == 250.0


def test_cut_bytes_relays_skip_connections():
    # a -> b -> c -> d and a -> d: a's output crosses the boundaries before b, c and d
    graph = graph_from_dict({"ops": [{"id": x, "forward_ms": 1, "backward_ms": 1,
                                      "activation_bytes": size, "parameter_bytes": 0}
                                     for x, size in zip("abcd", (100, 10, 1, 0))],
                             "deps": [["a", "b"], ["b", "c"], ["c", "d"], ["a", "d"]]})
    assert cut_bytes(graph, graph.topological_order).tolist() == [0, 100, 110, 101]


# ----- infeasible and bad input ---------------------------------------------------------------------
@pytest.mark.parametrize("method", ["dp", "milp", "cpsat", "greedy"])
def test_unreachable_throughput_is_infeasible(hand_problem, method):
    problem = build_hetero_problem(HAND_CHAIN, types_from_dict(HAND_TYPES), step_budget(throughput=1e5))
    plan = run_method(problem, method, time_limit=30)
    assert plan.status == "infeasible" and plan.validated and not plan.stages


@pytest.fixture
def files(tmp_path):
    graph = tmp_path / "chain.json"
    graph.write_text(json.dumps(HAND_CHAIN.to_dict()))
    types = tmp_path / "types.json"
    types.write_text(json.dumps(HAND_TYPES))
    return graph, types


def test_cli_plan_as_json(files, capsys):
    graph, types = files
    assert hetero_main([str(graph), "--types", str(types), "--throughput", "20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "optimal" and out["validated"] and out["cost_per_hour"] == 5.0
    assert out["throughput_required"] == 20 and out["steps_per_s"] >= 20


def test_cli_deadline_and_infeasible(files, capsys):
    graph, types = files
    # 50 steps in 2500 ms is the same 50 ms budget
    assert hetero_main([str(graph), "--types", str(types), "--deadline-ms", "2500",
                        "--method", "milp"]) == 0
    assert "cost 5.00 per hour" in capsys.readouterr().out
    assert hetero_main([str(graph), "--types", str(types), "--throughput", "1e5"]) == 0
    assert "infeasible" in capsys.readouterr().out


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["types"]["slow"].update(price_per_hour=-1), "types.slow.price_per_hour"),
    (lambda d: d["types"]["fast"].update(speed_factor=0), "types.fast.speed_factor"),
    (lambda d: d["types"]["fast"].update(peak_flops=0), "types.fast.peak_flops"),
    (lambda d: d["types"]["fast"].update(colour="red"), "types.fast.colour"),
    (lambda d: d.update(extra=1), "extra"),
    (lambda d: d["links"]["default"].update(bandwidth=0), "links.default.bandwidth"),
    (lambda d: d["links"].update(pairs=[{"types": ["slow", "gpu"], "bandwidth": 1,
                                         "latency": 0}]), "unknown type 'gpu'"),
    (lambda d: d.pop("links"), "links: required field is missing"),
    (lambda d: d.update(types={}), "types"),
    (lambda d: d.update(max_replicas=0), "max_replicas"),
])
def test_bad_types_file_is_one_line_exit_2(files, capsys, edit, field):
    graph, types = files
    data = json.loads(types.read_text())
    edit(data)
    types.write_text(json.dumps(data))
    assert hetero_main([str(graph), "--types", str(types), "--throughput", "20"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert "\n" not in err and err.startswith("error: ") and field in err, err


@pytest.mark.parametrize("args, text", [
    (["--throughput", "0"], "throughput"),
    (["--throughput", "-3"], "throughput"),
    (["--deadline-ms", "nan"], "deadline_ms"),
    (["--throughput", "20", "--method", "magic"], "--method"),
    (["--throughput", "20", "--time-limit", "0"], "--time-limit"),
    ([], "--throughput"),
])
def test_bad_cli_input_is_one_line_exit_2(files, capsys, args, text):
    graph, types = files
    assert hetero_main([str(graph), "--types", str(types), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and text in err, err


def test_missing_or_broken_types_file(tmp_path, capsys):
    assert hetero_main(["cnn", "--types", str(tmp_path / "nope.json"), "--throughput", "1"]) == 2
    assert "cannot read types file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert hetero_main(["cnn", "--types", str(bad), "--throughput", "1"]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_bundled_types_file_loads():
    types = load_types(EXAMPLE_TYPES)
    assert types.names == ("cpu", "v100", "a100", "h100")
    assert types.link("h100", "a100") == types.link("a100", "h100")
    assert types.link("cpu", "h100").bandwidth == 3.125e9  # the default link


# ----- the validator --------------------------------------------------------------------------------
def test_validator_catches_broken_plans(hand_problem):
    good = solve_dp(hand_problem)
    assert plan_problems(hand_problem, good) == []

    def broken(change):
        plan = solve_dp(hand_problem)
        change(plan)
        return plan_problems(hand_problem, plan)

    all_fast = plan_from_types(hand_problem, [1, 1, 1], "x", "heuristic")
    assert all_fast.stages[0].replicas == 2 and plan_problems(hand_problem, all_fast) == []
    all_fast.stages[0].replicas = 1  # 60 ms on one instance
    assert any("exceeds the budget" in x for x in plan_problems(hand_problem, all_fast))
    problems = broken(lambda p: setattr(p.stages[0], "replicas", 0))
    assert any("replicas" in x for x in problems)
    assert any("cost" in x for x in broken(lambda p: setattr(p, "cost_per_hour", 4.0)))
    assert any("maximal runs" in x for x in broken(lambda p: p.assignment.update(o2="fast")))
    assert any("no known type" in x for x in broken(lambda p: p.assignment.pop("o1")))
    assert any("step" in x for x in broken(lambda p: setattr(p, "step_ms", 1.0)))
    assert any("bound" in x for x in broken(lambda p: setattr(p, "bound_cost", 6.0)))


def test_validator_recomputes_stage_times():
    # the plan's fast stage (1 replica) is exactly on the 50 ms budget; at 45 ms it is over
    problem = build_hetero_problem(HAND_CHAIN, types_from_dict(HAND_TYPES), 50.0)
    plan = solve_dp(problem)
    tighter = build_hetero_problem(HAND_CHAIN, types_from_dict(HAND_TYPES), 45.0)
    assert any("exceeds the budget" in x for x in plan_problems(tighter, plan))


# ----- the exact methods agree ----------------------------------------------------------------------
def _all_exact(problem):
    plans = [solve_dp(problem), solve_hetero_milp(problem, time_limit=60),
             solve_hetero_cpsat(problem, time_limit=60)]
    for plan in plans:
        assert plan_problems(problem, plan) == [], plan.method
    return plans


def _assert_agree(plans):
    statuses = {p.status for p in plans}
    assert statuses in ({"optimal"}, {"infeasible"}), [(p.method, p.status) for p in plans]
    if statuses == {"optimal"}:
        costs = [p.cost_per_hour for p in plans]
        assert max(costs) - min(costs) <= 1e-9 * max(costs), costs


chains = st.integers(2, 6).flatmap(lambda n: st.tuples(
    st.lists(st.integers(1, 80), min_size=n, max_size=n),                      # ms, fwd + bwd
    st.lists(st.sampled_from([0, 1e6, 5e6, 2e7]), min_size=n, max_size=n),    # activations
    st.lists(st.sampled_from([0, 0, 1e6, 1e8]), min_size=n, max_size=n)))     # parameters
type_sets = st.lists(st.tuples(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 4.0]),
                               st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0])),
                     min_size=2, max_size=3)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chain=chains, specs=type_sets, budget=st.sampled_from([10.0, 20.0, 35.0, 50.0, 80.0]),
       bandwidth=st.sampled_from([1e9, 4e9, 1e10]), latency=st.sampled_from([0.0, 1e-6, 5e-5, 1e-3]),
       max_replicas=st.sampled_from([4, 16]))
def test_exact_methods_agree_on_random_chains(chain, specs, budget, bandwidth, latency,
                                              max_replicas):
    times, activations, params = chain
    types = types_from_dict(_types({f"t{i}": s for i, s in enumerate(specs)}, bandwidth, latency,
                                   max_replicas))
    problem = build_hetero_problem(_chain(times, activations, params), types, budget)
    _assert_agree(_all_exact(problem))


def test_exact_methods_agree_on_a_dag():
    # a diamond with a skip connection: the linear order relays a's output past b
    graph = graph_from_dict({"ops": [
        {"id": x, "forward_ms": t, "backward_ms": 2 * t, "activation_bytes": 4e6,
         "parameter_bytes": 1e6} for x, t in zip("abcde", (3, 9, 6, 12, 2))],
        "deps": [["a", "b"], ["a", "c"], ["b", "d"], ["c", "d"], ["d", "e"], ["a", "e"]]})
    types = types_from_dict(_types({"cpu": (1.0, 0.25), "gpu": (3.0, 1.0), "big": (8.0, 3.0)},
                                   bandwidth=2e9, latency=1e-5))
    for budget in (8.0, 15.0, 30.0, 200.0):
        plans = _all_exact(build_hetero_problem(graph, types, budget))
        _assert_agree(plans)
        assert plans[0].status == "optimal"


def test_exact_methods_agree_on_bundled_graphs():
    """On the bundled types and a PipeDream-like measured graph (speed factors)."""
    types = load_types(EXAMPLE_TYPES)
    graph = _chain([3.5, 12.25, 7.0, 0.5, 20.0, 1.25, 9.0, 4.0],
                   activations=[2e7, 1e7, 1e7, 5e6, 5e6, 1e6, 1e6, 0],
                   params=[1e5, 2e6, 0, 0, 4e7, 0, 1.6e7, 4e6])
    for load in (1.5, 6.0):
        _assert_agree(_all_exact(build_hetero_problem(graph, types, graph.step_ms / load)))


def test_milp_is_proven_on_a_pipedream_graph(pipedream_dir):
    from pacopt.model.pipedream import read_pipedream

    graph = read_pipedream(pipedream_dir / "vgg16.txt", "vgg16")
    problem = build_hetero_problem(graph, load_types(EXAMPLE_TYPES), graph.step_ms / 8)
    dp, milp = solve_dp(problem), solve_hetero_milp(problem, time_limit=60)
    assert milp.status == "optimal" and plan_problems(problem, milp) == []
    assert milp.cost_per_hour == pytest.approx(dp.cost_per_hour, rel=1e-9)
    assert math.isclose(milp.bound_cost, milp.cost_per_hour, rel_tol=1e-9)


# ----- per-type op times ----------------------------------------------------------------------------
def test_zoo_graphs_get_roofline_times_per_type():
    from pacopt.hetero.types import type_op_times
    from pacopt.model.graph_sources import resolve_graph

    bundled = json.loads(EXAMPLE_TYPES.read_text())
    types = types_from_dict({**bundled, "types": {k: bundled["types"][k] for k in ("a100", "h100")},
                             "links": {"default": bundled["links"]["default"]}})
    graph = resolve_graph("cnn")
    times, how = type_op_times(graph, types)
    assert how == "roofline"
    # the bundled graph is the A100 profile, and the a100 type has the A100's roofline
    assert times[:, 0] == pytest.approx([op.forward_ms + op.backward_ms for op in graph.ops],
                                        abs=1e-5)
    # the H100 has 3.4x the FLOP/s but 1.6x the bandwidth: convolutions gain more than ReLUs
    gain = {op.kind: [] for op in graph.ops}
    for op, (a100, h100) in zip(graph.ops, times):
        if h100 > 0:  # views cost nothing anywhere
            gain[op.kind].append(a100 / h100)
    conv, relu = gain["Conv2d"], gain["ReLU"]
    assert min(conv) > max(relu) > 1.0
    # the same graph under another name is a measured graph: speed factors
    renamed = graph_from_dict(graph.to_dict(), "not-a-zoo-model")
    times, how = type_op_times(renamed, types)
    assert how == "speed_factor"
    assert times[:, 1] == pytest.approx(times[:, 0] / bundled["types"]["h100"]["speed_factor"])
