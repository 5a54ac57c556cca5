"""Writes lose nothing: a result never replaces its own instance or a non-regular file, the
temporary file is unique and beside the target, and a failed write keeps the old file."""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path

import pytest

from pacopt.cli import solve_main
from pacopt.infra.errors import InputError
from pacopt.infra.safe_write import write_atomically

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "examples" / "bundled.json"


def _instance(tmp_path: Path) -> Path:
    data = json.loads(BUNDLED.read_text())
    for spec in data["graphs"].values():
        if "file" in spec:
            spec["file"] = str(ROOT / "examples" / spec["file"])
    path = tmp_path / "i.json"
    path.write_text(json.dumps(data))
    return path


def test_a_result_never_replaces_its_instance(tmp_path, capsys):
    instance = _instance(tmp_path)
    before = instance.read_text()
    assert solve_main([str(instance), "--out", str(instance), "--quiet"]) == 2
    assert "is the input" in capsys.readouterr().err
    assert instance.read_text() == before
    link = tmp_path / "link.json"
    link.symlink_to(instance)
    assert solve_main([str(instance), "--out", str(link), "--quiet"]) == 2
    assert instance.read_text() == before


def test_a_result_never_replaces_a_device(tmp_path, capsys):
    assert solve_main([str(_instance(tmp_path)), "--out", os.devnull, "--quiet"]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert Path(os.devnull).is_char_device()


def test_concurrent_writes_use_their_own_temporary_files(tmp_path):
    target = tmp_path / "r.json"
    errors = []

    def write(i: int) -> None:
        try:
            for _ in range(20):
                write_atomically(target, json.dumps({"writer": i}) * 200)
        except Exception as err:  # noqa: BLE001 - any failure is the test's finding
            errors.append(err)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert json.loads(target.read_text()[: len(target.read_text()) // 200])["writer"] in range(4)
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_full_disk_keeps_the_old_file_and_leaves_nothing(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old")

    def full(path: Path) -> None:
        path.write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(InputError, match="no space left"):
        write_atomically(target, full)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
