"""The one compiled piece, the step simulation's event loop (everything else is in
pyproject.toml). Optional: without a C compiler the package installs and uses the same loop in
Python, slower."""

import sys

from setuptools import Extension, setup

# no fused multiply-add: the compiled loop must give the Python loop's bits
FLAGS = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off"]

setup(ext_modules=[Extension("pacopt.model.step_loop", ["pacopt/model/step_loop.c"],
                             extra_compile_args=FLAGS, optional=True)])
