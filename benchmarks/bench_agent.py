"""The learned agent against the strongest baselines, on held-out seeds only.

    python benchmarks/bench_agent.py [--parts heldout,exact,unseen] [--seeds 3] [--preset ddls]
                                     [--exact-seconds 60] [--checkpoint-dir DIR]

Parts:
- ``heldout``: the paper workload (1001 jobs, 4x4x2, horizon 1e6 ms) of each distribution A-D on
  the first N of ``pacopt.model.paper_workload.HELD_OUT_SEEDS`` (never used to train or tune;
  but which checkpoints ship was decided on seeds 10000-10004, so they are not strictly held out
  for ``pac-ml``); blocking mean +- spread (sample std) for ``pac-ml`` (what ``--method pac-ml``
  plays: online, per decision the fine-tune of the distribution recognised from the betas so far
  where one is shipped, else the general agent), the general agent alone, ``tuned`` (online),
  the oracles ``pac-ml-given-label`` and ``tuned-given-label`` (they read every job's beta first:
  what ``pac-ml`` and ``tuned`` were before they became online), ``para-max`` and
  ``min-feasible``, next to the paper's numbers;
- ``exact``: 200-job instances of each distribution (``--exact-seed``, default the first held-out
  seed; online methods under ``--placement``): the agent's and ``tuned``'s accepted jobs next to
  the CP-SAT incumbent and bound of the same instance, and the share of ``tuned``'s distance to
  the incumbent the agent closes;
- ``unseen``: the general agent on graphs it never saw in training (other PipeDream profiles and
  the bundled profiled models), beta A, against ``min-feasible``, ``tuned`` and
  ``tuned-given-label``.

Every number comes from a validated ``solve()`` result.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pacopt.learned.agent import CHECKPOINT_DIR
from pacopt.model.instance import instance_from_dict
from pacopt.model.paper_workload import HELD_OUT_SEEDS, PAPER_DISTRIBUTIONS, paper_instance
from pacopt.solvers.api import check_placement, solve

if not __package__:  # run as a file: the suite importable from the repository's root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import REPOSITORY, add_heldout_arguments, heldout_seeds  # noqa: E402

EXAMPLES = REPOSITORY / "examples"
PAPER_PACML = dict(zip(PAPER_DISTRIBUTIONS, (0.204, 0.257, 0.117, 0.099)))
UNSEEN_PIPEDREAM = ("resnet50", "inception_v3", "densenet121", "gnmt_large", "resnext50")


def run(instance, method: str, checkpoint: Path | None = None):
    """A validated solution (fails loudly if validation failed)."""
    solution = solve(instance, method, seed=0, checkpoint=checkpoint)
    if not solution.validated:
        raise SystemExit(f"{method} on {instance.source}: not validated: "
                         f"{solution.metrics.get('validation_problems')}")
    return solution


def heldout(args, general: Path) -> None:
    seeds = HELD_OUT_SEEDS[:args.seeds]
    methods = [("pac-ml", None), ("pac-ml-given-label", None), ("pac-ml general", general),
               ("tuned", None), ("tuned-given-label", None), ("para-max", None),
               ("min-feasible", None)]
    table: dict[str, dict[str, list[float]]] = {}
    with tqdm(total=len(PAPER_DISTRIBUTIONS) * len(seeds) * len(methods), unit="episode",
              desc="held-out", disable=None) as bar:
        for dist in PAPER_DISTRIBUTIONS:
            for seed in seeds:
                instance = paper_instance(dist, seed, preset=args.preset)
                for label, checkpoint in methods:
                    method = label.split()[0]
                    rate = run(instance, method, checkpoint).blocking_rate
                    table.setdefault(label, {}).setdefault(dist, []).append(rate)
                    bar.update()
    print(f"\nBlocking rate on held-out seeds {list(seeds)} ({args.preset}, 1001 jobs; "
          f"mean ± sample std)\n")
    print("| method | " + " | ".join(PAPER_DISTRIBUTIONS) + " |")
    print("|---" * (len(PAPER_DISTRIBUTIONS) + 1) + "|")
    for label, cells in table.items():
        print(f"| {label} | " + " | ".join(
            f"{np.mean(cells[d]):.3f} ± {np.std(cells[d], ddof=1) if len(seeds) > 1 else 0:.3f}"
            for d in PAPER_DISTRIBUTIONS) + " |")
    if args.preset == "ddls":
        print("| paper PAC-ML | " + " | ".join(f"{PAPER_PACML[d]:.3f}"
                                              for d in PAPER_DISTRIBUTIONS) + " |")
    print("\nper seed:", json.dumps(table))


def exact(args) -> None:
    seed = args.exact_seed
    print(f"\n200-job instances, seed {seed} ({args.preset}, online methods under "
          f"{args.placement}); CP-SAT {args.exact_seconds:g} s, 2 threads\n")
    print("| dist | pac-ml accepted | tuned accepted | CP-SAT incumbent | bound | status | "
          "share of tuned's gap to the incumbent closed |")
    print("|---|---|---|---|---|---|---|")
    closed = []
    for dist in PAPER_DISTRIBUTIONS:
        instance = check_placement(paper_instance(dist, seed, num_jobs=200, preset=args.preset),
                                   args.placement)
        agent, tuned = run(instance, "pac-ml"), run(instance, "tuned")
        best = solve(instance, "cpsat", time_limit=args.exact_seconds, threads=2, seed=0)
        gap = best.accepted - tuned.accepted
        share = (agent.accepted - tuned.accepted) / gap if gap > 0 else float("nan")
        closed.append(share)
        print(f"| {dist} | {agent.accepted} | {tuned.accepted} | {best.accepted} | "
              f"{best.bound_accepted} | {best.status} | {share:.2f} |", flush=True)
    print(f"\nmean share closed: {np.nanmean(closed):.2f}")


def unseen(args, general: Path) -> None:
    print(f"\nGraphs never seen in training, beta A, held-out seeds "
          f"{list(HELD_OUT_SEEDS[:args.seeds])} (mean blocking)\n")
    print("| workload | pac-ml general | tuned | tuned-given-label | min-feasible |")
    print("|---|---|---|---|---|")
    workloads = {"pipedream: " + ", ".join(UNSEEN_PIPEDREAM): (UNSEEN_PIPEDREAM, None)}
    bundled = json.loads((EXAMPLES / "bundled.json").read_text())
    workloads["bundled: cnn, resnet, transformer"] = (None, bundled)
    for label, (graphs, data) in workloads.items():
        rates: dict[str, list[float]] = {}
        for seed in HELD_OUT_SEEDS[:args.seeds]:
            if graphs:
                instance = paper_instance("A", seed, preset=args.preset, graphs=graphs)
            else:
                data = {**data, "model": {"preset": args.preset},
                        "workload": {**data["workload"], "seed": seed}}
                instance = instance_from_dict(data, EXAMPLES, source=f"bundled-{seed}")
            for method, checkpoint in (("pac-ml", general), ("tuned", None),
                                       ("tuned-given-label", None), ("min-feasible", None)):
                rates.setdefault(method, []).append(run(instance, method, checkpoint).blocking_rate)
        print(f"| {label} | " + " | ".join(f"{np.mean(rates[m]):.3f}"
                                           for m in ("pac-ml", "tuned", "tuned-given-label",
                                                     "min-feasible")) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="heldout,exact,unseen")
    add_heldout_arguments(parser, jobs=False)
    parser.add_argument("--preset", default="ddls", choices=["ddls", "physical"])
    parser.add_argument("--exact-seconds", type=float, default=60.0)
    parser.add_argument("--exact-seed", type=int, default=HELD_OUT_SEEDS[0],
                        help="seed of the 200-job instances of the exact part")
    parser.add_argument("--placement", default="first-fit", choices=["first-fit", "best-fit"],
                        help="the online methods' placer in the exact part")
    args = parser.parse_args()
    heldout_seeds(parser, args)
    general = CHECKPOINT_DIR / f"general-{args.preset}.zip"
    parts = args.parts.split(",")
    if "heldout" in parts:
        heldout(args, general)
    if "exact" in parts:
        exact(args)
    if "unseen" in parts:
        unseen(args, general)
    return 0


if __name__ == "__main__":
    sys.exit(main())
