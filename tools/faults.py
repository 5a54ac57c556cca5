"""The fault campaign: every fault ``docs/faults.md`` lists, and its neighbours, tried through
the real commands (each a process of its own), each outcome classified:

- ``clean``: exit 2 with one ``error:`` line (or exit 1 with the validation problems listed, for
  a result the validator refuses), no traceback, no file left half-written;
- ``correct``: the command did its work (exit 0, or 130 for Ctrl-C) and what it kept is right
  (the result validates, equals the clean run, the run folder resumes...);
- ``traceback``: a Python traceback on stderr, or a death by a signal;
- ``lost/wrong``: a file lost or replaced, or a wrong result reported as right;
- ``hang``: not finished within the scenario's limit (killed).

    python -m tools faults [--only SUBSTRING] [--json OUT]     # or: python tools/faults.py

It needs the PipeDream profiles (found as the benchmarks find them: :mod:`benchmarks.common`)
and, for the full-disk and read-only cases, root (a small tmpfs is mounted and unmounted).
It checks behaviour rather than measuring it, so it is a tool, not a benchmark. It takes about 15 minutes on 2 cores.
``docs/faults.md`` holds the table of the last run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

from pacopt.model.graph_sources import example_instance_data

if not __package__:  # run as a file: the repository's root importable
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import REPOSITORY, pipedream_dir  # noqa: E402
from benchmarks.processes import PACOPT, PY, SOLVE, Run, Scenario, has_traceback  # noqa: E402
from benchmarks.processes import run as run_in  # noqa: E402

ROOT = REPOSITORY
EXAMPLES = ROOT / "examples"
AGENT = ROOT / "pacopt" / "learned" / "checkpoints" / "general-ddls.zip"
HETERO = EXAMPLES / "hetero" / "rl_policy.zip"
TYPES = EXAMPLES / "hetero" / "types.json"
OUTCOMES = ("clean", "correct", "traceback", "lost/wrong", "hang")


# ----- checks ---------------------------------------------------------------------------------------
_tb = has_traceback


def clean(*needles, code: int = 2):
    """Exit ``code``, one ``error:`` line (warnings aside) holding ``needles``."""
    def check(r: Run, s: Scenario) -> str:
        lines = [x for x in r.err.strip().splitlines() if x.startswith("error: ")]
        assert r.code == code, f"exit {r.code}: {r.err[-300:]}"
        assert len(lines) == 1, r.err[-300:]
        for needle in needles:
            assert needle in lines[0], (needle, lines[0])
        return "clean"
    return check


def all_of(*checks):
    def check(r, s):
        outcome = None
        for each in checks:
            outcome = each(r, s) or outcome
        return outcome
    return check


def unchanged(path: Path, content: bytes | None = None):
    saved = {}

    def setup(s):
        saved["bytes"] = content if content is not None else path.read_bytes()

    def check(r, s):
        if path.exists() and path.read_bytes() != saved["bytes"]:
            raise AssertionError(f"{path} changed")
    return setup, check


def result_valid(path: Path, same_as: Path | None = None, interrupted: bool | None = None,
                 code: int = 0):
    def check(r: Run, s: Scenario) -> str:
        assert r.code == code, f"exit {r.code}: {r.err[-300:]}"
        data = json.loads(path.read_text())
        assert data["validated"], data["metrics"].get("validation_problems")
        if interrupted is not None:
            assert data["interrupted"] is interrupted
        if same_as is not None:
            assert data["jobs"] == json.loads(same_as.read_text())["jobs"], "result differs"
        return "correct"
    return check


def no_temp(folder: Path):
    def check(r, s):
        left = [p.name for p in folder.rglob("*.tmp")]
        assert not left, f"temporary files left: {left}"
    return check


def interrupted(limit: float, code: int = 130, then=None):
    """Exit 130 within ``limit`` seconds of the first SIGINT (``then`` checks what was kept)."""
    def check(r: Run, s: Scenario) -> str:
        assert r.code == code, f"exit {r.code}: {r.err[-300:]}"
        assert r.seconds < limit, f"stopped after {r.seconds:.1f} s"
        if then is not None:
            then(r, s)
        return "correct"
    return check


def exit_code(code: int, needle: str | None = None):
    def check(r: Run, s: Scenario) -> str:
        assert r.code == code, f"exit {r.code}: {r.err[-300:]}"
        if needle:
            assert needle in r.err + r.out, (needle, r.err[-300:])
        return "correct"
    return check


def classify(r: Run, s: Scenario) -> tuple[str, str]:
    if r.hung:
        return "hang", f"killed after {s.timeout:.0f} s"
    if _tb(r):
        return "traceback", r.err.strip().splitlines()[-1][:160] if r.err.strip() else str(r.code)
    try:
        return s.check(r, s) or "correct", f"{r.seconds:.1f} s"
    except (AssertionError, OSError, ValueError, KeyError) as err:
        return "lost/wrong", str(err)[:200]


# ----- the scenarios ------------------------------------------------------------------------------------
WORK = Path(tempfile.mkdtemp(prefix="pacopt-faults-"))
PIPEDREAM = pipedream_dir()


def run(s: Scenario) -> Run:
    """``s`` run in the campaign's scratch folder (:func:`benchmarks.processes.run`)."""
    return run_in(s, WORK)


