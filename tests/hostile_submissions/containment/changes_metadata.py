"""Changes the mode, owner, times and extended attributes of a file outside its folder (the grader's, root's):
Landlock does not guard a file's metadata, so `chmod 000` on a master would stop the next grade. Names which
the kernel let through."""

import ctypes
import errno
import os

TARGET = b"/tmp/flashsim-metadata-target"
AT_FDCWD = -100
libc = ctypes.CDLL(None, use_errno=True)
CALLS = {
    "chmod": lambda: libc.chmod(TARGET, 0o000),
    "fchmodat": lambda: libc.fchmodat(AT_FDCWD, TARGET, 0o000, 0),
    "chown": lambda: libc.chown(TARGET, os.getuid(), os.getgid()),
    "utimensat": lambda: libc.utimensat(AT_FDCWD, TARGET, None, 0),
    "setxattr": lambda: libc.setxattr(TARGET, b"user.flashsim", b"x", ctypes.c_size_t(1), 0),
}


def forward(chip, *, Br, Bc, scale):
    seen = []
    for name, call in CALLS.items():
        ctypes.set_errno(0)
        seen.append(f"{name} {'ok' if call() == 0 else errno.errorcode[ctypes.get_errno()]}")
    raise RuntimeError("; ".join(seen))
