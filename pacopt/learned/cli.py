"""``pacopt train``: train (or resume training) the learned partitioner on the paper workload."""

from __future__ import annotations

from pathlib import Path

from pacopt.cluster.errors import InputError
from pacopt.cluster.paper import PAPER_DISTRIBUTIONS
from pacopt.solvers.cli import command_parser


def train_command(argv: list[str]) -> int:
    """``pacopt train --dist A|B|C|D|all [--preset P] [--minutes N] [--out DIR] [--resume]``."""
    parser = command_parser("train", "Train the learned partitioner (imitation warm start, then "
                                     "MaskablePPO) on the paper workload; resumable.")
    parser.add_argument("--dist", default="all", choices=[*PAPER_DISTRIBUTIONS, "all"],
                        help="beta distribution of the training episodes (default: all four)")
    parser.add_argument("--preset", choices=["ddls", "physical"], default="ddls")
    parser.add_argument("--minutes", type=float, default=60.0,
                        help="wall-clock budget of this run (default 60)")
    parser.add_argument("--steps", type=int, help="stop after this many environment steps")
    parser.add_argument("--out", default="runs/pac-ml", help="output folder (default runs/pac-ml)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--init", metavar="CHECKPOINT",
                        help="start from this checkpoint instead of the warm start (fine-tuning)")
    parser.add_argument("--envs", type=int, default=2, help="parallel environments (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--teacher", default="tuned",
                        help="policy imitated by the warm start: tuned (default), rollout "
                             "(rollouts over tuned on sampled futures: about a minute per "
                             "episode, stronger), lookahead (the same on the episode's real "
                             "future: hindsight), any online "
                             "heuristic, agent:PATH (a trained agent; {dist} in PATH becomes "
                             "each distribution: distillation), or none")
    parser.add_argument("--warm-episodes", type=int, default=5,
                        help="teacher episodes per distribution in the warm start (default 5)")
    parser.add_argument("--dagger-rounds", type=int, default=1,
                        help="rounds in which the agent drives and the teacher labels the states "
                             "it visits (default 1)")
    parser.add_argument("--dagger-episodes", type=int, default=2,
                        help="episodes per distribution in each DAgger round (default 2)")
    parser.add_argument("--warm-epochs", type=int, default=6,
                        help="passes over the labelled states after each round (default 6; "
                             "the rollout teacher's soft targets want more, e.g. 32)")
    parser.add_argument("--teacher-temperature", type=float, default=0.25,
                        help="jobs: a rollout score gap of this much makes the teacher's "
                             "target e times likelier (default 0.25)")
    parser.add_argument("--regret-weight", type=float, default=0.0,
                        help="weight of the agent's expected regret, in jobs, under the rollout "
                             "teacher's scores (default 0; 4 keeps rare costly mistakes out)")
    parser.add_argument("--no-spill", action="store_true",
                        help="build the network without its spill features (as checkpoints "
                             "trained before they existed)")
    args = parser.parse_args(argv)
    if not args.minutes > 0 or args.minutes == float("inf"):
        raise InputError("--minutes must be a finite number > 0")
    if (args.envs < 1 or args.seed < 0 or args.warm_episodes < 0 or args.dagger_rounds < 0
            or args.dagger_episodes < 1 or args.warm_epochs < 1
            or (args.steps is not None and args.steps < 1)):
        raise InputError("--envs, --steps, --dagger-episodes and --warm-epochs must be >= 1, "
                         "--seed, --warm-episodes and --dagger-rounds >= 0")
    if not (0 < args.teacher_temperature < float("inf")) or not (0 <= args.regret_weight
                                                                 < float("inf")):
        raise InputError("--teacher-temperature must be a finite number > 0 and "
                         "--regret-weight a finite number >= 0")

    from pacopt.learned.train import TrainConfig, train

    dists = PAPER_DISTRIBUTIONS if args.dist == "all" else (args.dist,)
    config = TrainConfig(distributions=dists, preset=args.preset, minutes=args.minutes,
                         max_steps=args.steps, envs=args.envs, seed=args.seed,
                         teacher="" if args.teacher == "none" else args.teacher,
                         init=args.init, warm_episodes=args.warm_episodes,
                         dagger_rounds=args.dagger_rounds, dagger_episodes=args.dagger_episodes,
                         warm_epochs=args.warm_epochs,
                         teacher_temperature=args.teacher_temperature,
                         regret_weight=args.regret_weight, spill=not args.no_spill)
    best = train(config, Path(args.out), resume=args.resume)
    print(f"best checkpoint: {best}")
    return 0
