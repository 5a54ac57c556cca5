"""Ctrl-C at random moments of every method on large clusters (the target: exit 130 within 5 s
of a Ctrl-C at any moment of any method).

The instances are ``bench_scale``'s scaled paper workload (:func:`benchmarks.common.scaled_instance`) on 8x8x4 (256 servers) and 16x16x4
(1024 servers), or with ``--servers-per-rack 8`` on 8x4x8 and 16x8x8 (tiles of 128 servers),
frozen into JSON files in a temporary folder: ``--jobs`` arrivals (2001) for the online methods,
``--exact-jobs`` (300) for the exact and offline ones, the ``ddls`` preset (``physical`` for the
compact placer). With ``--seed`` (0), ``--moments`` (20) moments are drawn.
Each moment is a (method, cluster, delay) triple. The methods are dealt from shuffled rounds of
:data:`CONFIGS`, so that 14 moments or more cover each one once:

- online heuristics under first-fit: ``min-feasible``, ``para-max``, ``tuned``, ``pac-ml``,
  ``elasticflow``, ``lp-online``;
- the placers: ``min-feasible``, ``tuned`` and ``pac-ml`` under best-fit, ``min-feasible`` under
  compact (physical);
- exact and offline: ``cpsat``, ``milp``, ``bound``, ``lp-round``, with ``--time-limit`` (300 s)
  long enough that only Ctrl-C stops them.

Each moment draws a cluster (256 or 1024) and a delay, uniform in ``--delay`` (0.2-20 s), so the
moments land in imports, loading, table building, candidate enumeration, model building and
search. Each moment is one ``solve INSTANCE --method M [--placement P] [--time-limit T] --out
RESULT`` process in its own process group, run by :func:`benchmarks.processes.run`: SIGINT to the group after
the delay, SIGKILL 30 s later if it is still alive (a hang). Recorded: seconds from SIGINT to
exit, exit code, a traceback on stderr (or a death by a signal), and the result file if one was
written (validated or not, interrupted or not). A run that ended before its SIGINT is counted as
"finished first" (exit 0 expected), not as a failure; "ok, no result" is exit 130 in time with
no result file (Ctrl-C before the method ran: while Python imports or the instance loads;
one while the solution is validated or written lets that finish and writes the result). A fresh timing cache
(``PACOPT_CACHE_DIR``) is used, so the first runs on each cluster build their tables cold.
When ``py-spy`` is installed, the stack is dumped 0.15 s before each SIGINT (a dump pauses the
process for a few ms) and the note column says where the process was: its innermost pacopt
function (``import`` while importing), and ``metrics.stopped`` of an exact method's result.

    PACOPT_PIPEDREAM_DIR=... python benchmarks/bench_interrupt.py
    python benchmarks/bench_interrupt.py --moments 40 --seed 1 --json interrupt.json

The exit status is 1 if any moment failed the target (not exit 130 within ``--limit`` seconds,
a traceback, a hang, or a result written that does not validate), else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks import processes  # noqa: E402
from benchmarks.common import SHAPES, SHAPES_8, scaled_instance, use_pipedream  # noqa: E402

CLUSTERS = (256, 1024)
#: (method, placer, preset, family): None as placer is an exact or offline method (it places
#: jobs itself, under ``--time-limit``).
CONFIGS = [
    *((m, "first-fit", "ddls", "online") for m in
      ("min-feasible", "para-max", "tuned", "pac-ml", "elasticflow", "lp-online")),
    ("min-feasible", "best-fit", "ddls", "placer"), ("tuned", "best-fit", "ddls", "placer"),
    ("pac-ml", "best-fit", "ddls", "placer"), ("min-feasible", "compact", "physical", "placer"),
    *((m, None, "ddls", "exact") for m in ("cpsat", "milp", "bound", "lp-round")),
]
KILL_AFTER = 30.0  # seconds after SIGINT
PASS = ("ok", "ok, no result", "finished first")  # outcomes that meet the target
SPY_BEFORE = 0.15  # py-spy dumps the stack this long before the SIGINT


def write_instances(folder: Path, jobs: int, exact_jobs: int,
                    shapes: dict = SHAPES) -> dict[tuple, Path]:
    """One instance file per (servers, preset, jobs) the configurations need, on ``shapes``'
    cluster of each size."""
    paths = {}
    for servers in CLUSTERS:
        for preset, count in (("ddls", jobs), ("physical", jobs), ("ddls", exact_jobs)):
            key = (servers, preset, count)
            if key not in paths:
                path = folder / f"scale-{servers}-{preset}-{count}.json"
                path.write_text(json.dumps(
                    scaled_instance(servers, count, preset, shapes[servers]).to_dict()))
                paths[key] = path
    return paths


def draw(seed: int, moments: int, delay: tuple[float, float]) -> list[dict]:
    """``moments`` (config, servers, delay) draws: the configs dealt from shuffled rounds."""
    rng = random.Random(seed)
    deck: list[tuple] = []
    out = []
    for _ in range(moments):
        if not deck:
            deck = rng.sample(CONFIGS, len(CONFIGS))
        method, placer, preset, family = deck.pop()
        out.append({"method": method, "placer": placer, "preset": preset, "family": family,
                    "servers": rng.choice(CLUSTERS), "delay": round(rng.uniform(*delay), 2)})
    return out


def read_result(path: Path) -> dict | None:
    """The result's summary fields (None if no file; ``{"unreadable": ...}`` if cut short)."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return {"unreadable": str(err)[:80]}
    return {"validated": data.get("validated"), "interrupted": data.get("interrupted"),
            "status": data.get("status"), "accepted": data.get("accepted"),
            "bound": data.get("bound_accepted"),
            "arrived": data.get("arrived"), "solve_seconds": data.get("solve_seconds"),
            "stopped": (data.get("metrics") or {}).get("stopped"),
            "mtime": path.stat().st_mtime}


