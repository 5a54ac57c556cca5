"""The searches and the front door: ``solve()`` (``api``), the registry of methods, the one
validator, the exact runner, the searches that solve the formulations (the relax-then-window
decomposition, beam search, best fit, warm starts, realisation, LP rounding) and the commands."""
