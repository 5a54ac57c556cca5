"""pacopt: partitioning and placement of DNN training jobs on RAMP optical clusters.

Layers (lower never imports higher): ``cluster`` (the world) <- ``formulations`` <- ``solvers``
<- ``analysis``; ``learned`` builds on ``cluster`` only.
"""

__version__ = "0.1.0"
