"""Small offline problems shared by the exact-method tests: hand-made and random job lists
over the bundled cnn graph and a two-op graph, on an 8-server cluster."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pacopt.formulations.offline import build_problem
from pacopt.model.instance import instance_from_dict

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CNN = str(EXAMPLES / "graphs" / "cnn.json")
TINY = {"ops": [{"id": "a", "forward_ms": 1.0, "backward_ms": 2.0, "activation_bytes": 1e6,
                 "parameter_bytes": 1e5},
                {"id": "b", "forward_ms": 0.5, "backward_ms": 1.0, "activation_bytes": 4e5,
                 "parameter_bytes": 0}],
        "deps": [["a", "b"]]}
#: 8 servers (2 groups x 2 racks x 2 servers): few enough options per job for brute force.
SMALL_CLUSTER = {"communication_groups": 2, "racks_per_group": 2, "servers_per_rack": 2}
#: (graph, arrival_ms, beta): cnn runs 0.8-3.2 s, so these overlap and compete for 8 servers.
HAND_JOBS = [("cnn", 0, 0.5), ("cnn", 100, 0.3), ("tiny", 150, 0.6), ("cnn", 300, 1.0),
             ("tiny", 320, 0.2), ("cnn", 400, 0.4), ("cnn", 900, 0.7), ("tiny", 950, 0.3),
             ("cnn", 1200, 0.35), ("tiny", 1250, 1.0)]


def random_jobs(seed: int, count: int) -> list[tuple[str, float, float]]:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.integers(0, 300, count))
    return [(str(rng.choice(["cnn", "tiny"])), float(t), float(rng.choice([0.3, 0.5, 0.7, 1.0])))
            for t in arrivals]


def small_problem(jobs):
    data = {"cluster": SMALL_CLUSTER, "model": {"preset": "ddls"},
            "graphs": {"cnn": {"file": CNN}, "tiny": TINY},
            "jobs": [{"id": f"j{i}", "graph": g, "arrival_ms": a, "max_jct_fraction": b}
                     for i, (g, a, b) in enumerate(jobs)]}
    return build_problem(instance_from_dict(data))


#: Instances the brute force settles in well under a second (it is exponential, and some
#: instances of this size take it minutes).
SMALL = {"hand": HAND_JOBS, "random-3": random_jobs(3, 12), "random-4": random_jobs(4, 11),
         "random-2": random_jobs(2, 12)}


def chain(rng, name: str, length: int) -> dict:
    """An inline chain graph of ``length`` random ops named ``name0``, ``name1``, ... (its first
    op's forward time fixed at 0.5 ms), for random offline instances."""
    ops = [{"id": f"{name}{i}", "forward_ms": round(rng.uniform(0.0, 2.0), 2) if i else 0.5,
            "backward_ms": round(rng.uniform(0.0, 3.0), 2),
            "activation_bytes": rng.randrange(1, 10**8), "parameter_bytes": rng.randrange(0, 10**7)}
           for i in range(length)]
    return {"ops": ops, "deps": [[f"{name}{i}", f"{name}{i + 1}"] for i in range(length - 1)]}


def random_arrivals(rng, most: int) -> list[dict]:
    """7 to ``most`` jobs of graphs ``a`` and ``b``, arriving together or 10-60 ms apart, beta
    uniform in 0.1-0.7, for random offline instances."""
    t, jobs = 0.0, []
    for i in range(rng.randint(7, most)):
        t += rng.choice([0.0, 10.0, 30.0, 60.0])
        jobs.append({"id": f"j{i}", "graph": rng.choice(["a", "b"]), "arrival_ms": t,
                     "max_jct_fraction": round(rng.uniform(0.1, 0.7), 2)})
    return jobs
