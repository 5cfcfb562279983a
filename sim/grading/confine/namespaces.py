"""Optional namespaces: a user namespace owning a new mount, network and IPC namespace, in which the child's folder
becomes a size-limited tmpfs (it cannot fill the disk), no network exists and SysV IPC objects die with the
child (seccomp refuses them anyway). They need unprivileged user namespaces (Ubuntu 24.04's AppArmor rule and
Docker's default seccomp profile refuse them): where they fail, `apply` returns None and the child goes on without.
Ubuntu 24.04's rule lets `unshare` succeed and then refuses the uid map, which a process could not undo: so a
throwaway child tries first. Constants: <linux/sched.h>, <sys/mount.h>."""

import ctypes
import os

from sim.grading.confine.syscall import LIBC

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x08000000, 0x10000000, 0x40000000  # unshare
MS_NOSUID, MS_NODEV = 0x2, 0x4  # mount(2) flags for the tmpfs: no set-uid files, no device files


def apply(folder: str, size_bytes: int) -> str | None:
    """Enter new user, mount, network and IPC namespaces (this uid mapped to uid 0 inside) and mount a tmpfs of
    `size_bytes` on `folder`, its files carried over; the layer's words, or None where the kernel refuses any step
    (tried first by a throwaway child, `_works`)."""
    if not _works(folder, size_bytes):
        return None
    _enter(folder, size_bytes)
    return f"user+mount+net+ipc namespaces ({size_bytes >> 20} MiB tmpfs)"


def _works(folder: str, size_bytes: int) -> bool:
    """Whether every step of `_enter` succeeds here, in a forked child that then exits (its namespaces, and the
    tmpfs mounted in its own mount namespace, go with it)."""
    pid = os.fork()
    if pid == 0:
        try:
            _enter(folder, size_bytes)
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def _enter(folder: str, size_bytes: int) -> None:
    """Unshare, map this uid and gid to 0 inside, and mount the tmpfs on `folder` with its files; OSError if refused."""
    uid, gid = os.getuid(), os.getgid()
    if LIBC.unshare(ctypes.c_int(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    _write("/proc/self/setgroups", "deny")  # required before an unprivileged gid_map
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")
    files = {name: open(os.path.join(folder, name), "rb").read() for name in os.listdir(folder)}
    options = f"size={size_bytes},mode=0700".encode()
    if LIBC.mount(b"tmpfs", folder.encode(), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV), options) != 0:
        raise OSError(ctypes.get_errno(), f"mount of a tmpfs on {folder}")
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    os.chdir(folder)  # the working directory was the folder under the mount, outside Landlock's rule for the tmpfs


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
