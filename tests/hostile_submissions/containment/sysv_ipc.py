"""Makes SysV shared memory (filled, left behind: outside RLIMIT_AS and the tmpfs, it outlives the process), a
semaphore set, a message queue, a POSIX message queue and a memfd; names which the kernel let through."""

import ctypes
import errno
import os

SEG = 64 << 20
IPC_PRIVATE, IPC_CREAT = 0, 0o1000
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]


def shm():
    sid = libc.shmget(IPC_PRIVATE, ctypes.c_size_t(SEG), IPC_CREAT | 0o600)
    if sid >= 0:
        addr = libc.shmat(sid, None, 0)
        if addr not in (None, ctypes.c_void_p(-1).value):
            ctypes.memset(addr, 0x41, SEG)  # the pages really committed
            libc.shmdt(ctypes.c_void_p(addr))
    return sid


def memfd():
    try:
        os.memfd_create("x")
        return 0
    except OSError as e:
        ctypes.set_errno(e.errno)
        return -1


CALLS = {
    "shmget": shm,
    "semget": lambda: libc.semget(IPC_PRIVATE, 1, IPC_CREAT | 0o600),
    "msgget": lambda: libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600),
    "mq_open": lambda: libc.mq_open(b"/flashsim-hostile", os.O_CREAT | os.O_RDWR, 0o600, None),
    "memfd_create": memfd,
}


def forward(chip, *, Br, Bc, scale):
    seen = []
    for name, call in CALLS.items():
        ctypes.set_errno(0)
        seen.append(f"{name} {'made' if call() >= 0 else errno.errorcode[ctypes.get_errno()]}")
    raise RuntimeError("; ".join(seen))
