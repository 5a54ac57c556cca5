"""Profile every model of ``pacopt.model.zoo`` and write ``examples/graphs/<name>.json``.

Run ``python examples/make_graphs.py`` after changing the zoo or the profiler; the tests check
that the bundled files match what the profiler produces now. The output is deterministic: the
profiles depend only on shapes, and the zoo builders seed their own weights and inputs.
"""

from pathlib import Path

from pacopt.model.graph_sources import save_graph
from pacopt.model.zoo import ZOO, profile_zoo_model

GRAPHS = Path(__file__).resolve().parent / "graphs"


def main() -> None:
    for name in ZOO:
        graph = profile_zoo_model(name)
        path = GRAPHS / f"{name}.json"
        save_graph(graph, path)
        print(f"{path}: {graph.num_ops} ops, sequential step {graph.step_ms:.3f} ms")


if __name__ == "__main__":
    main()
