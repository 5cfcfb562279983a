"""Lists lessons/ (where the solutions are): refused by the kernel, and once not flagged."""

import os

import sim

LESSONS = os.path.join(os.path.dirname(os.path.dirname(sim.__file__)), "lessons")


def forward(chip, *, Br, Bc, scale):
    os.listdir(LESSONS)
