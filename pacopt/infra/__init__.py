"""Infrastructure every layer may use: the input error and warnings, Ctrl-C and stop flags, quiet
native output, core counts, safe writes, checked checkpoints, progress bars, Ray sessions
(``--ray``) and the command-line base. It imports nothing else of pacopt."""
