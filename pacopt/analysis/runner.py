"""Running a study: every cell through ``solve``, on a local process pool or on a Ray cluster.

Output folder::

    results/<cell>.json   the validated result of every finished cell (the result format)
    rows.jsonl            the journal: one table row per finished (or failed) cell
    results.parquet       the tidy table (see :mod:`pacopt.analysis.table`), also as
    results.csv           (parquet with the parquet extra, pyarrow; the CSV always)
    *.png                 the study's plots (:func:`pacopt.analysis.plots.study_plots`; with
                          the plots extra, matplotlib: without it, a warning and no plots)

Resuming: a rerun into the same folder skips every cell whose row is in the journal with its
result file beside it; failed cells (status ``error``, with their reason) are retried. A cell is
recorded the moment it finishes, so an interruption (Ctrl-C, a killed machine) loses only cells
still running. A failing cell never stops the others.

Resources: a cell asks for ``threads`` CPUs (default 1). The local pool never runs more than
``workers`` CPUs' worth of cells at once; on Ray every cell is a task with ``num_cpus`` set, so
a 2-thread exact solve takes 2 CPUs of the cluster.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing
from pathlib import Path

import pandas as pd

from pacopt.analysis.study_spec import Cell, Study
from pacopt.analysis.table import assemble, error_row, solution_row
from pacopt.infra.errors import InputError, warn
from pacopt.infra.executors import ProcessPool, in_turn, on_pool, on_ray
from pacopt.infra.extras import available
from pacopt.infra.interrupt import stop_requested, stoppable
from pacopt.infra.progress import tqdm
from pacopt.infra.ray_cluster import check_ray_address, ray_session
from pacopt.infra.safe_write import prepare_folder, write_atomically

_MODELS: dict = {}  # per process: (cluster, model settings) -> JctModel, so tables are reused


def run_cell(cell: Cell) -> tuple[dict, str | None]:
    """Solve one cell: its table row and its result JSON (None if it failed)."""
    from pacopt.model.instance import instance_from_dict, load_instance
    from pacopt.model.jct import JctModel
    from pacopt.solvers.api import solve

    started = time.perf_counter()
    try:
        if cell.instance_file is not None:
            instance = load_instance(cell.instance_file)
        else:
            instance = instance_from_dict(cell.instance_data, cell.base_dir, source=cell.id)
        key = (instance.cluster, instance.model)
        if key not in _MODELS:
            _MODELS[key] = JctModel(instance.cluster, instance.model)
        solution = solve(instance, cell.method_name, model=_MODELS[key], **cell.options)
    except Exception as err:  # noqa: BLE001 - a failed cell is a row with its reason, not the end
        reason = f"{type(err).__name__}: {err}".splitlines()[0]
        return error_row(cell, reason, time.perf_counter() - started), None
    if getattr(solution, "interrupted", False):
        # Ctrl-C stopped the method early: its answer is not the cell's, so the cell is not
        # recorded as finished (a rerun solves it again)
        raise KeyboardInterrupt
    return solution_row(cell, solution), solution.dumps()


def run_study(study: Study, out_dir: str | Path, *, workers: int | None = None,
              ray: bool = False, ray_address: str | None = None, progress: bool = True,
              plots: bool = True, on_row: Callable[[dict], None] | None = None) -> pd.DataFrame:
    """Run every unfinished cell of ``study`` into ``out_dir`` and return the tidy table.

    ``workers``: local processes (default: the CPU count; 1 runs in this process), or with
    ``ray`` the CPUs of the local Ray instance started here. ``ray_address`` joins an existing
    Ray cluster instead (``"auto"`` or ``"ray://host:10001"``). ``on_row`` is called with each
    finished row. The table and plots are written even when the run is interrupted.
    """
    out = Path(out_dir)
    if plots and not available("matplotlib"):
        warn("the study's plots need the plots extra: pip install 'pacopt[plots]'; this run "
             "writes the table only")
        plots = False
    if ray_address:  # nothing is created for a cluster that is not there
        check_ray_address(ray_address)
    prepare_folder(out, "study output")
    prepare_folder(out / "results", "study output")
    rows = finished_rows(out)
    pending = [c for c in study.cells if c.id not in rows]
    workers = workers or os.cpu_count() or 1
    journal_path = out / "rows.jsonl"
    with stoppable():  # the first Ctrl-C lets running cells stop and keeps the finished ones
        return _run(study, out, rows, pending, journal_path, workers, ray, ray_address,
                    progress, plots, on_row)


def _run(study, out, rows, pending, journal_path, workers, ray, ray_address, progress, plots,
         on_row) -> pd.DataFrame:
    if journal_path.exists() and not journal_path.read_bytes().endswith(b"\n"):
        with journal_path.open("a") as journal:  # a killed run's cut line stays on its own
            journal.write("\n")
    try:
        with tqdm(total=len(study.cells), initial=len(study.cells) - len(pending),
                  desc=study.name, unit="cell", disable=None if progress else True) as bar, \
                journal_path.open("a") as journal:
            for cell, row, text in _finished_cells(pending, workers, ray, ray_address):
                if text is not None:
                    write_atomically(out / "results" / f"{cell.id}.json", text, what="study output")
                journal.write(json.dumps(row) + "\n")
                journal.flush()
                rows[cell.id] = row
                bar.update()
                if on_row is not None:
                    on_row(row)
    except BaseException:
        # interrupted or failed: still write the table of the finished cells, but a second
        # failure there (the same full disk) must not hide the first
        table = assemble(study.cells, rows)
        if not table.empty:
            try:
                write_table(table, out)
            except (InputError, OSError) as err:
                warn(f"the table of the finished cells was not written: {err}")
        raise
    table = assemble(study.cells, rows)
    if not table.empty:
        write_table(table, out)
        if plots:
            from pacopt.analysis.plots import study_plots
            study_plots(table, out)
    return table


def finished_rows(out_dir: str | Path) -> dict[str, dict]:
    """Rows of the cells finished in ``out_dir``: in the journal, not failed, result on disk."""
    out = Path(out_dir)
    rows: dict[str, dict] = {}
    journal = out / "rows.jsonl"
    if journal.exists():
        for line in journal.read_text().splitlines():
            try:  # a line cut short by a killed process is skipped: its cell runs again
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue
            if (isinstance(row, dict) and isinstance(row.get("cell"), str)
                    and isinstance(row.get("status"), str)):  # anything else: not a row of ours
                rows[row["cell"]] = row
    return {cell: row for cell, row in rows.items()
            if row["status"] != "error" and (out / "results" / f"{cell}.json").exists()}


def read_table(out_dir: str | Path) -> pd.DataFrame:
    """A study's tidy table: ``results.parquet`` in its output folder, ``results.csv`` where
    there is none or pyarrow is not installed."""
    parquet = Path(out_dir) / "results.parquet"
    if parquet.exists() and available("pyarrow"):
        return pd.read_parquet(parquet)
    return pd.read_csv(Path(out_dir) / "results.csv")


def table_file(out_dir: str | Path) -> Path:
    """The file :func:`write_table` writes the table to first: ``results.parquet`` with
    pyarrow, else ``results.csv``."""
    return Path(out_dir) / ("results.parquet" if available("pyarrow") else "results.csv")


def write_table(table: pd.DataFrame, out_dir: Path) -> None:
    """Write ``results.parquet`` (with pyarrow: the parquet extra; without it a parquet file
    of an earlier run is removed, so none is stale) and ``results.csv`` atomically."""
    writers = [("results.csv", table.to_csv)]
    if available("pyarrow"):
        writers.insert(0, ("results.parquet", table.to_parquet))
    else:
        (out_dir / "results.parquet").unlink(missing_ok=True)
    for name, write in writers:
        write_atomically(out_dir / name, lambda tmp, write=write: write(tmp, index=False),
                         what="study output")


# ----- where the cells run ----------------------------------------------------------------------
def _finished_cells(cells: list[Cell], workers: int, ray: bool, address: str | None
                    ) -> Iterator[tuple[Cell, dict, str | None]]:
    """(cell, row, result JSON) of each cell as it finishes (:mod:`pacopt.infra.executors`):
    Ray tasks, each asking for the cell's CPUs (capped at the cluster's), with ``ray`` or an
    ``address``; else a local process pool running at most ``workers`` CPUs' worth of cells; in
    this process when ``workers`` is 1. After a stop request (Ctrl-C) the running cells stop
    and are not recorded (their answer is not the cell's; a rerun solves them again), the
    finished ones stand, and KeyboardInterrupt is raised."""
    cpus = [cell.cpus for cell in cells]
    with ExitStack() as stack:
        if ray or address:
            session = stack.enter_context(ray_session(address, workers))
            results = on_ray(session, run_cell, cells, cpus)
        elif workers > 1:
            pool = stack.enter_context(ProcessPool(workers))
            results = on_pool(pool, run_cell, cells, cpus)
        else:
            results = in_turn(run_cell, cells)
        # closed before the pool shuts down: cells not yet yielded are told to stop
        for index, (row, text) in stack.enter_context(closing(results)):
            yield cells[index], row, text
    if stop_requested():
        raise KeyboardInterrupt
