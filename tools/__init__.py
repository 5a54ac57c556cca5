"""pacopt's project tools: scripts that make the project's artefacts or check its behaviour,
rather than measure it (measurements are the benchmarks: ``python -m benchmarks``).

    python -m tools                 # every tool: its name and what it does
    python -m tools NAME [ARGS...]  # run one (``python -m tools NAME --help``)
    python tools/NAME.py [ARGS...]  # the same

Run from the repository's root. They find data as the benchmarks do (:mod:`benchmarks.common`).
"""
