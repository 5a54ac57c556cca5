"""Shared fixtures.

The public data (PipeDream profiles, the ElasticFlow / ITP traces) is found where the package
finds it (``PACOPT_PIPEDREAM_DIR`` / ``PACOPT_TRACES_DIR``, then the download cache of the
``PACOPT_CACHE_DIR`` pytest was started with), then in ``shared/data`` beside the repository
(where CI has it); a test that needs it skips without it, saying which command fetches it.
"""

import os
from pathlib import Path

import pytest

#: The shared folder next to the repository (PipeDream profiles, traces, reference notes).
SHARED = Path(__file__).resolve().parents[2] / "shared"
#: The caller's cache (the session below gives the tests a fresh one): the data downloaded there
#: is looked up in it.
USER_CACHE = os.environ.get("PACOPT_CACHE_DIR")
#: The clusters the tests, the notebooks and studies/trace.yaml read, in both folders.
TRACE_CLUSTERS = ("cluster01", "cluster02", "cluster03", "cluster04", "cluster05", "cluster07",
                  "cluster08", "cluster09")


def _in_user_cache(find):
    """``find()`` with ``PACOPT_CACHE_DIR`` as pytest was started with."""
    with pytest.MonkeyPatch.context() as patch:
        if USER_CACHE is None:
            patch.delenv("PACOPT_CACHE_DIR", raising=False)
        else:
            patch.setenv("PACOPT_CACHE_DIR", USER_CACHE)
        return find()


def find_pipedream_data() -> Path | None:
    """A folder with every PipeDream profile: the package's folders
    (:func:`pacopt.model.datasets.pipedream_dirs`), then ``shared/data/pipedream``."""
    from pacopt.model.datasets import pipedream_dirs
    from pacopt.model.pipedream import PIPEDREAM_MODELS

    for folder in [*_in_user_cache(pipedream_dirs), SHARED / "data" / "pipedream"]:
        if all((folder / f"{model}.txt").is_file() for model in PIPEDREAM_MODELS):
            return folder
    return None


def find_trace_data() -> Path | None:
    """A traces folder with :data:`TRACE_CLUSTERS` in ``generated/`` and ``raw/``: the package's
    (:func:`pacopt.model.datasets.find_traces`), then ``shared/data/traces/elasticflow``."""
    from pacopt.infra.errors import InputError
    from pacopt.model.datasets import find_traces

    try:
        candidates = [_in_user_cache(find_traces)]
    except InputError:
        candidates = []
    for folder in [*candidates, SHARED / "data" / "traces" / "elasticflow"]:
        if all((folder / sub / f"{name}.csv").is_file() for sub in ("generated", "raw")
               for name in TRACE_CLUSTERS):
            return folder
    return None


@pytest.fixture(scope="session")
def pipedream_dir() -> Path:
    """The public PipeDream profiles (``<model>.txt``); skips the test when they are absent."""
    path = find_pipedream_data()
    if path is None:
        pytest.skip("PipeDream profiles not found: run `pacopt download-pipedream` or set "
                    "PACOPT_PIPEDREAM_DIR")
    return path


@pytest.fixture
def pipedream_env(pipedream_dir, monkeypatch) -> Path:
    """:func:`pipedream_dir`, also set as ``PACOPT_PIPEDREAM_DIR`` (for this test's process and
    the ones it starts), for code that finds the graphs by name: the paper workload, the CLIs,
    notebooks."""
    monkeypatch.setenv("PACOPT_PIPEDREAM_DIR", str(pipedream_dir))
    return pipedream_dir


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test (as the training's workers run it), restored after."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session", autouse=True)
def traces_everywhere():
    """The traces folder, when found, is ``PACOPT_TRACES_DIR`` for the whole session (as for a
    user who set it), so code that names a trace (``cluster04``) finds it: the example studies,
    the notebooks, the commands the tests start."""
    path = find_trace_data()
    with pytest.MonkeyPatch.context() as patch:
        if path is not None:
            patch.setenv("PACOPT_TRACES_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def trace_dir(traces_everywhere) -> Path:
    """The ElasticFlow release of Microsoft's ITP job traces (``raw/`` and ``generated/``
    cluster CSVs, also ``PACOPT_TRACES_DIR``); skips the test when they are absent. Never copied
    into the repository."""
    if traces_everywhere is None:
        pytest.skip("ElasticFlow traces not found: run `pacopt download-traces` or set "
                    "PACOPT_TRACES_DIR")
    return traces_everywhere


@pytest.fixture(scope="session", autouse=True)
def fresh_timing_cache(tmp_path_factory):
    """Tests never read or write the user's timing cache: every run starts from an empty one."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PACOPT_CACHE_DIR", str(tmp_path_factory.mktemp("pacopt-cache")))
        yield


@pytest.fixture(scope="session", autouse=True)
def ctrl_c_as_in_a_terminal():
    """The Ctrl-C tests send real SIGINTs. A test run started in the background of a
    non-interactive shell inherits SIGINT *ignored*, and then no handler would see them: give
    the session Python's usual handler, as in a terminal."""
    import signal

    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def table_checkpoint(path: Path, instance_data: dict) -> Path:
    """An untrained agent with the learned table of the degrees 0..16 (checkpoint format 1, as
    the shipped agents had until they were retrained with degree features on 2026-11-28), for
    the observations of ``instance_data``'s cluster and model, saved to ``path`` without
    metadata (such a file loads: its spaces are checked)."""
    from sb3_contrib import MaskablePPO

    from pacopt.learned.env import PartitionEnv, WorkloadFamily
    from pacopt.learned.gnn import DegreePolicy

    env = PartitionEnv(WorkloadFamily.from_instance_data(instance_data, distributions=("A",)))
    MaskablePPO(DegreePolicy, env, device="cpu", seed=0, policy_kwargs={
        "features_extractor_kwargs": {"spill": True, "degree_features": False}}).save(path)
    return path
