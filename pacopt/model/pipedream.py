"""PipeDream profiler graphs (``graph.txt``): reading them, and downloading the public profiles.

Format (msr-fiddle/pipedream ``profiler/*/profiles/<model>/graph.txt``): node lines
``nodeK -- Type(args) -- forward_compute_time=.., backward_compute_time=.., activation_size=..,
parameter_size=..`` (a size may be a ``[a; b; c]`` list, which is summed) and edge lines
``nodeA -- nodeB``. Times are ms, sizes bytes. Ops keep file line order.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from pacopt.infra.errors import InputError
from pacopt.model.graph import JobGraph, Op

#: The public source of the 14 profiles, pinned to the commit PAC-ML's graphs come from.
PIPEDREAM_COMMIT = "7db6a1c3e64996d5b319faec6ca38cb31bfea1c4"
PIPEDREAM_URL = ("https://raw.githubusercontent.com/msr-fiddle/pipedream/{commit}/profiler/"
                 "{domain}/profiles/{model}/graph.txt")
PIPEDREAM_MODELS = {
    "alexnet": "image_classification", "densenet121": "image_classification",
    "inception_v3": "image_classification", "nasnetalarge": "image_classification",
    "nasnetamobile": "image_classification", "resnet101": "image_classification",
    "resnet18": "image_classification", "resnet50": "image_classification",
    "resnext101": "image_classification", "resnext50": "image_classification",
    "squeezenet1_0": "image_classification", "vgg16": "image_classification",
    "gnmt": "translation", "gnmt_large": "translation",
}
#: The five graphs of the PAC-ML paper's workload.
PAPER_GRAPHS = ("alexnet", "vgg16", "resnet18", "squeezenet1_0", "gnmt")


def _number(text: str, where: str) -> float:
    try:
        value = json.loads(text.replace(";", ","))
    except json.JSONDecodeError:
        raise InputError(f"{where}: '{text}' is not a number or a [a; b] list") from None
    if isinstance(value, list):
        value = sum(value)
    return float(value)


def parse_pipedream(text: str, name: str, source: str = "<text>") -> JobGraph:
    """Parse the text of a PipeDream ``graph.txt`` into a :class:`JobGraph`."""
    ops: list[Op] = []
    numeric: list[int] = []
    edges: list[tuple[str, str]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        pieces = [piece.split("\t")[-1] for piece in line.split(" -- ")]
        if len(pieces) > 2:
            node_id = pieces[0].strip()
            fields = pieces[2].split(", ")
            if len(fields) != 4 or not node_id.startswith("node"):
                raise InputError(f"{where}: expected 'nodeK -- Type -- forward_compute_time=.., "
                                 "backward_compute_time=.., activation_size=.., parameter_size=..'")
            values = [_number(f.split("=", 1)[-1], where) for f in fields]
            ops.append(Op(id=node_id, kind=pieces[1].split("(")[0].strip(), forward_ms=values[0],
                          backward_ms=values[1], activation_bytes=values[2], parameter_bytes=values[3]))
            try:
                numeric.append(int(node_id[4:]))
            except ValueError:
                raise InputError(f"{where}: node id '{node_id}' is not 'node<integer>'") from None
        elif len(pieces) == 2:
            edges.append((pieces[0].strip(), pieces[1].strip()))
        else:
            raise InputError(f"{where}: line is neither a node nor an edge")
    if not ops:
        raise InputError(f"{source}: no node lines found; is this a PipeDream graph.txt?")
    index = {op.id: i for i, op in enumerate(ops)}
    deps = []
    for u, v in edges:
        if u not in index or v not in index:
            raise InputError(f"{source}: edge '{u} -- {v}' names an unknown node")
        deps.append((index[u], index[v]))
    # The reference joins the forward and backward passes at the op with the largest id.
    join = max(range(len(ops)), key=numeric.__getitem__)
    return JobGraph(name=name, ops=tuple(ops), deps=tuple(deps), join=join)


def read_pipedream(path: str | Path, name: str | None = None) -> JobGraph:
    """Read a PipeDream ``graph.txt``. The name defaults to the file stem, or the folder's name
    for a file called ``graph.txt`` (the reference's convention)."""
    path = Path(path)
    if name is None:
        name = path.parent.name if path.name == "graph.txt" else path.stem
    try:
        text = path.read_text()
    except OSError as err:
        raise InputError(f"cannot read PipeDream graph '{path}': {err.strerror}") from None
    return parse_pipedream(text, name, str(path))


def download_pipedream(dest: str | Path, models: list[str] | None = None,
                       commit: str = PIPEDREAM_COMMIT) -> list[Path]:
    """Download the public PipeDream profiles (MIT licence) into ``dest/<model>.txt``.

    Needs internet access; nothing else in pacopt does (:mod:`pacopt.model.datasets` finds the
    files wherever they are). Returns the
    written paths. Each file is parsed before it is kept, so a bad download is never left behind.
    """
    models = list(models or PIPEDREAM_MODELS)
    unknown = [m for m in models if m not in PIPEDREAM_MODELS]
    if unknown:  # before any download, so a typo costs nothing
        raise InputError(f"unknown PipeDream model '{unknown[0]}'; known: {', '.join(PIPEDREAM_MODELS)}")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for model in models:
        url = PIPEDREAM_URL.format(commit=commit, domain=PIPEDREAM_MODELS[model], model=model)
        with urllib.request.urlopen(url, timeout=60) as response:
            raw = response.read()
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            raise InputError(f"{url}: the download is not a text profile") from None
        parse_pipedream(text, model, url)
        target = dest / f"{model}.txt"
        target.write_text(text)
        written.append(target)
    return written
