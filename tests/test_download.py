"""``download_pipedream`` and ``download_traces`` without the network: ``urllib.request.urlopen``
is replaced by a fake that serves the shared PipeDream profile, small stand-ins for the traces'
archives (pinned in their place), or garbage, and records what was asked for."""

from __future__ import annotations

import csv
import hashlib
import http.client
import io
import tarfile
import urllib.error
import urllib.request

import pytest

from pacopt.cli import pacopt_main
from pacopt.infra.errors import InputError
from pacopt.model import datasets
from pacopt.model.pipedream import (
    PIPEDREAM_COMMIT,
    PIPEDREAM_MODELS,
    download_pipedream,
    read_pipedream,
)
from pacopt.model.trace import read_trace


class FakeResponse:
    def __init__(self, body: bytes):
        self.body = body

    def read(self) -> bytes:
        return self.body

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def alexnet_text(pipedream_dir) -> str:
    return (pipedream_dir / "alexnet.txt").read_text()


@pytest.fixture
def serve(monkeypatch):
    """``serve(body)`` makes every urlopen return ``body`` (bytes, or an exception to raise);
    returns the list of requested URLs."""

    def install(body):
        urls: list[str] = []

        def fake_urlopen(url, *args, **kwargs):
            urls.append(url if isinstance(url, str) else url.full_url)
            if isinstance(body, Exception):
                raise body
            return FakeResponse(body)

        monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
        return urls

    return install


def test_download_writes_a_parseable_profile(serve, alexnet_text, pipedream_dir, tmp_path):
    urls = serve(alexnet_text.encode())
    dest = tmp_path / "new" / "folder"  # created on demand
    paths = download_pipedream(dest, ["alexnet"])
    assert paths == [dest / "alexnet.txt"]
    assert paths[0].read_text() == alexnet_text
    graph = read_pipedream(paths[0])
    reference = read_pipedream(pipedream_dir / "alexnet.txt")
    assert graph.name == "alexnet" and graph.ops == reference.ops and graph.deps == reference.deps
    assert urls == ["https://raw.githubusercontent.com/msr-fiddle/pipedream/"
                    f"{PIPEDREAM_COMMIT}/profiler/image_classification/profiles/alexnet/graph.txt"]


