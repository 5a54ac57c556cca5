"""The mathematical formulations: the offline problem's data and candidate footprints
(``offline``), its MILP (Pyomo + HiGHS) and CP-SAT models, the worker-count relaxation
(``bound``), the packing LP (``packing_lp``) and the job-level problem (``joblevel``)."""