def _children() -> list[int]:
    """This process's child processes (from ``/proc``)."""
    me, out = os.getpid(), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == me:
            out.append(int(stat.parent.name))
    return out


def stage(dump: str) -> str:
    """What a ``py-spy dump`` says the process was doing: the main thread's innermost pacopt
    frame (a helper thread's when the main thread waits on it in :mod:`pacopt.infra.interrupt`),
    then the innermost frame, or "import" when inside an import."""
    pid = re.search(r"^Process (\d+)", dump, re.MULTILINE)
    threads = {}
    for text in dump.split("\nThread ")[1:]:
        frames = re.findall(r"^\s+(\S+) \(([^)]*)\)", text, re.MULTILINE)
        threads[text.split()[0]] = frames
    if not threads:
        return "(no stack: " + (dump.strip().splitlines() or ["?"])[0][:60] + ")"
    main = threads.get(pid.group(1) if pid else "", next(iter(threads.values())))
    if not main:
        return "(empty stack)"
    frames = main
    if any("infra/interrupt.py" in p for _, p in main[:3]):  # waiting on a helper thread
        helpers = [f for f in threads.values() if f is not main and any(
            "pacopt/" in p and "infra/interrupt" not in p for _, p in f)]
        frames = helpers[0] if helpers else main
    ours = [(f, p) for f, p in frames if "pacopt/" in p and "infra/interrupt" not in p]
    func, place = ours[0] if ours else frames[0]
    text = f"{func} ({place.split('pacopt/')[-1]})"
    if any("importlib" in p for _, p in main):
        return f"import, {text}"
    return text if frames[0][0] == func else f"{text} > {frames[0][0]}"


def spy_later(delay: float, into: dict, spy: str) -> threading.Timer:
    """A timer that, ``delay`` s from now, dumps the stack of this process's one child."""
    def dump() -> None:
        kids = _children()
        if not kids:
            into["stack"] = "(no process)"
            return
        done = subprocess.run([spy, "dump", "--pid", str(kids[0])],
                              capture_output=True, text=True, check=False, timeout=20)
        into["stack"] = done.stdout + done.stderr
    timer = threading.Timer(max(0.0, delay), dump)
    timer.start()
    return timer


def moment(m: dict, instance_path: Path, folder: Path, index: int, time_limit: float,
           limit: float, env: dict, spy: str | None = None) -> dict:
    """Run one moment; the row of the table."""
    out = folder / f"result-{index}.json"
    argv = [*processes.SOLVE, str(instance_path), "--method", m["method"], "--out", str(out)]
    argv += ["--placement", m["placer"]] if m["placer"] else ["--time-limit", str(time_limit)]
    scenario = processes.Scenario(f"moment {index}", "interrupt", argv, check=None, env=env,
                               timeout=m["delay"] + KILL_AFTER, interrupt=(m["delay"],))
    sent_by = time.time() + m["delay"]  # SIGINT is sent at or after this (processes.run sleeps)
    spied: dict = {}
    timer = spy_later(m["delay"] - SPY_BEFORE, spied, spy) if spy else None
    run = processes.run(scenario, folder)
    if timer is not None:
        timer.join()
    result = read_result(out)
    traceback = processes.has_traceback(run)
    written = result is not None and "unreadable" not in result
    first = (run.code == 0 and not run.hung and written and not result["interrupted"]
             and result["mtime"] < sent_by)
    if run.hung:
        outcome = "HANG"
    elif traceback:
        outcome = "TRACEBACK"
    elif first:
        outcome = "finished first"
    elif run.code != 130:
        outcome = f"EXIT {run.code}"
    elif run.seconds > limit:
        outcome = "SLOW"
    elif written and not result["validated"]:
        outcome = "INVALID"
    elif result is not None and not written:
        outcome = "UNREADABLE"
    else:
        outcome = "ok" if written else "ok, no result"
    lines = [x for x in run.err.strip().splitlines() if x.strip()]
    where = stage(spied["stack"]) if "stack" in spied and not first else ""
    note = "; ".join(x for x in (where, (result or {}).get("stopped")) if x)
    if outcome not in PASS and lines:
        note = f"{note}; stderr: {lines[-1][:100]}"
    return {**m, "index": index, "stop_s": run.seconds, "exit": run.code, "hung": run.hung,
            "traceback": traceback, "result": result, "outcome": outcome, "note": note,
            "stack": spied.get("stack"), "stderr_tail": lines[-5:]}


