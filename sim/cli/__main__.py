"""`python -m sim.cli`: the `flashsim` command without its console script (the GPU scripts run it so)."""

from sim.cli import main

main()
