"""The child's resident memory and threads as the grader reads them from /proc/<pid>/status: what it cannot forge.

tracemalloc runs inside the child, where a submission can stop it or reset its peak; VmHWM (the most resident memory
the process has held) is the kernel's, read from outside. `mark` writes 5 to /proc/<pid>/clear_refs before the
submission is imported, which resets VmHWM to what is resident then (interpreter, NumPy, the harness); where that
write is refused (a grader that is not root, with a child that is not dumpable), the peak counts from the start
instead, and so can only be higher. A process that gives back pages it held at the mark has that much room under
the peak unseen: seccomp refuses it every madvise that drops pages; munmap, mremap or a mapping laid over anything
it held at the mark is refused where the child seals it all (SEAL: `harness.seal`, Linux 6.10+); and everywhere the
grader reads the file-backed part (RssFile: the libraries' pages) at the mark and after each memory test. `threads`
is the count the grader's census of a child reads (`sandbox`); `stat` its state and CPU time, which a test's time charges it.
"""

import contextlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

SEAL = True  # the child mseals every mapping it holds before the import (a test plays a kernel without mseal: False)


@dataclass(frozen=True)
class Reading:
    """Resident memory in bytes: `held` (VmRSS at the mark, VmHWM after a test) and the file-backed pages (RssFile)."""

    held: int
    files: int


def _fields(pid: int, *names: str) -> list[int] | None:
    """The numbers that start the "Name: N …" lines `names` of /proc/<pid>/status (one read); None where one cannot
    be read."""
    found = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in names:
                found[key] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return [found[n] for n in names] if len(found) == len(names) else None


def _reading(pid: int, held: str) -> Reading | None:
    """The "…: N kB" lines `held` and RssFile, in bytes."""
    kib = _fields(pid, held, "RssFile")
    return None if kib is None else Reading(kib[0] * 1024, kib[1] * 1024)


def mark(pid: int) -> Reading | None:
    """Reset the process's peak to what it holds now (where allowed) and return that (VmRSS) and its file pages."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    return _reading(pid, "VmRSS")


def peak(pid: int) -> Reading | None:
    """The most the process has held resident since `mark` (VmHWM) and its file pages now."""
    return _reading(pid, "VmHWM")


def held_by(proc: subprocess.Popen) -> tuple[Reading | None, str]:
    """`peak` of a process still running, or None and why not: it ended (one that is ending has no VmHWM before it
    is a zombie, so its end is waited for a moment), or its status could not be read."""
    reading = peak(proc.pid)
    if reading is not None and proc.poll() is None:
        return reading, ""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1.0)
    return None, "its process ended" if proc.poll() is not None else "its /proc/<pid>/status could not be read"


def threads(pid: int) -> int | None:
    """How many threads the process runs now."""
    count = _fields(pid, "Threads")
    return None if count is None else count[0]


TICK = os.sysconf("SC_CLK_TCK")  # /proc/<pid>/stat's unit of CPU time, per second


def stat(pid: int) -> tuple[str, float] | None:
    """The process's state (R running, S sleeping, T stopped, …) and the CPU time it (all its threads, and children
    it has waited for) has used, from /proc/<pid>/stat: its fields 3 and 14–17 (utime, stime, cutime, cstime),
    counted after the command's closing parenthesis."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0], sum(int(f) for f in fields[11:15]) / TICK
    except (OSError, ValueError, IndexError):
        return None
