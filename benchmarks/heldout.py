"""What the held-out benchmarks share: their command-line options and the seeds they judge on.

``--seeds N`` takes the first N of ``pacopt.model.paper_workload.HELD_OUT_SEEDS`` (never used to train,
tune or select anything), ``--jobs`` the episode length, ``--pipedream`` where the profiles are.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pacopt.model.paper_workload import HELD_OUT_SEEDS

#: ``../shared/data/pipedream`` beside the repository.
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "pipedream"


def add_heldout_arguments(parser: argparse.ArgumentParser, jobs: bool = True) -> None:
    """``--seeds``, ``--pipedream`` and (with ``jobs``) ``--jobs``."""
    parser.add_argument("--seeds", type=int, default=3, help="how many held-out seeds")
    if jobs:
        parser.add_argument("--jobs", type=int, default=1001, help="jobs per episode")
    parser.add_argument("--pipedream", type=Path, default=SHARED,
                        help="folder with the PipeDream <model>.txt profiles")


def heldout_seeds(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[int, ...]:
    """The seeds ``args`` asks for (a bad ``--seeds``/``--jobs`` ends with argparse's exit 2),
    with ``$PACOPT_PIPEDREAM_DIR`` defaulting to ``--pipedream``."""
    if not 1 <= args.seeds <= len(HELD_OUT_SEEDS) or getattr(args, "jobs", 1) < 1:
        parser.error(f"--seeds must be in 1..{len(HELD_OUT_SEEDS)} and --jobs >= 1")
    os.environ.setdefault("PACOPT_PIPEDREAM_DIR", str(args.pipedream))
    return HELD_OUT_SEEDS[:args.seeds]