def result_cell(result: dict | None) -> str:
    if result is None:
        return "-"
    if "unreadable" in result:
        return "unreadable"
    kept = "valid" if result["validated"] else "INVALID"
    return f"{kept}{', int.' if result['interrupted'] else ''} {result['accepted']}/{result['arrived']}"


def print_row(r: dict) -> None:
    shape = r["shape"]
    place = r["placer"] or "offline"
    place += " (phys.)" if r["preset"] == "physical" else ""
    stop = "-" if r["outcome"] == "finished first" else f"{r['stop_s']:.2f}"
    print(f"{r['index']:>2} {r['method']:13s} {shape:>8s} {place:18s} {r['delay']:6.2f} "
          f"{stop:>6s} {r['exit']!s:>5s} {'yes' if r['traceback'] else 'no':>3s} "
          f"{result_cell(r['result']):22s} {r['outcome']:15s} {r['note']}", flush=True)


def summary(rows: list[dict], limit: float) -> str:
    stopped = [r for r in rows if r["outcome"] != "finished first"]
    good = sum(r["exit"] == 130 and r["stop_s"] <= limit and not r["traceback"] and not r["hung"]
               for r in stopped)
    failed = [r for r in rows if r["outcome"] not in PASS]
    worst = max((r["stop_s"] for r in stopped), default=0.0)
    return (f"{len(rows)} moments, {len(rows) - len(stopped)} finished first; "
            f"{good}/{len(stopped)} interrupted runs stopped within {limit:g} s with exit 130; "
            f"{sum(r['outcome'] == 'ok, no result' for r in rows)} of them kept no result; "
            f"max stop {worst:.2f} s; tracebacks {sum(r['traceback'] for r in rows)}; "
            f"hangs {sum(r['hung'] for r in rows)}; failures {len(failed)}"
            + (": " + ", ".join(f"#{r['index']} {r['method']} {r['outcome']}" for r in failed)
               if failed else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws")
    parser.add_argument("--moments", type=int, default=20, help="how many Ctrl-C moments")
    parser.add_argument("--delay", type=float, nargs=2, default=(0.2, 20.0), metavar=("LO", "HI"),
                        help="SIGINT this many seconds after the start, uniform (default 0.2 20)")
    parser.add_argument("--jobs", type=int, default=2001, help="arrivals for online methods")
    parser.add_argument("--exact-jobs", type=int, default=300,
                        help="arrivals for the exact and offline methods")
    parser.add_argument("--time-limit", type=float, default=300.0,
                        help="--time-limit of the exact and offline methods")
    parser.add_argument("--limit", type=float, default=5.0,
                        help="the target: seconds from SIGINT to exit 130")
    parser.add_argument("--only", help="run only the moments whose method contains this")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--keep", action="store_true", help="keep the instances and results")
    parser.add_argument("--servers-per-rack", type=int, choices=(4, 8), default=4,
                        help="8: the clusters with 8 servers per rack (8x4x8 and 16x8x8, tiles "
                             "of 128 servers)")
    parser.add_argument("--no-spy", action="store_true",
                        help="do not dump the stack with py-spy just before each SIGINT (the "
                             "note column's stage; done only if py-spy is installed)")
    args = parser.parse_args()
    spy = None if args.no_spy else shutil.which("py-spy") or next(
        (str(p) for p in [Path(sys.executable).with_name("py-spy")] if p.exists()), None)
    use_pipedream()
    folder = Path(tempfile.mkdtemp(prefix="pacopt-interrupt-"))
    env = {"PACOPT_CACHE_DIR": str(folder / "cache")}
    rows = []
    try:
        print(f"writing instances to {folder} ...", flush=True)
        shapes = SHAPES_8 if args.servers_per_rack == 8 else SHAPES
        paths = write_instances(folder, args.jobs, args.exact_jobs, shapes)
        print(f"{'#':>2} {'method':13s} {'cluster':>8s} {'placement':18s} {'delay':>6s} "
              f"{'stop s':>6s} {'exit':>5s} {'tb':>3s} {'result':22s} {'outcome':15s} note")
        for index, m in enumerate(draw(args.seed, args.moments, tuple(args.delay))):
            if args.only and args.only not in m["method"]:
                continue
            count = args.jobs if m["placer"] else args.exact_jobs
            path = paths[(m["servers"], m["preset"], count)]
            m["shape"] = "x".join(map(str, shapes[m["servers"]]))
            rows.append(moment(m, path, folder, index, args.time_limit, args.limit, env, spy))
            print_row(rows[-1])
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(summary(rows, args.limit))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if any(r["outcome"] not in PASS for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
