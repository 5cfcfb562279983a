"""Opens the master solution by its path (the audit hook names it; Landlock would refuse it anyway)."""

import os

import sim

MASTER = os.path.join(os.path.dirname(os.path.dirname(sim.__file__)), "lessons", "assignments", "02_flash1_forward.py")


def forward(chip, *, Br, Bc, scale):
    open(MASTER).read()
