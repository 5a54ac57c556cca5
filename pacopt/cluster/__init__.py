"""The world: RAMP topology, job graphs, partitioning, placement, JCT model, online simulator."""
