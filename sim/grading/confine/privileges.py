"""Who the child runs as: an unprivileged uid/gid when the grader is root, or uid 0 with no capabilities left."""

import ctypes
import os

from sim.grading.confine.syscall import MACHINE, call, prctl

PR_CAPBSET_DROP = 24  # prctl: remove one capability from the bounding set (no exec can regain it)
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4  # prctl: empty the ambient set
PR_SET_SECUREBITS = 28  # prctl: root gains nothing by uid 0 (NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED…)
SECUREBITS = 0b101111  # NOROOT | its lock | NO_SETUID_FIXUP | its lock | KEEP_CAPS_LOCKED (securebits.h)
CAPSET = {"x86_64": 126, "aarch64": 91}  # capset(2)'s number
CAP_VERSION_3 = 0x20080522  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words per set
LAST_CAP = 63  # the bounding set is dropped up to here; EINVAL past the kernel's last is ignored


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]  # struct __user_cap_header_struct


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def apply(uid: int | None) -> str:
    """As root: become `uid` (its gid the same, no supplementary groups) if given, else drop every capability.
    Not root: nothing to drop. The layer's words for the isolation line."""
    if os.geteuid() != 0:
        return f"uid {os.geteuid()}"
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from root to another uid: the kernel clears every capability
        return f"uid {uid}"
    drop_capabilities()
    return "uid 0 without capabilities"


def drop_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets, and lock root's privileges off."""
    for cap in range(LAST_CAP + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            break  # EINVAL: past the kernel's last capability
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    prctl(PR_SET_SECUREBITS, SECUREBITS)
    header, data = CapHeader(CAP_VERSION_3, 0), (CapData * 2)()  # all zero: no capability in any set
    call(CAPSET[MACHINE], ctypes.byref(header), data)
