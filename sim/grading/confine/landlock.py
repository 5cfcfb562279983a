"""Landlock (Linux ≥ 5.13) through its three system calls: the child reads only what it is given, writes only its
temporary directory, and (by ABI) binds and connects no TCP port, signals no process and reaches no abstract
UNIX socket outside itself. Constants are those of <linux/landlock.h>."""

import ctypes
import os

from sim.grading.confine.syscall import call

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446  # the same numbers on x86_64 and aarch64
CREATE_RULESET_VERSION = 1 << 0  # landlock_create_ruleset flag: return the highest ABI instead
RULE_PATH_BENEATH = 1  # landlock_add_rule type: a file or a directory and everything beneath it

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3  # ABI 1: files
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}  # every file right an ABI knows
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4: handled with no rule, so no port at all
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6: nothing outside the child's own domain

READ = EXECUTE | READ_FILE | READ_DIR  # what the Python installation, NumPy and the harness's files get
READ_ONE_FILE = EXECUTE | READ_FILE  # a rule on a single file may carry only rights that apply to files


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip  # struct landlock_ruleset_attr (ABI 6)


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)): 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where it has none (older than 5.13, not enabled, not Linux)."""
    try:
        return call(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0


def apply(version: int, read: list[str], write: list[str]) -> str:
    """Restrict this process (its threads to come, and any child) to reading `read` and writing `write`
    (paths: a directory covers what is beneath it). Needs PR_SET_NO_NEW_PRIVS first. The layer's words."""
    fs = FS_BY_ABI[max(v for v in FS_BY_ABI if v <= version)]
    attr = RulesetAttr(fs, NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0,
                       SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0)  # fmt: skip
    size = ctypes.c_size_t(ctypes.sizeof(RulesetAttr))  # an older kernel accepts the longer struct: its tail is 0
    ruleset = call(CREATE_RULESET, ctypes.byref(attr), size, ctypes.c_uint32(0))
    try:
        for paths, rights in ((read, READ), (write, fs)):
            for path in paths:
                _allow(ruleset, path, rights)
        call(RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    scope = ["files"] + ["tcp"] * (version >= 4) + ["signals", "abstract sockets"] * (version >= 6)
    return f"landlock ABI {version} ({', '.join(scope)})"


def _allow(ruleset: int, path: str, rights: int) -> None:
    """Add the rule "`rights` on `path` and beneath" (a file's rule keeps only the rights that apply to files)."""
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):
            rights &= READ_ONE_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV
        rule = PathBeneathAttr(rights, fd)
        call(ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0))
    finally:
        os.close(fd)
