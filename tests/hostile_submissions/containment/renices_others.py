"""Reaches other processes' priority, I/O priority, scheduling and CPUs, harmlessly: its own process group, a uid
that owns no process and a pid past any pid_max (the kernel answers ESRCH where the filter lets the call through).
Its own process (who 0) must stay allowed. Names each call's outcome."""

import ctypes
import errno
import os
import platform

NOBODY_PID = (1 << 22) + 7  # past the largest pid_max (2**22): no such process, ever
UNUSED_UID = 3_999_999_999 & 0x7FFFFFFF  # a uid no process runs as
IOPRIO_SET = {"x86_64": 251, "aarch64": 30}[platform.machine()]
IOPRIO_WHO_PROCESS, IOPRIO_WHO_USER = 1, 3
libc = ctypes.CDLL(None, use_errno=True)


def ioprio(which, who):
    if libc.syscall(ctypes.c_long(IOPRIO_SET), which, who, (2 << 13) | 7) != 0:  # best-effort class, lowest
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


CALLS = {
    "nice self": lambda: os.setpriority(os.PRIO_PROCESS, 0, 1),
    "nice group": lambda: os.setpriority(os.PRIO_PGRP, 0, 1),
    "nice uid": lambda: os.setpriority(os.PRIO_USER, UNUSED_UID, 19),
    "ioprio self": lambda: ioprio(IOPRIO_WHO_PROCESS, 0),
    "ioprio uid": lambda: ioprio(IOPRIO_WHO_USER, UNUSED_UID),
    "affinity pid": lambda: os.sched_setaffinity(NOBODY_PID, {0}),
    "scheduler pid": lambda: os.sched_setscheduler(NOBODY_PID, os.SCHED_BATCH, os.sched_param(0)),
    "param pid": lambda: os.sched_setparam(NOBODY_PID, os.sched_param(0)),
}


def forward(chip, *, Br, Bc, scale):
    seen = []
    for name, call in CALLS.items():
        try:
            call()
            seen.append(f"{name} ok")
        except OSError as e:
            seen.append(f"{name} {errno.errorcode[e.errno]}")
    raise RuntimeError("; ".join(seen))
