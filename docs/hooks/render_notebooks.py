"""Render the tutorial notebooks for the site: run each on small settings and keep its outputs.

    python docs/hooks/render_notebooks.py [NAME ...]     # NAME: 3_gap_study or 3_gap_study.ipynb
    python docs/hooks/render_notebooks.py --prose [NAME ...]

Each ``notebooks/<name>.ipynb`` (stored without outputs) is executed headless with nbclient, in
``notebooks/`` as Jupyter would, on the small settings of :data:`SMALL`: a code cell tagged
``small-settings`` is inserted after the notebook's ``parameters`` cell and overrides it. The
executed copy, with a note at the top saying so, is written to ``docs/notebooks/<name>.ipynb``;
``docs/hooks/pages.py`` puts that copy on the site in place of the bare source. No NAME renders
every notebook. ``--prose`` re-renders nothing: it copies the sources' markdown cells into the
existing rendered copies (for an edit of the text only; the code cells must still match).

:data:`SMALL` is also what ``tests/test_notebooks.py`` runs the notebooks on, so the site shows
what CI runs. ``tests/test_rendered_notebooks.py`` fails when a rendered copy's code cells differ
from its source's: a changed notebook needs a re-render.

The data the notebooks read (PipeDream profiles, the ITP traces) is looked up in ``shared/data``
next to the repository unless ``PACOPT_PIPEDREAM_DIR`` / ``PACOPT_TRACES_DIR`` say otherwise;
an output that names one of those folders shows the variable instead of this machine's path.
Each notebook runs in a fresh scratch folder (``$TMPDIR/pacopt-render/<name>``: study outputs and
the timing cache), so a re-render does not resume from an earlier one.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
RENDERED = ROOT / "docs" / "notebooks"
SHARED = ROOT.parent / "shared"
SCRATCH = Path(tempfile.gettempdir()) / "pacopt-render"

#: Tags of the two cells a rendered copy has that its source has not.
SETTINGS_TAG = "small-settings"
NOTE_TAG = "rendered-note"
#: A rendered copy larger than this fails the render (the site and the repository carry it).
MAX_BYTES = 1_500_000


def small_study(source: str, folder: Path, exact_jobs: int = 10) -> Path:
    """``studies/<source>`` shrunk: one seed, few jobs, short exact solves."""
    data = yaml.safe_load((ROOT / "studies" / source).read_text())
    for grid in data["grids"]:
        grid["workload"]["seeds"] = 1
        exact = any(isinstance(m, dict) for m in grid["methods"])
        grid["workload"]["num_jobs"] = exact_jobs if exact else 60
        for method in grid["methods"]:
            if isinstance(method, dict):
                method.update(time_limit=5, threads=1)
        graphs = grid["workload"].get("graphs")
        if isinstance(graphs, dict):  # paths relative to studies/: make them absolute
            for spec in graphs.values():
                spec["file"] = str((ROOT / "studies" / spec["file"]).resolve())
    path = folder / source
    path.write_text(yaml.safe_dump(data))
    return path


def small_placement_study(folder: Path) -> Path:
    """``studies/placement.yaml``'s first grid on the bundled graphs (no download): 20 jobs,
    a few rules under both placers, ``tuned`` and a 5 s exact solve."""
    data = yaml.safe_load((ROOT / "studies" / "placement.yaml").read_text())
    gap = yaml.safe_load((ROOT / "studies" / "beta-gap.yaml").read_text())["grids"][0]["workload"]
    grid = data["grids"][0]
    grid["workload"].update(graphs={name: {"file": str((ROOT / "studies" / g["file"]).resolve())}
                                    for name, g in gap["graphs"].items()},
                            distributions=["A", "B"], num_jobs=20, interarrival_ms=150)
    keep = ("min-feasible", "fixed-or-min:4", "fixed-or-min:8", "tuned", "cpsat")
    grid["methods"] = [m for m in grid["methods"]
                       if (m if isinstance(m, str) else m["name"]) in keep]
    for method in grid["methods"]:
        if isinstance(method, dict) and method["name"] == "cpsat":
            method.update(time_limit=5, threads=1)
    data["grids"] = [grid]
    path = folder / "placement.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


#: Per notebook, its small settings given a scratch folder: the values that override its
#: ``parameters`` cell on the site and in ``tests/test_notebooks.py``.
SMALL = {
    "1_model_tour.ipynb": lambda folder: {},
    "2_heuristics_vs_optimum.ipynb": lambda folder: {"NUM_JOBS": 12, "TIME_LIMIT": 10},
    "3_gap_study.ipynb": lambda folder: {
        "STUDY": str(small_study("beta-gap.yaml", folder)), "OUT": str(folder / "out"),
        "PLACEMENT_STUDY": str(small_placement_study(folder)),
        "PLACEMENT_OUT": str(folder / "placement"), "SPLIT_METHOD": "tuned"},
    "4_physical_vs_ddls.ipynb": lambda folder: {"NUM_JOBS": 40, "SEEDS": 1,
                                                "OUT": str(folder / "out")},
    "5_learned_agent.ipynb": lambda folder: {"NUM_JOBS": 60, "SEEDS": 1, "CURVE_JOBS": 60,
                                             "EXACT_JOBS": 12, "TIME_LIMIT": 5},
    "paper_table.ipynb": lambda folder: {"STUDY": str(small_study("paper.yaml", folder)),
                                         "OUT": str(folder / "out")},
    "6_real_cluster_week.ipynb": lambda folder: {"NUM_JOBS": 120, "BUCKET_HOURS": 3},
}

#: The data each notebook reads from ``shared/data`` (the tests skip without it).
NEEDS = {"4_physical_vs_ddls.ipynb": ("pipedream",), "5_learned_agent.ipynb": ("pipedream",),
         "paper_table.ipynb": ("pipedream",),
         "6_real_cluster_week.ipynb": ("pipedream", "traces")}


DATA_VARS = ("PACOPT_PIPEDREAM_DIR", "PACOPT_TRACES_DIR")


def data_env() -> dict[str, str]:
    """``PACOPT_PIPEDREAM_DIR`` and ``PACOPT_TRACES_DIR``: the environment's, else the folders in
    ``shared/data`` next to the repository where they exist."""
    env = {}
    for var, path in (("PACOPT_PIPEDREAM_DIR", SHARED / "data" / "pipedream"),
                      ("PACOPT_TRACES_DIR", SHARED / "data" / "traces" / "elasticflow")):
        if os.environ.get(var):
            env[var] = os.environ[var]
        elif path.is_dir():
            env[var] = str(path)
    return env


def settings_cell(values: dict) -> nbformat.NotebookNode:
    lines = ["# Small settings (docs/hooks/render_notebooks.py): they override the cell above"]
    lines += [f"{key} = {value!r}" for key, value in values.items()]
    cell = nbformat.v4.new_code_cell("\n".join(lines), metadata={"tags": [SETTINGS_TAG]})
    cell.id = SETTINGS_TAG  # not a random id: a re-render gives the same file
    return cell


def execute(name: str, folder: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """``notebooks/<name>`` executed in ``notebooks/`` on its small settings (a cell tagged
    ``small-settings`` after the ``parameters`` cell, when it has any), with scratch files in
    ``folder``. A cell
    that raises raises ``nbclient.exceptions.CellExecutionError``."""
    from nbclient import NotebookClient

    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    at = next(i for i, c in enumerate(book.cells) if "parameters" in c.metadata.get("tags", []))
    values = SMALL[name](folder)
    if values:
        book.cells.insert(at + 1, settings_cell(values))
    NotebookClient(book, timeout=timeout, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return book


def note_cell(name: str, values: dict) -> nbformat.NotebookNode:
    stem = Path(name).stem
    shown = (" with " + ", ".join(f"`{k}`" for k in values if not k.endswith("OUT"))
             if values else "")
    text = (f"> **Outputs from small settings.** This page is the notebook run on small settings"
            f"{shown} (set in the cell after the parameters cell), so its tables and "
            f"plots come from fewer jobs, seeds and seconds than the full run. To run it on the "
            f"settings of its parameters cell, open `notebooks/{name}` from a clone in JupyterLab "
            f"and run every cell, or run `jupyter execute notebooks/{name}`. The page itself is "
            f"re-rendered with `python docs/hooks/render_notebooks.py {stem}`.")
    if not values:
        text = (f"> **Outputs from a headless run.** This page is the notebook run as stored "
                f"(its settings are small already). To run it yourself, open `notebooks/{name}` "
                f"from a clone in JupyterLab and run every cell, or run "
                f"`jupyter execute notebooks/{name}`. The page itself is re-rendered with "
                f"`python docs/hooks/render_notebooks.py {stem}`.")
    cell = nbformat.v4.new_markdown_cell(text, metadata={"tags": [NOTE_TAG]})
    cell.id = NOTE_TAG
    return cell


def insert_note(book: nbformat.NotebookNode, cell: nbformat.NotebookNode) -> None:
    """The note after the title cell (a first markdown cell opening with ``# ``), else first."""
    first = book.cells[0] if book.cells else None
    titled = first is not None and first.cell_type == "markdown" and first.source.startswith("# ")
    book.cells.insert(1 if titled else 0, cell)


def stable(book: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Without what changes from one run to the next though the notebook did not: execution
    timestamps, the kernel's run-time metadata, widget state."""
    for cell in book.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)
    book.metadata.pop("widgets", None)
    book.metadata.pop("papermill", None)
    return book


def neutral_paths(book: nbformat.NotebookNode, env: dict[str, str]) -> nbformat.NotebookNode:
    """Outputs that name a data folder of this machine name its variable instead
    (``/somewhere/traces/generated/x.csv`` -> ``$PACOPT_TRACES_DIR/generated/x.csv``)."""
    folders = sorted(((value, f"${var}") for var, value in env.items() if var in DATA_VARS),
                     key=lambda pair: -len(pair[0]))

    def fix(text):
        if isinstance(text, list):
            return [fix(t) for t in text]
        for folder, name in folders:
            text = text.replace(folder, name)
        return text

    for cell in book.cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = fix(output["text"])
            for kind, value in output.get("data", {}).items():
                if kind.startswith("text/"):
                    output["data"][kind] = fix(value)
    return book


def code_sources(book: nbformat.NotebookNode) -> list[str]:
    """The code cells' sources, without the small-settings cell of a rendered copy."""
    return [c.source for c in book.cells
            if c.cell_type == "code" and SETTINGS_TAG not in c.metadata.get("tags", [])]


def source_cells(book: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """(type, source) of every cell, without the two cells a rendered copy adds."""
    return [(c.cell_type, c.source) for c in book.cells
            if not {SETTINGS_TAG, NOTE_TAG} & set(c.metadata.get("tags", []))]


def image_count(book: nbformat.NotebookNode) -> int:
    return sum(1 for c in book.cells if c.cell_type == "code" for o in c.outputs
               if any(k.startswith("image/") for k in o.get("data", {})))


def makes_plots(book: nbformat.NotebookNode) -> bool:
    """Whether a notebook's code draws figures (matplotlib, or pacopt's ``plot_*`` helpers)."""
    return any("plot_" in s or "matplotlib" in s or "plt." in s for s in code_sources(book))


def render(name: str) -> tuple[float, int, int]:
    """Render one notebook; returns (seconds, images, bytes)."""
    folder = SCRATCH / Path(name).stem
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env = {**data_env(), "PACOPT_CACHE_DIR": str(folder / "cache"),
           # tqdm.auto's warning that ipywidgets is absent (a page would show it, with this
           # machine's paths, in every notebook that imports the studies)
           "PYTHONWARNINGS": "ignore:IProgress not found"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    start = time.perf_counter()
    try:
        book = execute(name, folder)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    seconds = time.perf_counter() - start
    insert_note(book, note_cell(name, SMALL[name](folder)))
    text = nbformat.writes(neutral_paths(stable(book), env)) + "\n"
    if len(text.encode()) > MAX_BYTES:
        raise ValueError(f"{name}: the rendered copy is {len(text.encode())} bytes "
                         f"(limit {MAX_BYTES}); make its small settings smaller")
    RENDERED.mkdir(parents=True, exist_ok=True)
    (RENDERED / name).write_text(text, encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    return seconds, image_count(book), len(text.encode())


def refresh_prose(name: str) -> None:
    """The source's markdown cells in the rendered copy, the code cells and outputs kept."""
    source = nbformat.read(NOTEBOOKS / name, as_version=4)
    path = RENDERED / name
    rendered = nbformat.read(path, as_version=4)
    if code_sources(source) != code_sources(rendered):
        raise SystemExit(f"{name}: its code cells changed; render it again "
                         f"(python docs/hooks/render_notebooks.py {Path(name).stem})")
    outputs = iter([c for c in rendered.cells if c.cell_type == "code"
                    and SETTINGS_TAG not in c.metadata.get("tags", [])])
    extra = {SETTINGS_TAG: None, NOTE_TAG: None}
    for cell in rendered.cells:
        for tag in extra:
            if tag in cell.metadata.get("tags", []):
                extra[tag] = cell
    cells = []
    for cell in source.cells:
        cells.append(next(outputs) if cell.cell_type == "code" else copy.deepcopy(cell))
        if extra[SETTINGS_TAG] is not None and "parameters" in cell.metadata.get("tags", []):
            cells.append(extra[SETTINGS_TAG])
    rendered.cells = cells
    if extra[NOTE_TAG] is not None:
        insert_note(rendered, extra[NOTE_TAG])
    path.write_text(nbformat.writes(stable(rendered)) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="notebooks to render (file name or stem); default every one")
    parser.add_argument("--prose", action="store_true",
                        help="copy the sources' markdown into the rendered copies, run nothing")
    args = parser.parse_args(argv)
    known = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    names = [n if n.endswith(".ipynb") else f"{n}.ipynb" for n in args.names] or known
    unknown = [n for n in names if n not in known or n not in SMALL]
    if unknown:
        parser.error(f"not a notebook with small settings: {', '.join(unknown)} "
                     f"(notebooks/: {', '.join(known)}; SMALL in {Path(__file__).name})")
    if args.prose:
        for name in names:
            refresh_prose(name)
            print(f"{name}: prose copied")
        return 0
    failed = []
    print(f"{'notebook':32} {'seconds':>8} {'images':>6} {'bytes':>9}")
    for name in names:
        try:
            seconds, images, size = render(name)
        except Exception as error:  # noqa: BLE001 -- report every notebook, then fail
            failed.append(name)
            message = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # the traceback's colours
            print(f"{name:32} FAILED: {type(error).__name__}: {message[-2000:]}",
                  file=sys.stderr)
            continue
        print(f"{name:32} {seconds:8.1f} {images:6d} {size:9d}", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
