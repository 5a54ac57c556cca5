"""Shared fixtures."""

from pathlib import Path

import pytest

#: The shared folder next to the repository (PipeDream profiles, reference notes).
SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def pipedream_dir() -> Path:
    """The public PipeDream profiles (``<model>.txt``); skips the test when they are absent."""
    path = SHARED / "data" / "pipedream"
    if not path.is_dir():
        pytest.skip(f"PipeDream profiles not found at {path}")
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


@pytest.fixture(scope="session")
def trace_dir() -> Path:
    """The ElasticFlow release of Microsoft's ITP job traces (``raw/`` and ``generated/``
    cluster CSVs); skips the test when they are absent. Never copied into the repository."""
    path = SHARED / "data" / "traces" / "elasticflow"
    if not (path / "generated").is_dir():
        pytest.skip(f"ElasticFlow traces not found at {path}")
    return path


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
