"""``python -m tools [NAME [ARGS...]]``: list the tools, or run one."""

import sys
from pathlib import Path

from benchmarks import run_suite

sys.exit(run_suite("tools", Path(__file__).resolve().parent, ""))
