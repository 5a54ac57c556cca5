"""Infrastructure every layer may use: the input error, Ctrl-C and stop flags, quiet native
output, core counts and the command-line base. It imports nothing else of pacopt."""
