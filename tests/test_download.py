"""``download_pipedream`` without the network: ``urllib.request.urlopen`` is replaced by a fake
that serves the shared PipeDream profile (or garbage) and records what was asked for."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from pacopt.cli import pacopt_main
from pacopt.infra.errors import InputError
from pacopt.model.pipedream import (
    PIPEDREAM_COMMIT,
    PIPEDREAM_MODELS,
    download_pipedream,
    read_pipedream,
)


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
