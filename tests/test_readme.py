"""The README's promises to a new user: one command for each step, and CI runs them.

``.ci/run`` runs the README's set-up (with the ``test`` extra), run and test commands on a fresh
clone; the slow test here runs the core set-up (``pip install -e .``, the first command of "Set
up") and the run command on a fresh clone in a new virtual environment, as a user without the
extras would (``python -m pytest -m slow tests/test_readme.py``; a minute or more).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_commands(section: str) -> list[str]:
    """The commands in the ``bash`` blocks of the README's ``## section``."""
    text = (ROOT / "README.md").read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for block in re.findall(r"```bash\n(.*?)```", body, re.S)
            for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_the_readme_names_one_command_for_each_step():
    assert readme_commands("Set up")[0] == "pip install -e ."
    assert readme_commands("Run") == ["solve examples/bundled.json"]
    assert readme_commands("Test") == ["python -m pytest -q"]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    # CI runs the README's run command, then exactly its test command, last
    assert "solve examples/bundled.json" in ci and ci[-1] == "python -m pytest -q"


@pytest.mark.slow
def test_set_up_run_and_test_on_a_fresh_clone(tmp_path):
    clone = tmp_path / "pacopt"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "VIRTUAL_ENV": str(venv), "PACOPT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTHONPATH", None)

    def run(command: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(shlex.split(command), cwd=clone, env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)

    setup = run(readme_commands("Set up")[0], timeout=1200)
    assert setup.returncode == 0, setup.stderr[-2000:]
    solved = run(readme_commands("Run")[0], timeout=300)
    assert solved.returncode == 0, solved.stderr[-2000:]
    assert re.search(r"^validated\s+yes$", solved.stdout, re.M), solved.stdout
    assert (clone / "examples" / "bundled.min-feasible.result.json").is_file()
