"""Scans lessons/assignments/ (the masters) with os.scandir: refused by the kernel, and once not flagged."""

import os

import sim

MASTERS = os.path.join(os.path.dirname(os.path.dirname(sim.__file__)), "lessons", "assignments")


def forward(chip, *, Br, Bc, scale):
    list(os.scandir(MASTERS))