def test_url_is_pinned_and_uses_the_model_domain(serve, alexnet_text, tmp_path):
    urls = serve(alexnet_text.encode())
    download_pipedream(tmp_path, ["gnmt", "vgg16"])
    assert len(urls) == 2 and all(f"/pipedream/{PIPEDREAM_COMMIT}/" in url for url in urls)
    assert "/profiler/translation/profiles/gnmt/graph.txt" in urls[0]
    assert "/profiler/image_classification/profiles/vgg16/graph.txt" in urls[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gnmt.txt", "vgg16.txt"]


def test_other_commit(serve, alexnet_text, tmp_path):
    urls = serve(alexnet_text.encode())
    download_pipedream(tmp_path, ["resnet18"], commit="0123abc")
    assert "/pipedream/0123abc/profiler/image_classification/profiles/resnet18/" in urls[0]
    assert PIPEDREAM_COMMIT not in urls[0]


def test_default_fetches_all_fourteen(serve, alexnet_text, tmp_path):
    urls = serve(alexnet_text.encode())
    paths = download_pipedream(tmp_path)
    assert len(PIPEDREAM_MODELS) == 14
    assert sorted(p.name for p in paths) == sorted(f"{m}.txt" for m in PIPEDREAM_MODELS)
    for model, url in zip(PIPEDREAM_MODELS, urls):
        assert url.endswith(f"/{PIPEDREAM_MODELS[model]}/profiles/{model}/graph.txt")
    assert sum("/translation/" in url for url in urls) == 2  # gnmt and gnmt_large


@pytest.mark.parametrize("body", [b"<html><body>404: Not Found</body></html>", b"",
                                  b"node1 -- Conv2d -- forward_compute_time=abc"])
def test_garbage_raises_and_leaves_no_file(serve, body, tmp_path):
    serve(body)
    with pytest.raises(InputError):
        download_pipedream(tmp_path, ["alexnet"])
    assert list(tmp_path.iterdir()) == []


def test_garbage_does_not_replace_a_good_file(serve, alexnet_text, tmp_path):
    serve(alexnet_text.encode())
    download_pipedream(tmp_path, ["alexnet"])
    serve(b"Service Unavailable")
    with pytest.raises(InputError):
        download_pipedream(tmp_path, ["alexnet"])
    assert (tmp_path / "alexnet.txt").read_text() == alexnet_text
    assert [p.name for p in tmp_path.iterdir()] == ["alexnet.txt"]


def test_unknown_model(serve, tmp_path):
    urls = serve(b"unused")
    with pytest.raises(InputError, match="unknown PipeDream model 'lenet'"):
        download_pipedream(tmp_path, ["lenet"])
    assert urls == [] and list(tmp_path.iterdir()) == []


# ----- the command -----------------------------------------------------------------------------------
def test_command_downloads(serve, alexnet_text, tmp_path, capsys):
    urls = serve(alexnet_text.encode())
    assert pacopt_main(["download-pipedream", "alexnet", "gnmt", "--dest", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "alexnet.txt"),
                                               str(tmp_path / "gnmt.txt")]
    assert len(urls) == 2


@pytest.mark.parametrize("failure, fragment", [
    (urllib.error.URLError("no route to host"), "download failed"),
    (None, "unknown PipeDream model 'lenet'"),
])
def test_command_failures_exit_2(serve, failure, fragment, tmp_path, capsys):
    serve(failure if failure is not None else b"unused")
    models = ["alexnet"] if failure is not None else ["lenet"]
    assert pacopt_main(["download-pipedream", *models, "--dest", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert list(tmp_path.iterdir()) == []


def test_command_default_is_the_cache_the_finder_reads(serve, alexnet_text, tmp_path,
                                                       monkeypatch, capsys):
    serve(alexnet_text.encode())
    monkeypatch.delenv("PACOPT_PIPEDREAM_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PACOPT_CACHE_DIR", str(tmp_path / "cache"))
    assert datasets.pipedream_dirs() == [tmp_path / "cache" / "pipedream",
                                         tmp_path / "home" / ".cache" / "pacopt" / "pipedream"]
    with pytest.raises(InputError, match="run `pacopt download-pipedream alexnet`"):
        datasets.find_pipedream("alexnet")
    assert pacopt_main(["download-pipedream", "alexnet"]) == 0
    assert capsys.readouterr().out.split() == [
        str(tmp_path / "cache" / "pipedream" / "alexnet.txt")]
    assert datasets.find_pipedream("alexnet") == tmp_path / "cache" / "pipedream" / "alexnet.txt"
    monkeypatch.setenv("PACOPT_PIPEDREAM_DIR", str(tmp_path / "own"))
    assert datasets.pipedream_dirs()[0] == tmp_path / "own"


# ----- the ElasticFlow / ITP traces ---------------------------------------------------------------
GENERATED = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"
RAW = "job_id,submission_time,duration,num_gpu\n"


def archive(files: dict[str, str]) -> bytes:
    """A .tar.gz holding ``files`` (name -> text) at its top level, as the release's are."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def release(monkeypatch):
    """Small stand-ins for the release's two archives, pinned in their place (size and SHA-256);
    ``release.serve()`` serves them (or ``body`` for every URL) and returns the requested URLs."""
    names = [n for n in datasets.TRACES if n != "195job"]
    generated = {f"{n}.csv": GENERATED + f"{n}-a,10,5,bert,900,64,1,100\n" for n in names}
    generated["195job.csv"] = GENERATED + "t-a,10,5,bert,900,64,1,100\n"
    raw = {f"{n}.csv": RAW + f"{n}-a,10,100,1\n" for n in names}
    bodies = {"elasticflow-traces.tar.gz": archive({**generated, "LICENSE": "MIT Licence\n"}),
              "raw-traces.tar.gz": archive({**raw, "LICENSE": "MIT Licence\n"})}
    for sub, body in (("generated", bodies["elasticflow-traces.tar.gz"]),
                      ("raw", bodies["raw-traces.tar.gz"])):
        monkeypatch.setitem(datasets.TRACE_ARCHIVES, sub, datasets.TraceArchive(
            datasets.TRACE_ARCHIVES[sub].name, len(body), hashlib.sha256(body).hexdigest()))

    class Release:
        files = {"generated": generated, "raw": raw}

        @staticmethod
        def serve(body=None):
            urls: list[str] = []

            def fake_urlopen(url, *args, **kwargs):
                urls.append(url)
                if isinstance(body, Exception):
                    raise body
                return FakeResponse(bodies[url.rsplit("/", 1)[1]] if body is None else body)

            monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
            return urls

    return Release()


def test_the_pinned_archives_are_the_release_at_its_commit():
    assert datasets.TRACES_COMMIT == "277ed24d0e908c31a1c98145819e2e3853d8ac00"
    assert {sub: (a.name, a.size) for sub, a in datasets.TRACE_ARCHIVES.items()} == {
        "generated": ("elasticflow-traces.tar.gz", 2599482),
        "raw": ("raw-traces.tar.gz", 1943846)}
    assert sum(n for name, n in datasets.TRACES.items() if name != "195job") == 69351


def test_the_release_table_matches_the_local_copy(trace_dir):
    """The jobs of :data:`TRACES` are those of the files (the copy has eight of the ten)."""
    for path in sorted((trace_dir / "generated").glob("*.csv")):
        with path.open() as handle:
            assert sum(1 for _ in csv.reader(handle)) - 1 == datasets.TRACES[path.stem], path
    assert sorted(p.name for p in (trace_dir / "raw").glob("*.csv")) == \
        sorted(p.name for p in (trace_dir / "generated").glob("cluster*.csv"))


def test_download_traces_writes_both_folders_and_the_licence(release, tmp_path):
    urls = release.serve()
    dest = tmp_path / "new" / "traces"
    paths = datasets.download_traces(dest)
    assert len(paths) == 2 * 10 + 1 + 1 and paths[-1] == dest / "LICENSE"
    for sub, files in release.files.items():
        for name, text in files.items():
            assert (dest / sub / name).read_text() == text
    assert (dest / "LICENSE").read_text() == "MIT Licence\n"
    assert urls == [f"https://raw.githubusercontent.com/microsoft/elasticflow-traces/"
                    f"{datasets.TRACES_COMMIT}/data/{a}"
                    for a in ("elasticflow-traces.tar.gz", "raw-traces.tar.gz")]
    rows = read_trace(dest / "generated" / "cluster04.csv", "elasticflow", {"bert": "bert"})
    assert [r.job_id for r in rows] == ["cluster04-a"]


def test_download_traces_keeps_only_the_traces_named(release, tmp_path):
    urls = release.serve()
    paths = datasets.download_traces(tmp_path, ["195job"])
    assert paths == [tmp_path / "generated" / "195job.csv", tmp_path / "LICENSE"]
    assert len(urls) == 1 and urls[0].endswith("/elasticflow-traces.tar.gz")  # raw has no 195job
    paths = datasets.download_traces(tmp_path, ["cluster07", "cluster07"])
    assert sorted(p.relative_to(tmp_path).as_posix() for p in paths) == [
        "LICENSE", "generated/cluster07.csv", "raw/cluster07.csv"]


@pytest.mark.parametrize("body", [b"<html>404: Not Found</html>", b"",
                                  archive({"cluster01.csv": RAW})])
def test_a_download_that_is_not_the_release_writes_nothing(release, body, tmp_path):
    release.serve()
    datasets.download_traces(tmp_path, ["cluster01"])
    good = (tmp_path / "raw" / "cluster01.csv").read_text()
    release.serve(body)
    with pytest.raises(InputError, match="not the release's archive"):
        datasets.download_traces(tmp_path, ["cluster01"])
    assert (tmp_path / "raw" / "cluster01.csv").read_text() == good
    assert sorted(p.name for p in tmp_path.rglob("*")) == [
        "LICENSE", "cluster01.csv", "cluster01.csv", "generated", "raw"]


def test_unknown_trace(release, tmp_path):
    urls = release.serve()
    with pytest.raises(InputError, match="unknown trace 'cluster11'; known: cluster01, "):
        datasets.download_traces(tmp_path, ["cluster01", "cluster11"])
    assert urls == [] and list(tmp_path.iterdir()) == []


def test_traces_command_downloads_into_the_cache_and_the_finder_finds_them(
        release, tmp_path, monkeypatch, capsys):
    release.serve()
    monkeypatch.delenv("PACOPT_TRACES_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PACOPT_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(InputError, match="pacopt download-traces"):
        datasets.find_traces()
    assert pacopt_main(["download-traces", "cluster02"]) == 0
    cache = tmp_path / "cache" / "traces" / "elasticflow"
    assert capsys.readouterr().out.split() == [str(cache / "generated" / "cluster02.csv"),
                                               str(cache / "raw" / "cluster02.csv"),
                                               str(cache / "LICENSE")]
    assert datasets.find_traces() == cache
    assert datasets.find_trace("cluster02") == cache / "generated" / "cluster02.csv"
    assert pacopt_main(["download-traces", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"traces folder: {cache}" and len(lines) == 1 + len(datasets.TRACES)
    assert lines[2].split() == ["cluster02", "5778", "jobs", "generated,", "raw", "here:",
                                "generated,", "raw"]
    assert lines[1].endswith("here: -")


@pytest.mark.parametrize("failure, fragment", [
    (urllib.error.URLError("no route to host"), "download failed (is there internet access?)"),
    (http.client.IncompleteRead(b"partial"), "download failed"),
])
def test_traces_command_offline_is_one_line_exit_2_and_no_folder(release, failure, fragment,
                                                                 tmp_path, capsys):
    release.serve(failure)
    dest = tmp_path / "a" / "traces"
    assert pacopt_main(["download-traces", "--dest", str(dest)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert list(tmp_path.iterdir()) == []
