"""Where graphs come from: files, bundled examples and downloaded PipeDream profiles, by name
(the profiles' folders: :mod:`pacopt.model.datasets`)."""

from __future__ import annotations

import json
from pathlib import Path

from pacopt.infra.errors import InputError
from pacopt.model.datasets import find_pipedream
from pacopt.model.graph import JobGraph, graph_from_dict
from pacopt.model.pipedream import PIPEDREAM_MODELS, read_pipedream

#: The bundled example graphs, profiled by pacopt from models it defines (``pacopt.model.zoo``).
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples" / "graphs"


def example_instance_data(name: str, num_jobs: int | None = None,
                          pipedream_dir: str | Path | None = None) -> dict:
    """The data of the example instance ``examples/<name>.json``, ready to be written anywhere:
    graph files made absolute, PipeDream graphs read from ``pipedream_dir`` when given (else
    found by name), and the workload cut to ``num_jobs`` jobs when given."""
    folder = EXAMPLES_DIR.parent
    data = json.loads((folder / f"{name}.json").read_text())
    graphs = {}
    for key, entry in data.get("graphs", {}).items():
        if "file" in entry:
            entry = {**entry, "file": str(folder / entry["file"])}
        elif "pipedream" in entry and pipedream_dir is not None:
            entry = {**entry, "pipedream": str(Path(pipedream_dir) / f"{entry['pipedream']}.txt")}
        graphs[key] = entry
    data["graphs"] = graphs
    if num_jobs is not None:
        data["workload"]["num_jobs"] = num_jobs
    return data


MS_DIGITS = 6  # saved op times keep 1e-6 ms: far below any quantum, and files stay small


def save_graph(graph: JobGraph, path: str | Path) -> None:
    """Write ``graph`` in the inline JSON form, times rounded to 1e-6 ms and bytes to integers."""
    data = graph.to_dict()
    for op in data["ops"]:
        for key in ("forward_ms", "backward_ms"):
            op[key] = round(op[key], MS_DIGITS)
        for key in ("activation_bytes", "parameter_bytes"):
            op[key] = round(op[key])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def read_graph_file(path: str | Path, name: str | None = None) -> JobGraph:
    """Read a graph file: PipeDream ``.txt`` or the inline JSON form (name: the file's, or its
    stem)."""
    path = Path(path)
    if path.suffix == ".txt":
        return read_pipedream(path, name)
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise InputError(f"cannot read graph file '{path}': {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"graph file '{path}' is not valid JSON: line {err.lineno}: {err.msg}") from None
    if not isinstance(data, dict):
        raise InputError(f"graph file '{path}' must hold an object with 'ops' and 'deps'")
    return graph_from_dict(data, name or data.get("name") or path.stem)


def resolve_graph(spec: str) -> JobGraph:
    """A graph from a path, a bundled example name (``cnn``) or a PipeDream model name."""
    path = Path(spec)
    if path.suffix in (".txt", ".json") or path.exists():
        return read_graph_file(path)
    if (EXAMPLES_DIR / f"{spec}.json").is_file():
        return read_graph_file(EXAMPLES_DIR / f"{spec}.json", spec)
    if spec in PIPEDREAM_MODELS:
        return read_pipedream(find_pipedream(spec), spec)
    examples = sorted(p.stem for p in EXAMPLES_DIR.glob("*.json"))
    raise InputError(f"no graph '{spec}': not a file, a bundled example ({', '.join(examples)}) "
                     "or a PipeDream model name")
