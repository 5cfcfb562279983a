"""The child's resident memory and threads as the grader reads them from /proc/<pid>/status: what it cannot forge.

tracemalloc runs inside the child, where a submission can stop it or reset its peak; VmHWM (the most resident memory
the process has held) is the kernel's, read from outside. `mark` writes 5 to /proc/<pid>/clear_refs before the
submission is imported, which resets VmHWM to what is resident then (interpreter, NumPy, the harness); where that
write is refused (a grader that is not root, with a child that is not dumpable), the peak counts from the start
instead, and so can only be higher. `threads` is the count the grader's census of a child reads (`sandbox`).
"""

import contextlib
import subprocess
from pathlib import Path


def _field(pid: int, name: str) -> int | None:
    """The number that starts one "Name: N …" line of /proc/<pid>/status; None where it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key == name:
                return int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _bytes(pid: int, name: str) -> int | None:
    """One "Vm…: N kB" line in bytes."""
    kib = _field(pid, name)
    return None if kib is None else kib * 1024


def mark(pid: int) -> int | None:
    """Reset the process's peak to what it holds now (where allowed) and return that (VmRSS, bytes)."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    return _bytes(pid, "VmRSS")


def peak(pid: int) -> int | None:
    """The most the process has held resident since `mark` (VmHWM, bytes)."""
    return _bytes(pid, "VmHWM")


def held_by(proc: subprocess.Popen) -> tuple[int | None, str]:
    """`peak` of a process still running, or None and why not: it ended (one that is ending has no VmHWM before it
    is a zombie, so its end is waited for a moment), or its status could not be read."""
    hwm = peak(proc.pid)
    if hwm is not None and proc.poll() is None:
        return hwm, ""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1.0)
    return None, "its process ended" if proc.poll() is not None else "its /proc/<pid>/status could not be read"


def threads(pid: int) -> int | None:
    """How many threads the process runs now."""
    return _field(pid, "Threads")
