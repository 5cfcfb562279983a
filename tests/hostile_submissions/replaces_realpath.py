"""Replaces posixpath.realpath so the audit hook sees an innocent path, then opens the master."""

import os
import posixpath

import sim

MASTER = os.path.join(os.path.dirname(os.path.dirname(sim.__file__)), "lessons", "assignments", "02_flash1_forward.py")


def forward(chip, *, Br, Bc, scale):
    posixpath.realpath = os.path.realpath = lambda path, **kw: "/nowhere"
    open(MASTER).read()
