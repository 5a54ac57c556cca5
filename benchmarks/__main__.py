"""``python -m benchmarks [NAME [ARGS...]]``: list the benchmarks, or run one."""

import sys

from benchmarks import HERE, run_suite

sys.exit(run_suite("benchmarks", HERE, "bench_"))