def bundled(name: str, num_jobs: int) -> Path:
    data = example_instance_data("bundled", num_jobs)
    path = WORK / name
    path.write_text(json.dumps(data))
    return path


def paper(name: str, num_jobs: int, horizon: bool = True) -> Path:
    data = example_instance_data("paper_workload", num_jobs, PIPEDREAM)
    if not horizon:
        data.pop("horizon_ms", None)
    path = WORK / name
    path.write_text(json.dumps(data))
    return path


def can_mount() -> bool:
    probe = WORK / "mnt-probe"
    probe.mkdir()
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
                        capture_output=True).returncode == 0
    if ok:
        subprocess.run(["umount", str(probe)], check=False)
    return ok


def tmpfs(name: str, size: str, read_only: bool = False) -> Path:
    path = WORK / name
    path.mkdir(exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
    MOUNTS.append(path)
    return path


MOUNTS: list[Path] = []


def zip_with(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def bad_checkpoints() -> dict[str, Path]:
    folder = WORK / "ckpt"
    folder.mkdir(exist_ok=True)
    agent = AGENT.read_bytes()
    with zipfile.ZipFile(AGENT) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    out = {"truncated": folder / "truncated.zip", "text": folder / "text.zip",
           "empty": folder / "empty.zip", "json": EXAMPLES / "bundled.json", "folder": folder,
           "missing-members": zip_with(folder / "missing.zip", {"data": b"{}"}),
           "sb3-1.x": zip_with(folder / "version.zip", {**members,
                                                        "_stable_baselines3_version": b"1.8.0"}),
           "crc": folder / "crc.zip", "data-not-object": zip_with(folder / "nodata.zip", {
               "data": b"[1]", "policy.pth": b"x"})}
    out["truncated"].write_bytes(agent[: len(agent) // 3])
    out["text"].write_text("not a zip")
    out["empty"].write_bytes(b"")
    raw = bytearray(zip_with(folder / "stored.zip", members).read_bytes())
    raw[raw.find(b'"policy_class"') + 3] ^= 1
    out["crc"].write_bytes(bytes(raw))
    return out


def run_folder(name: str, mutate=None, latest: bytes | None = None) -> Path:
    from dataclasses import asdict

    from pacopt.learned.train_config import TrainConfig

    folder = WORK / name
    folder.mkdir()
    (folder / "latest.zip").write_bytes(AGENT.read_bytes() if latest is None else latest)
    record = {"config": json.loads(json.dumps(asdict(TrainConfig(distributions=("A",))))),
              "seconds": 1.0, "best_score": 0.3, "steps": 0}
    text = json.dumps(record)
    if mutate is not None:
        text = mutate(record, text)
    if text is None:
        (folder / "run.json").mkdir()
    else:
        (folder / "run.json").write_text(text) if isinstance(text, str) else \
            (folder / "run.json").write_bytes(text)
    return folder


def scenarios(mount: bool) -> list[Scenario]:
    out: list[Scenario] = []
    add = out.append
    b30, b300 = bundled("b30.json", 30), bundled("b300.json", 300)
    p200, p1001 = paper("p200.json", 200), paper("p1001.json", 1001)
    clean_result = WORK / "b300.clean.json"
    cache = WORK / "cache"  # the campaign's own timing cache

    # --- writes ----------------------------------------------------------------------------------
    setup, same = unchanged(b30)
    add(Scenario("solve --out its own instance", "writes", [*SOLVE, str(b30), "--out", str(b30)],
                 all_of(clean("is the input"), same), setup))
    link = WORK / "link.json"
    link.symlink_to(b30)
    add(Scenario("solve --out a symlink to its instance", "writes",
                 [*SOLVE, str(b30), "--out", str(link)], all_of(clean("is the input"), same)))
    add(Scenario("solve --out /dev/null (root)", "writes", [*SOLVE, str(b30), "--out", os.devnull],
                 all_of(clean("not a regular file"),
                        lambda r, s: None if Path(os.devnull).is_char_device() else
                        (_ for _ in ()).throw(AssertionError("/dev/null replaced")))))
    add(Scenario("solve --out /dev/full", "writes", [*SOLVE, str(b30), "--out", "/dev/full"],
                 clean("not a regular file")))
    add(Scenario("solve --out a folder", "writes", [*SOLVE, str(b30), "--out", str(WORK)],
                 clean("is a folder")))
    add(Scenario("solve --out in a missing folder", "writes",
                 [*SOLVE, str(b30), "--out", str(WORK / "nope" / "r.json")], clean("does not exist")))
    shared = WORK / "shared.json"
    add(Scenario("4 concurrent solves --out one file", "writes",
                 [*SOLVE, str(b300), "--out", str(shared), "--quiet", "--seed", "1"],
                 lambda r, s: (json.loads(shared.read_text())["validated"] and
                               r.code == [0, 0, 0, 0] and not list(WORK.glob(".shared*.tmp"))
                               and "correct") or (_ for _ in ()).throw(AssertionError(r.code)),
                 concurrent=4))
    if mount:
        full = tmpfs("full", "40k")
        add(Scenario("solve on a full disk", "writes",
                     [*SOLVE, str(b300), "--out", str(full / "r.json")],
                     all_of(clean("no space left"), no_temp(full),
                            lambda r, s: None if not (full / "r.json").exists() else
                            (_ for _ in ()).throw(AssertionError("half a result")))))
        study = WORK / "small.yaml"
        study.write_text(json.dumps({"name": "small", "grids": [{"instances": [str(b300)],
                                                                 "methods": ["min-feasible",
                                                                             "para-max",
                                                                             "random"]}]}))
        add(Scenario("study on a full disk", "writes",
                     [*PACOPT, "study", str(study), "--out", str(full / "s"), "--workers", "1"],
                     all_of(clean("no space left"), no_temp(full))))
        ro = tmpfs("ro", "64k", read_only=True)
        add(Scenario("study --out on a read-only folder", "writes",
                     [*PACOPT, "study", str(study), "--out", str(ro / "s")],
                     clean("Read-only file system")))
        add(Scenario("train --out on a read-only folder", "writes",
                     [*PACOPT, "train", "--out", str(ro / "run")], clean("cannot write")))
        add(Scenario("solve --out on a read-only folder", "writes",
                     [*SOLVE, str(b30), "--out", str(ro / "r.json")], clean("not writable")))
        add(Scenario("timing cache on a read-only folder", "caches",
                     [*SOLVE, str(b300), "--out", str(WORK / "ro-cache.json"), "--seed", "0"],
                     result_valid(WORK / "ro-cache.json"), env={"PACOPT_CACHE_DIR": str(ro)}))
    afile = WORK / "afile"
    afile.write_text("keep")
    setup_a, same_a = unchanged(afile)
    add(Scenario("train --out an existing file", "writes", [*PACOPT, "train", "--out", str(afile)],
                 all_of(clean("not a folder"), same_a), setup_a))
    add(Scenario("study --out an existing file", "writes",
                 [*PACOPT, "study", str(EXAMPLES.parent / "studies" / "load.yaml"), "--out",
                  str(afile)], all_of(clean("not a folder"), same_a)))

    # --- caches --------------------------------------------------------------------------------------
    env = {"PACOPT_CACHE_DIR": str(cache)}
    add(Scenario("clean run (reference)", "caches",
                 [*SOLVE, str(b300), "--out", str(clean_result), "--seed", "0", "--quiet"],
                 result_valid(clean_result), env=env))

    def poison(kind):
        def setup(s):
            from pacopt.model.timing_cache import _checksum
            for path in (cache / "timings").glob("*.jsonl"):
                if kind == "random":
                    path.write_bytes(os.urandom(3000))
                    continue
                if kind == "cut":
                    path.write_bytes(path.read_bytes()[:-25])
                    continue
                lines = []
                for line in path.read_text().splitlines():
                    entry = json.loads(line)
                    entry["step_ms"] *= 0.1
                    if kind == "resigned":
                        entry["sum"] = _checksum(entry["from"], entry["key"], entry["step_ms"],
                                                 entry["exposed_ms"])
                    lines.append(json.dumps(entry) + "\n")
                path.write_text("".join(lines))
        return setup

    def fresh_cache(s):
        shutil.rmtree(cache, ignore_errors=True)
        subprocess.run([*SOLVE, str(b300), "--out", str(WORK / "warm.json"), "--quiet"],
                       env={**os.environ, **env}, check=True)

    for kind in ("scaled", "random", "cut"):
        result = WORK / f"cache-{kind}.json"
        add(Scenario(f"timing cache {kind}", "caches",
                     [*SOLVE, str(b300), "--out", str(result), "--seed", "0", "--quiet"],
                     all_of(result_valid(result, same_as=clean_result),
                            exit_code(0, "warning: timing cache")),
                     lambda s, k=kind: (fresh_cache(s), poison(k)(s)), env=env))
    result = WORK / "cache-resigned.json"
    add(Scenario("timing cache scaled, checksums re-signed", "caches",
                 [*SOLVE, str(b300), "--out", str(result), "--seed", "0", "--quiet"],
                 lambda r, s, result=result: (r.code == 1 and not json.loads(
                     result.read_text())["validated"] and "clean") or (_ for _ in ()).throw(
                     AssertionError("a poisoned run passed")),
                 lambda s: (fresh_cache(s), poison("resigned")(s)), env=env))

    def special(kind):
        def setup(s):
            fresh_cache(s)
            victim = min((cache / "timings").glob("*.jsonl"))
            victim.unlink()
            os.mkfifo(victim) if kind == "fifo" else victim.mkdir()
        return setup

    for kind in ("fifo", "folder"):
        result = WORK / f"cache-{kind}.json"
        add(Scenario(f"timing cache file is a {kind}", "caches",
                     [*SOLVE, str(b300), "--out", str(result), "--seed", "0", "--quiet"],
                     result_valid(result, same_as=clean_result), special(kind), env=env,
                     timeout=60))
    result = WORK / "cache-file.json"
    add(Scenario("PACOPT_CACHE_DIR is a file", "caches",
                 [*SOLVE, str(b300), "--out", str(result), "--seed", "0", "--quiet"],
                 result_valid(result, same_as=clean_result), env={"PACOPT_CACHE_DIR": str(afile)}))

    # --- checkpoints, run folders, type files, study files ------------------------------------------------
    for kind, path in bad_checkpoints().items():
        add(Scenario(f"solve --checkpoint {kind}", "files",
                     [*SOLVE, str(b30), "--method", "pac-ml", "--checkpoint", str(path), "--out",
                      str(WORK / "ck.json")], clean("checkpoint")))
        add(Scenario(f"train --init {kind}", "files",
                     [*PACOPT, "train", "--init", str(path), "--out", str(WORK / f"init-{kind}")],
                     all_of(clean("--init checkpoint"), lambda r, s, k=kind: None if not (
                         WORK / f"init-{k}").exists() else (_ for _ in ()).throw(
                         AssertionError("a run folder was left")))))
        add(Scenario(f"hetero --method rl --checkpoint {kind}", "files",
                     [*PACOPT, "hetero", "cnn", "--types", str(TYPES), "--throughput", "10",
                      "--method", "rl", "--checkpoint", str(path)], clean("RL checkpoint")))
    add(Scenario("solve --checkpoint the hetero scheduler", "files",
                 [*SOLVE, str(b30), "--method", "pac-ml", "--checkpoint", str(HETERO), "--out",
                  str(WORK / "ck.json")], clean("not a pacopt agent checkpoint")))
    add(Scenario("hetero --checkpoint the learned agent", "files",
                 [*PACOPT, "hetero", "cnn", "--types", str(TYPES), "--throughput", "10",
                  "--method", "rl", "--checkpoint", str(AGENT)], clean("not a hetero scheduler")))
    add(Scenario("train --init the hetero scheduler", "files",
                 [*PACOPT, "train", "--init", str(HETERO), "--out", str(WORK / "init-h")],
                 clean("not a pacopt agent checkpoint")))

    agent = AGENT.read_bytes()
    folders = {
        "run.json bad JSON": {"mutate": lambda r, t: "{x"},
        "run.json truncated": {"mutate": lambda r, t: t[: len(t) // 2]},
        "run.json {}": {"mutate": lambda r, t: "{}"},
        "run.json a list": {"mutate": lambda r, t: "[1]"},
        "run.json binary": {"mutate": lambda r, t: os.urandom(200)},
        "run.json a folder": {"mutate": lambda r, t: None},
        "run.json wrong type": {"mutate": lambda r, t: json.dumps(
            {**r, "config": {**r["config"], "n_steps": "x"}})},
        "run.json unknown setting": {"mutate": lambda r, t: json.dumps(
            {**r, "config": {**r["config"], "colour": 1}})},
        "run.json negative seconds": {"mutate": lambda r, t: json.dumps({**r, "seconds": -5})},
        "latest.zip truncated": {"latest": agent[:2000]},
        "latest.zip the hetero scheduler": {"latest": HETERO.read_bytes()},
        "latest.zip empty": {"latest": b""},
    }
    for label, kwargs in folders.items():
        name = "rf-" + label.replace(" ", "-").replace(".", "").replace("{}", "empty")
        add(Scenario(f"train --resume, {label}", "files",
                     [*PACOPT, "train", "--resume", "--out", str(WORK / name)], clean(),
                     lambda s, n=name, k=kwargs: run_folder(n, **k)))
    add(Scenario("train --resume with another --preset", "files",
                 [*PACOPT, "train", "--resume", "--out", str(WORK / "rf-preset"), "--preset",
                  "physical"], clean("differs"), lambda s: run_folder("rf-preset")))
    add(Scenario("train --resume, no run there", "files",
                 [*PACOPT, "train", "--resume", "--out", str(WORK / "nothing")],
                 clean("no checkpoint to resume")))
    deep = WORK / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    binary = WORK / "binary.json"
    binary.write_bytes(b"\xff\xfe" + os.urandom(200))
    fifo = WORK / "fifo.json"
    os.mkfifo(fifo)
    for label, path in (("nested 100,000 deep", deep), ("binary", binary),
                        ("a folder", WORK), ("missing", WORK / "missing.json"),
                        ("an instance", b30), ("a FIFO", fifo)):
        add(Scenario(f"hetero --types {label}", "files",
                     [*PACOPT, "hetero", "cnn", "--types", str(path), "--throughput", "10"],
                     clean(), timeout=60))
    for label, path in (("nested 100,000 deep", deep), ("binary", binary), ("a FIFO", fifo)):
        add(Scenario(f"solve an instance {label}", "files", [*SOLVE, str(path)], clean(),
                     timeout=60))
    bomb = WORK / "bomb.yaml"
    bomb.write_text("\n".join(['a: &a ["x","x","x","x","x","x","x","x","x"]']
                              + [f"{chr(c)}: &{chr(c)} [" + ",".join([f"*{chr(c - 1)}"] * 9) + "]"
                                 for c in range(ord("b"), ord("j"))]
                              + ["name: bomb", "grids: *i"]))
    selfref = WORK / "selfref.yaml"
    selfref.write_text("name: x\ngrids: &g [*g]\n")
    deep_yaml = WORK / "deep.yaml"
    deep_yaml.write_text("name: x\ngrids: " + "[" * 5000 + "]" * 5000 + "\n")
    fixed99 = WORK / "fixed99.yaml"
    fixed99.write_text(json.dumps({"name": "f", "grids": [{"instances": [str(b30)],
                                                           "methods": ["fixed:99"]}]}))
    study_fifo = WORK / "fifo.yaml"
    os.mkfifo(study_fifo)
    for label, path, needle in (("a YAML alias bomb", bomb, "expands to more than"),
                                ("a self-referring alias", selfref, "refers to itself"),
                                ("nested 5,000 deep", deep_yaml, "nested too deeply"),
                                ("with fixed:99", fixed99, "max_partitions_per_op"),
                                ("a FIFO", study_fifo, "not a regular file")):
        add(Scenario(f"study file {label}", "files",
                     [*PACOPT, "study", str(path), "--out", str(WORK / "study-out")],
                     all_of(clean(needle), lambda r, s: None if not (WORK / "study-out").exists()
                            else (_ for _ in ()).throw(AssertionError("output created"))),
                     timeout=60))

    # --- Ctrl-C ----------------------------------------------------------------------------------------
    def kept(path: Path, valid: bool = True):
        def check(r, s):
            data = json.loads(path.read_text())
            assert data["interrupted"] and (data["validated"] or not valid)
        return check

    big = bundled("b100k.json", 100_000)
    p5000 = paper("p5000.json", 5000, horizon=False)
    # (the online stop is immediate; keeping the result, rejecting the jobs left, validating
    # and writing 100,000 records, takes about 1 s per 10,000 jobs)
    for method, instance, after, limit in (("min-feasible", big, 4, 15), ("cpsat", p200, 7, 5),
                                            ("milp", p200, 7, 5), ("cpsat", p1001, 12, 6),
                                            ("milp", p1001, 12, 6), ("bound", p1001, 12, 6),
                                            ("pac-ml", p5000, 8, 5), ("lp-round", p1001, 6, 8),
                                            ("lp-online", p5000, 8, 8)):
        result = WORK / f"int-{method}-{instance.stem}.json"
        add(Scenario(f"Ctrl-C {method} on {instance.stem}", "ctrl-c",
                     [*SOLVE, str(instance), "--method", method, "--time-limit", "300", "--out",
                      str(result)], interrupted(limit, then=kept(result)), interrupt=(after,),
                     timeout=400))
    for gap in (0.05, 0.5):
        result = WORK / f"int2-{gap}.json"
        add(Scenario(f"Ctrl-C twice ({gap} s apart), cpsat on p200", "ctrl-c",
                     [*SOLVE, str(p200), "--method", "cpsat", "--out", str(result)],
                     interrupted(5, then=lambda r, s, p=result: None if not p.exists() else
                                 kept(p)(r, s)), interrupt=(7, 7 + gap)))
    add(Scenario("Ctrl-C five times, bound on p1001", "ctrl-c",
                 [*SOLVE, str(p1001), "--method", "bound", "--out", str(WORK / "int5.json")],
                 interrupted(5), interrupt=(12, 12.1, 12.2, 12.3, 12.4)))
    for method, after in (("cpsat", 7), ("milp", 4)):
        add(Scenario(f"Ctrl-C hetero {method}", "ctrl-c",
                     [*PACOPT, "hetero", "resnet18", "--types", str(TYPES), "--throughput", "50",
                      "--method", method, "--time-limit", "120"],
                     lambda r, s: "correct" if r.code in (130, 0) and r.seconds < 5 else
                     (_ for _ in ()).throw(AssertionError(f"exit {r.code}")),
                     interrupt=(after,)))
    for goal in (["--budget", "12"], ["--deadline-ms", "8000"]):
        add(Scenario(f"Ctrl-C job cpsat {goal[0]}", "ctrl-c",
                     [*PACOPT, "job", "nasnetamobile", *goal, "--backend", "cpsat",
                      "--time-limit", "60"],
                     interrupted(8, then=lambda r, s: None if "interrupted: the best plan" in r.out
                                 else (_ for _ in ()).throw(AssertionError("no plan"))),
                     interrupt=(12,)))
    add(Scenario("Ctrl-C twice, hetero cpsat", "ctrl-c",
                 [*PACOPT, "hetero", "resnet18", "--types", str(TYPES), "--throughput", "50",
                  "--method", "cpsat", "--time-limit", "120"], interrupted(5),
                 interrupt=(7, 7.05)))

    def resumable(folder: Path):
        def check(r, s):
            assert "leaked" not in r.err, "a worker left a warning"
            if folder.exists():
                names = {p.name for p in folder.iterdir()}
                assert {"latest.zip", "run.json"} <= names, f"not resumable: {names}"
        return check

    for label, marker, after in (("early", None, (4,)), ("during the warm start", "warm start:",
                                                           (1,)),
                                 ("during the warm start, twice", "warm start:", (1, 1.1)),
                                 ("during PPO", "epoch 6/6", (25,))):
        folder = WORK / f"train-{label.replace(' ', '-').replace(',', '')}"
        add(Scenario(f"Ctrl-C train {label}", "ctrl-c",
                     [*PACOPT, "train", "--dist", "A", "--minutes", "10", "--envs", "2",
                      "--warm-episodes", "2", "--dagger-rounds", "0", "--out", str(folder)],
                     interrupted(15, then=resumable(folder)), interrupt=after, marker=marker,
                     timeout=300))
    study = WORK / "ctrlc.yaml"
    study.write_text(json.dumps({"name": "c", "grids": [{"instances": [str(p200)], "methods": [
        "min-feasible", {"name": "cpsat", "time_limit": 120, "threads": 1},
        {"name": "milp", "time_limit": 120, "threads": 1}]}]}))
    for presses in ((12,), (12, 12.05)):
        out_dir = WORK / f"study-int-{len(presses)}"
        add(Scenario(f"Ctrl-C study ({len(presses)} press{'es' if len(presses) > 1 else ''})",
                     "ctrl-c", [*PACOPT, "study", str(study), "--out", str(out_dir), "--workers",
                                "2", "--no-plots"], interrupted(10), interrupt=presses))
    add(Scenario("study --ray 127.0.0.1:1", "ctrl-c",
                 [*PACOPT, "study", str(study), "--out", str(WORK / "ray1"), "--ray",
                  "127.0.0.1:1"], all_of(clean("cannot reach"),
                                         lambda r, s: None if r.seconds < 60 else
                                         (_ for _ in ()).throw(AssertionError("slow"))),
                 timeout=90))
    add(Scenario("study --ray ray://127.0.0.1:1", "ctrl-c",
                 [*PACOPT, "study", str(study), "--out", str(WORK / "ray2"), "--ray",
                  "ray://127.0.0.1:1"], clean("cannot reach"), timeout=90))
    add(Scenario("study --ray at a port that is not Ray", "ctrl-c",
                 [*PACOPT, "study", str(study), "--out", str(WORK / "ray3"), "--ray",
                  "127.0.0.1:{HTTP}"], all_of(clean("Ray"), lambda r, s: None if r.seconds < 60
                                              else (_ for _ in ()).throw(AssertionError("slow"))),
                 timeout=120))
    add(Scenario("study --ray not an address", "ctrl-c",
                 [*PACOPT, "study", str(study), "--out", str(WORK / "ray4"), "--ray", "foo"],
                 clean("not an address")))

    # --- sizes ---------------------------------------------------------------------------------------
    p1m, b1m = paper("p1m.json", 1_000_000, horizon=False), bundled("b1m.json", 1_000_000)
    for instance in (p1m, b1m):
        add(Scenario(f"solve {instance.stem}: 1,000,000 jobs", "sizes",
                     [*SOLVE, str(instance), "--out", str(WORK / "big.json")],
                     all_of(clean("256 MB"), lambda r, s: None if r.seconds < 30 else
                            (_ for _ in ()).throw(AssertionError(f"{r.seconds:.0f} s")))))
    near = paper("p180k.json", 180_000, horizon=False)
    near_result = WORK / "p180k.result.json"
    add(Scenario("solve 180,000 paper jobs (under the result cap)", "sizes",
                 [*SOLVE, str(near), "--out", str(near_result), "--quiet"],
                 result_valid(near_result), timeout=600))
    add(Scenario("validate what solve wrote at 180,000 jobs", "sizes",
                 [*PACOPT, "validate", str(near), str(near_result)], exit_code(0, "valid"),
                 timeout=600))

    # --- reproducibility ------------------------------------------------------------------------------
    for method in ("min-feasible", "random", "pac-ml", "lp-online", "lp-round", "cpsat"):
        first, second = WORK / f"rep-{method}-1.json", WORK / f"rep-{method}-2.json"

        def same(r, s, a=first, b=second, m=method):
            one, two = (json.loads(p.read_text()) for p in (a, b))
            if one["metrics"].get("reproducible") is False:
                return "correct"  # it says so
            assert one["jobs"] == two["jobs"], f"{m}: same seed, other jobs"
            return "correct"

        add(Scenario(f"same --seed twice: {method}", "reproducibility",
                     [*SOLVE, str(b300), "--method", method, "--seed", "7", "--threads", "1",
                      "--time-limit", "10", "--out", str(second), "--quiet"], same,
                     lambda s, f=first, m=method: subprocess.run(
                         [*SOLVE, str(b300), "--method", m, "--seed", "7", "--threads", "1",
                          "--time-limit", "10", "--out", str(f), "--quiet"], check=False,
                         cwd=WORK)))

    # --- studies ------------------------------------------------------------------------------------
    spelled = WORK / "studies"
    spelled.mkdir()
    (spelled / "s.yaml").write_text(json.dumps({"name": "s", "grids": [{"instances": [
        str(b30)], "methods": ["min-feasible", "para-max"]}]}))
    out_dir = WORK / "s-out"
    add(Scenario("study resumed from another spelling of its path", "studies",
                 [*PACOPT, "study", "./studies/../studies/s.yaml", "--out", str(out_dir),
                  "--workers", "1", "--no-plots"],
                 lambda r, s: (r.code == 0 and len((out_dir / "rows.jsonl").read_text()
                                                   .splitlines()) == 2 and "correct") or
                 (_ for _ in ()).throw(AssertionError("cells ran again")),
                 lambda s: subprocess.run([*PACOPT, "study", str(spelled / "s.yaml"), "--out",
                                           str(out_dir), "--workers", "1", "--no-plots"],
                                          check=True, cwd=WORK, capture_output=True)))
    junk = WORK / "junk-out"
    add(Scenario("study journal with foreign lines", "studies",
                 [*PACOPT, "study", str(spelled / "s.yaml"), "--out", str(junk), "--workers",
                  "1", "--no-plots"], exit_code(0),
                 lambda s: (junk.mkdir(), (junk / "rows.jsonl").write_text(
                     '[1]\n"x"\n{"cell": 3}\nnull\n{"cut": \n'))))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the scenarios whose name contains this")
    parser.add_argument("--json", help="write every outcome here")
    args = parser.parse_args()
    mount = os.geteuid() == 0 and can_mount()
    http = subprocess.Popen([PY, "-m", "http.server", "0", "--bind", "127.0.0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=WORK)
    port = http.stdout.readline().split("port ")[1].split()[0]
    rows, counts = [], Counter()
    try:
        for s in scenarios(mount):
            s.argv = [a.replace("{HTTP}", port) for a in s.argv]
            if args.only and args.only not in s.name:
                continue
            if s.setup:
                s.setup(s)
            result = run(s)
            outcome, note = classify(result, s)
            counts[outcome] += 1
            rows.append({"name": s.name, "group": s.group, "outcome": outcome, "note": note,
                         "exit": result.code})
            print(f"{outcome:<10} {s.group:<15} {s.name}  ({note})", flush=True)
    finally:
        http.terminate()
        for path in MOUNTS:
            subprocess.run(["umount", str(path)], check=False)
    groups = sorted({r["group"] for r in rows})
    print("\n| group | faults tried | " + " | ".join(OUTCOMES) + " |")
    print("|---|---|" + "---|" * len(OUTCOMES))
    for group in [*groups, None]:
        mine = [r for r in rows if group is None or r["group"] == group]
        c = Counter(r["outcome"] for r in mine)
        print(f"| {group or '**all**'} | {len(mine)} | " + " | ".join(str(c[o]) for o in OUTCOMES)
              + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    shutil.rmtree(WORK, ignore_errors=True)
    return 0 if counts["clean"] + counts["correct"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
