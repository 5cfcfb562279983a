"""Lists and reads a classmate's submission from the folder being graded."""

import os

import sim

CLASSMATE = os.path.join(
    os.path.dirname(os.path.dirname(sim.__file__)), "tests", "hostile_submissions", "reads_master.py"
)


def forward(chip, *, Br, Bc, scale):
    open(CLASSMATE).read()
