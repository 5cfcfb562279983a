"""Who the child runs as: an unprivileged uid/gid when the grader is root, or uid 0 with no capabilities left."""

import ctypes
import os

from sim.grading.confine.syscall import MACHINE, call, prctl

PR_SET_DUMPABLE = 4  # prctl: whether /proc/self belongs to the process (and it may be traced by its uid)
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


def become(uid: int | None) -> str:
    """As root with `uid` given: become it (its gid the same, no supplementary groups; the kernel then clears every
    capability). The layer's words: the uid the child runs as (root's capabilities are dropped by the caller)."""
    if os.geteuid() != 0:
        return f"uid {os.geteuid()}"
    if uid is None:
        return "uid 0 without capabilities"
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    prctl(PR_SET_DUMPABLE, 1)  # a change of uid made /proc/self root's: the namespaces' maps must be written
    return f"uid {uid}"


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
    prctl(PR_SET_DUMPABLE, 0)  # no process of the same uid may trace it or read its /proc files
