"""Raw Linux system calls through ctypes: the C library's `syscall` and `prctl`, with errno kept."""

import ctypes
import os
import platform

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
MACHINE = platform.machine()  # "x86_64" or "aarch64": the two architectures whose numbers the layers carry


def call(number: int, *args) -> int:
    """syscall(number, *args); OSError with the kernel's errno if it returns −1."""
    result = LIBC.syscall(ctypes.c_long(number), *args)
    if result == -1:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


def prctl(option: int, *args: int) -> int:
    """prctl(option, args…) with unsigned-long arguments; OSError on failure."""
    full = [ctypes.c_ulong(a) for a in (*args, 0, 0, 0, 0)[:4]]
    result = LIBC.prctl(ctypes.c_int(option), *full)
    if result == -1:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result
