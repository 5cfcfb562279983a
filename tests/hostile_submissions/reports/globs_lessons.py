"""Globs lessons/assignments/*.py (the masters): refused by the kernel, and once not flagged."""

import glob
import os

import sim

MASTERS = os.path.join(os.path.dirname(os.path.dirname(sim.__file__)), "lessons", "assignments")


def forward(chip, *, Br, Bc, scale):
    if not glob.glob(os.path.join(MASTERS, "*.py")):
        raise FileNotFoundError("no master found")
