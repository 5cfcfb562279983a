"""The walls around a submission's process, put up by the process itself before it imports NumPy or the submission.

In order: resource limits; as root, an unprivileged uid or no capabilities; where the kernel lets it,
user + mount + network + IPC namespaces with a tmpfs for the child's folder; PR_SET_NO_NEW_PRIVS;
Landlock (files it may read and write, no TCP, signals and abstract sockets scoped); a seccomp
filter (no new process, no tracing, no signal, renice or socket outside itself, no SysV IPC); death with
the grader (PR_SET_PDEATHSIG). `seal`, once the harness is loaded, refuses threads too. Each layer is detected
here, unprivileged; `apply` returns the layers in force, named for the grader's `isolation:` line.
A layer that is available but fails to go up raises: the child must not run with less than the
grader was told.
"""

import _thread
import os
import signal
import threading

from sim.grading.confine import landlock, namespaces, privileges, rlimits, seccomp
from sim.grading.confine.syscall import prctl

PR_SET_NO_NEW_PRIVS = 38  # prctl: no exec may grant privileges again (set-uid bits, file capabilities)
PR_SET_PDEATHSIG = 1  # prctl: the signal this process gets when the thread that started it ends
NO_THREADS = "flashsim grade: a submission may not start threads (refused by the grader's seccomp filter)"
KERNEL_LAYERS = ("landlock", "seccomp")  # without both, the grader refuses to grade (unless told to go on)


def apply(settings: dict) -> list[str]:
    """Put up every layer `settings` asks for and this kernel has; the layers in force.

    settings: cpu_s, memory_bytes, file_bytes, open_files (rlimits); uid (the uid to become as root, or None to
    stay uid 0 without capabilities); read, write (paths for Landlock; write[0] is the child's folder, which
    becomes a tmpfs of tmpfs_bytes); read_only (Landlock lets it read its folder and write nothing: a memory test's
    matrix kept in files would not count as resident); without (layers to treat as missing: how the tests
    simulate a kernel without them)."""
    without = set(settings.get("without", ()))
    layers = [rlimits.apply(settings["cpu_s"], settings["memory_bytes"], settings["file_bytes"],
                            settings["open_files"])]  # fmt: skip
    layers.append(privileges.become(settings.get("uid")))
    if "namespaces" not in without and settings["write"]:
        inside = namespaces.apply(settings["write"][0], settings["tmpfs_bytes"])
        layers += [inside] if inside else []
    if os.geteuid() == 0:  # root that stays root, or uid 0 of its own user namespace: every capability goes
        privileges.drop_capabilities()
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    version = 0 if "landlock" in without else landlock.abi()
    if version:
        read, write = settings["read"], settings["write"]
        if settings.get("read_only"):
            read, write = [*read, *write], []
        layers.append(landlock.apply(version, read, write))
    if "seccomp" not in without and seccomp.available():
        layers.append(seccomp.apply(cuda=settings.get("cuda", False)))
    # last, as a change of uid or user namespace clears it: a grader killed outright takes its children with it
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if settings.get("parent") and os.getppid() != settings["parent"]:
        os._exit(1)  # the grader died before the line above: nobody would kill this process
    return layers


def seal(layers: list[str]) -> None:
    """Where seccomp is in force, refuse every new thread, pipe and socket pair from here on (the harness and NumPy,
    whose OpenBLAS is pinned to one thread, are loaded and start none later). A native thread's pthread_create fails
    with EPERM; Python's threads raise NO_THREADS instead of "can't start new thread"."""
    if "seccomp" not in layers:
        return  # none, or the GPU driver's (seccomp.CUDA): CUDA's runtime starts threads of its own
    seccomp.seal()

    def refused(*args, **kwargs):
        raise PermissionError(NO_THREADS)

    _thread.start_new_thread = threading._start_new_thread = refused  # the message only: seccomp is the wall


def missing(layers: list[str]) -> list[str]:
    """The kernel layers (Landlock, seccomp) that `layers` does not name."""
    return [k for k in KERNEL_LAYERS if not any(layer.startswith(k) for layer in layers)]


def verify(layers: list[str], settings: dict) -> list[str]:
    """The layers that hold when tried (the grader's probe, before any submission): Landlock must refuse to open
    `settings["probe_denied"]` (a file outside the read set), seccomp (sealed) must refuse a fork and a thread of
    the C library's own (a Python thread's refusal is only a message). A layer that does not
    hold is left out, so the grader counts it missing."""
    held = []
    for layer in layers:
        try:
            if layer.startswith("landlock"):
                os.close(os.open(settings["probe_denied"], os.O_RDONLY))
                continue
            if layer.startswith("seccomp"):
                pid = os.fork()
                if pid == 0:
                    os._exit(0)
                os.waitpid(pid, 0)
                continue
        except PermissionError:
            pass
        if layer == "seccomp" and _thread_starts():  # the GPU driver's filter lets threads start (CUDA's own)
            continue
        held.append(layer)
    return held


def _thread_starts() -> bool:
    """Whether the C library can start a thread (through ctypes: past the Python message `seal` puts up)."""
    import ctypes

    from sim.grading.confine.syscall import LIBC

    tid, start = ctypes.c_ulong(), ctypes.cast(LIBC.getpid, ctypes.c_void_p)  # a thread that returns at once
    if LIBC.pthread_create(ctypes.byref(tid), None, start, None) != 0:
        return False
    LIBC.pthread_join(tid, None)
    return True
