"""Forks a process (the hook refuses os.fork)."""

import os


def forward(chip, *, Br, Bc, scale):
    if os.fork() == 0:
        os._exit(0)
