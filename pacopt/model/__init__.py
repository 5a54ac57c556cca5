"""The world model: RAMP topology, job graphs, partitioning, placement and placers, the JCT model,
the online simulator and what it offers a policy (:mod:`pacopt.model.decision`), instances,
workloads and traces. It knows nothing of policies, solvers or learning."""
