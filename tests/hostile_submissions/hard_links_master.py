"""Hard-links the master into its own folder (where it may read) and reads the link."""

import os

import sim

MASTER = os.path.join(os.path.dirname(os.path.dirname(sim.__file__)), "lessons", "assignments", "02_flash1_forward.py")


def forward(chip, *, Br, Bc, scale):
    link = os.path.join(os.path.dirname(os.path.abspath(__file__)), "copy.py")
    os.link(MASTER, link)
    open(link).read()
