"""Native threads (pthread_create on libc's pause, 16 KiB stacks): nothing caps them but pid_max, and RLIMIT_NPROC
does not bind a child that is uid 0. Says how many it started and pthread_create's error."""

import ctypes
import time

CAP = 3000


def forward(chip, *, Br, Bc, scale):
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(64)
    libc.pthread_attr_init(attr)
    libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(16384))
    libc.pthread_attr_setguardsize(attr, ctypes.c_size_t(0))
    fn = ctypes.cast(libc.pause, ctypes.c_void_p)
    tid = ctypes.c_ulong()
    n, err, t = 0, 0, time.time()
    for _ in range(CAP):
        err = libc.pthread_create(ctypes.byref(tid), attr, fn, None)
        if err:
            break
        n += 1
    raise RuntimeError(f"{n} native threads started in {time.time() - t:.2f} s (pthread_create error {err})")
