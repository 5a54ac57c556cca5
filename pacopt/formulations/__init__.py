"""Exact models of the offline problem (MILP with HiGHS, CP-SAT) and of the job-level problem."""
