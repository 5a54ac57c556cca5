"""pacopt: partitioning and placement of DNN training jobs on RAMP optical clusters.

Layers, lowest first (a package imports only lower ones; ``tests/test_layers.py`` checks it and
``docs/architecture.md`` explains it): ``infra`` <- ``model`` <- ``formulations`` <- ``online``
<- ``learned`` (``hetero`` beside them) <- ``solvers`` <- ``analysis`` <- ``pacopt.cli`` (the
command dispatcher).
"""

__version__ = "0.2.0"
