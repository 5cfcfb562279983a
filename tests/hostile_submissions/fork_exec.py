"""Starts /bin/sh through _posixsubprocess.fork_exec, which raises no audit event (the 3.11/3.12 signature)."""

import _posixsubprocess
import os


def forward(chip, *, Br, Bc, scale):
    r, w = os.pipe()
    args = [[b"/bin/sh", b"-c", b"sleep 30"], [b"/bin/sh"], True, (), None, None]
    args += [-1, -1, -1, -1, -1, -1, r, w, True, True, -1, None, None, -1, -1, None]
    try:
        _posixsubprocess.fork_exec(*args, False)
    except TypeError:  # Python 3.13: no allow_vfork
        _posixsubprocess.fork_exec(*args)
