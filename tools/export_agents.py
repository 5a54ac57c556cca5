"""Write each shipped agent's export beside it: what the core install plays without torch.

The export (``pacopt.learned.player``) holds the numpy head and the graph embeddings.

    python -m tools export_agents [CHECKPOINT.zip ...] [--pipedream DIR]
    (or: python tools/export_agents.py ...)

For each checkpoint (default: every ``pacopt/learned/checkpoints/*.zip``) writes
``<name>.play.npz`` beside it: the head of its network compiled as play compiles it, and the
embedding of each graph of :data:`pacopt.learned.player.SHIPPED_GRAPHS` (the bundled examples
and the PipeDream profiles the paper's and the traces' workloads use), with the checkpoint's
digest. Needs the learned extra (torch). Run it after a checkpoint changes, or the code that
compiles or observes it (``tests/test_extras.py`` checks that the shipped exports match their
checkpoints and today's code).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # run as a file: the repository's root importable
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.common import use_pipedream


def shipped_graphs() -> dict:
    """The graphs a shipped export embeds, by name (PipeDream profiles found as the benchmarks
    find them: ``--pipedream``, ``$PACOPT_PIPEDREAM_DIR``, the download cache, ../shared)."""
    from pacopt.learned.player import SHIPPED_GRAPHS
    from pacopt.model.graph_sources import resolve_graph

    return {name: resolve_graph(name) for name in SHIPPED_GRAPHS}


def main(argv: list[str] | None = None) -> int:
    from pacopt.learned.agent import CHECKPOINT_DIR, load_checkpoint
    from pacopt.learned.player import write_shipped_export

    parser = argparse.ArgumentParser(prog="python -m tools export_agents", description=(
        "Write each shipped agent's export (numpy head, graph embeddings) beside it."))
    parser.add_argument("checkpoints", nargs="*", type=Path,
                        help="checkpoint zips (default: every shipped one)")
    parser.add_argument("--pipedream", metavar="DIR", help="the PipeDream profiles' folder")
    args = parser.parse_args(argv)
    use_pipedream(args.pipedream, required=True)
    graphs = shipped_graphs()
    for path in args.checkpoints or sorted(CHECKPOINT_DIR.glob("*.zip")):
        out = write_shipped_export(str(path.resolve()), load_checkpoint, graphs)
        print(f"{out} ({out.stat().st_size} bytes, {len(graphs)} graphs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
