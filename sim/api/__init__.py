"""The public entry points (entry: run, count, backward, decode), their inputs and results, the float64 reference and its tolerances."""
