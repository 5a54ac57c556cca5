"""The public data pacopt reads but never ships: where it is found, and its downloads.

Two data sets, each found the same way: its own variable first, then the download cache
(``$PACOPT_CACHE_DIR/<kind>``, default ``~/.cache/pacopt/<kind>``; when ``PACOPT_CACHE_DIR``
points elsewhere, ``~/.cache/pacopt/<kind>`` is searched after it).

- **PipeDream profiles** (``<model>.txt``, msr-fiddle/pipedream, MIT licence):
  ``$PACOPT_PIPEDREAM_DIR``, then the cache's ``pipedream/``; ``pacopt download-pipedream``
  fetches them (:func:`pacopt.model.pipedream.download_pipedream`).
- **Microsoft's ITP job traces** as published with ElasticFlow (microsoft/elasticflow-traces,
  MIT licence): a folder holding ``generated/<name>.csv`` (format ``elasticflow``) and
  ``raw/<name>.csv`` (``elasticflow-raw``): ``$PACOPT_TRACES_DIR``, then the cache's
  ``traces/elasticflow/``; ``pacopt download-traces`` fetches them (:func:`download_traces`,
  checked against the pinned archives' sizes and SHA-256). A trace workload's ``file`` may name
  a trace of this folder (``cluster04``) instead of giving a path (:func:`trace_path`).

Every "not found" is one :class:`~pacopt.infra.errors.InputError` line naming the command that
fetches the data and the variable that points at a copy.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from pacopt.infra.errors import InputError
from pacopt.model.timing_cache import cache_dir

#: Where the caches live when ``PACOPT_CACHE_DIR`` is not set.
DEFAULT_CACHE = Path("~/.cache/pacopt")


def data_cache_dirs(kind: str) -> list[Path]:
    """The download cache folders of data set ``kind`` (``pipedream``, ``traces/elasticflow``),
    first the one downloads go to: ``$PACOPT_CACHE_DIR/<kind>`` (default
    ``~/.cache/pacopt/<kind>``), then ``~/.cache/pacopt/<kind>`` if that is another folder."""
    first, default = cache_dir() / kind, DEFAULT_CACHE.expanduser() / kind
    return [first] if first == default else [first, default]


# ----- PipeDream profiles -------------------------------------------------------------------------
def pipedream_dirs() -> list[Path]:
    """Folders searched for PipeDream profiles named by model: ``$PACOPT_PIPEDREAM_DIR``, then
    the download cache (where ``pacopt download-pipedream`` puts them)."""
    own = os.environ.get("PACOPT_PIPEDREAM_DIR")
    return ([Path(own).expanduser()] if own else []) + data_cache_dirs("pipedream")


def find_pipedream(model: str) -> Path:
    """The local profile of a known PipeDream model, or an :class:`InputError` saying how to get
    it."""
    folders = pipedream_dirs()
    for folder in folders:
        if (folder / f"{model}.txt").is_file():
            return folder / f"{model}.txt"
    raise InputError(f"PipeDream profile '{model}' not found in {', '.join(map(str, folders))}; "
                     f"run `pacopt download-pipedream {model}` or set PACOPT_PIPEDREAM_DIR")


# ----- the ElasticFlow / ITP traces ---------------------------------------------------------------
TRACES_REPOSITORY = "microsoft/elasticflow-traces"
#: The release's commit: its archives' sizes and digests below are this commit's.
TRACES_COMMIT = "277ed24d0e908c31a1c98145819e2e3853d8ac00"
TRACES_URL = "https://raw.githubusercontent.com/{repository}/{commit}/data/{archive}"
#: Where a trace format's files are in a traces folder.
TRACE_FOLDERS = {"elasticflow": "generated", "elasticflow-raw": "raw"}


@dataclass(frozen=True)
class TraceArchive:
    """One archive of the release: its file name under ``data/``, its size in bytes and its
    SHA-256 at :data:`TRACES_COMMIT`."""

    name: str
    size: int
    sha256: str


#: The release's two archives, by the folder their CSVs go to.
TRACE_ARCHIVES = {
    "generated": TraceArchive("elasticflow-traces.tar.gz", 2599482,
                              "e9c20b73de61d2702aef086aebc995cbc432affbd0f09969cf30879c5d1a83c4"),
    "raw": TraceArchive("raw-traces.tar.gz", 1943846,
                        "67398e1a89245c50ae0881bf997e6cda0c95f9f47980af5bc56d67998965669f"),
}
#: The release's traces: name -> jobs. ``195job`` (ElasticFlow's testbed trace) is in
#: ``generated/`` only; every cluster is in both folders.
TRACES = {"cluster01": 1595, "cluster02": 5778, "cluster03": 3011, "cluster04": 15802,
          "cluster05": 3629, "cluster06": 2396, "cluster07": 12699, "cluster08": 13047,
          "cluster09": 11134, "cluster10": 260, "195job": 195}


def trace_folders_of(name: str) -> tuple[str, ...]:
    """The folders (``generated``, ``raw``) the release has trace ``name`` in."""
    return ("generated",) if name == "195job" else ("generated", "raw")


def traces_cache() -> Path:
    """Where ``pacopt download-traces`` puts the traces by default."""
    return data_cache_dirs("traces/elasticflow")[0]


def _holds_traces(folder: Path) -> bool:
    return any((folder / sub).is_dir() for sub in TRACE_FOLDERS.values())


def find_traces() -> Path:
    """The traces folder (``generated/`` and ``raw/``): ``$PACOPT_TRACES_DIR`` when set (it must
    hold one of them), else the download cache; else an :class:`InputError` saying how to get
    them."""
    own = os.environ.get("PACOPT_TRACES_DIR")
    if own:
        folder = Path(own).expanduser()
        if not _holds_traces(folder):
            raise InputError(f"PACOPT_TRACES_DIR '{folder}' holds no generated/ or raw/ folder of "
                             "trace CSVs; point it at the ElasticFlow traces or run "
                             "`pacopt download-traces`")
        return folder
    caches = data_cache_dirs("traces/elasticflow")
    for folder in caches:
        if _holds_traces(folder):
            return folder
    raise InputError(f"ElasticFlow traces not found (PACOPT_TRACES_DIR is not set, nothing in "
                     f"{', '.join(map(str, caches))}); run `pacopt download-traces` or set "
                     "PACOPT_TRACES_DIR")


def find_trace(name: str, fmt: str = "elasticflow") -> Path:
    """The CSV of trace ``name`` (``cluster04``) in format ``fmt`` in :func:`find_traces`'s
    folder, or an :class:`InputError` naming the traces there and how to get this one."""
    if fmt not in TRACE_FOLDERS:
        raise InputError(f"unknown trace format '{fmt}'; known: {', '.join(TRACE_FOLDERS)}")
    folder = find_traces() / TRACE_FOLDERS[fmt]
    path = folder / f"{name}.csv"
    if path.is_file():
        return path
    here = sorted(p.stem for p in folder.glob("*.csv"))
    fetch = (f"run `pacopt download-traces {name}`" if TRACE_FOLDERS[fmt] in trace_folders_of(name)
             and name in TRACES else f"the release has no {fmt} trace '{name}'")
    raise InputError(f"no trace '{name}' in {folder} (there: {', '.join(here) or 'none'}); "
                     f"{fetch}")


def is_trace_name(file: str) -> bool:
    """Whether a trace ``file`` entry is a bare name (letters, digits, ``_`` and ``-``: no
    folder, no suffix), which :func:`trace_path` may look up."""
    return re.fullmatch(r"[A-Za-z0-9_-]+", file) is not None


def trace_path(file: str, fmt: str, base_dir: str | Path = ".") -> Path:
    """The CSV a trace workload's ``file`` means: a path relative to ``base_dir``; or, for a
    bare name (``cluster04``) that is not a file there, the trace of that name in the traces
    folder (:func:`find_trace`; ``generated/`` for ``elasticflow``, ``raw/`` for
    ``elasticflow-raw``)."""
    path = Path(os.path.normpath(Path(base_dir) / Path(file).expanduser()))
    if path.exists() or not is_trace_name(file):
        return path
    return find_trace(file, fmt)


def download_traces(dest: str | Path, names: list[str] | None = None) -> list[Path]:
    """Download the ElasticFlow release of the ITP traces (MIT licence) into ``dest``:
    ``generated/<name>.csv``, ``raw/<name>.csv`` and the release's ``LICENSE``.

    ``names`` picks traces (default: all of :data:`TRACES`); only the archives holding them are
    fetched. Each archive is checked against its pinned size and SHA-256 before anything is
    written, and each file is written atomically, so a bad download never leaves a file behind
    or replaces a good one. Returns the written paths (the CSVs, then ``LICENSE``)."""
    import hashlib
    import http.client
    import io
    import tarfile
    import urllib.request

    from pacopt.infra.safe_write import write_atomically

    names = list(dict.fromkeys(names or TRACES))
    unknown = [n for n in names if n not in TRACES]
    if unknown:  # before any download, so a typo costs nothing
        raise InputError(f"unknown trace '{unknown[0]}'; known: {', '.join(TRACES)}")
    wanted = {sub: [n for n in names if sub in trace_folders_of(n)] for sub in TRACE_ARCHIVES}
    members: dict[str, dict[str, bytes]] = {}
    for sub, archive in TRACE_ARCHIVES.items():
        if not wanted[sub]:
            continue
        url = TRACES_URL.format(repository=TRACES_REPOSITORY, commit=TRACES_COMMIT,
                                archive=archive.name)
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                body = response.read()
        except http.client.HTTPException as err:  # a cut connection: a short read, a bad status
            raise InputError(f"download failed: {url}: {type(err).__name__}: {err}") from None
        digest = hashlib.sha256(body).hexdigest()
        if len(body) != archive.size or digest != archive.sha256:
            raise InputError(f"{url}: {len(body)} bytes with SHA-256 {digest[:12]}..., not the "
                             f"release's archive ({archive.size} bytes, {archive.sha256[:12]}...)")
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
            members[sub] = {Path(m.name).name: tar.extractfile(m).read()
                            for m in tar.getmembers() if m.isfile()}
    dest = Path(dest)
    written = []
    for sub, files in members.items():
        (dest / sub).mkdir(parents=True, exist_ok=True)
        for name in wanted[sub]:
            target = dest / sub / f"{name}.csv"
            write_atomically(target, lambda tmp, data=files[f"{name}.csv"]: tmp.write_bytes(data),
                             "trace")
            written.append(target)
    licence = next((files["LICENSE"] for files in members.values() if "LICENSE" in files), None)
    if licence is not None:
        write_atomically(dest / "LICENSE", lambda tmp: tmp.write_bytes(licence), "trace")
        written.append(dest / "LICENSE")
    return written
