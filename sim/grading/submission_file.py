"""A submission's file, read the one safe way by every reader (the child's copy, similarity, Triton's checks).

A folder of submissions is the students' own: an entry may be a symbolic link (to the master, to /dev/zero), a
named pipe (whose read blocks for ever), a device or a file of any size. Only a regular file of at most the
child's file limit (`sandbox.Limits.file_bytes`: its confined copy is a file the child writes) is read: the entry
is checked with lstat, opened without following a link or blocking, checked again once open, and read up to the
cap and one byte more. Anything else is `Refused`, in one line naming what it is.
"""

import os
import stat
from pathlib import Path

from sim.core.errors import InputError
from sim.core.format import human_bytes
from sim.grading.report import shown_name

MAX_BYTES = 1 << 20  # the child's file limit (RLIMIT_FSIZE): the largest copy of the file it could be given
KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISDIR, "a folder"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
         (stat.S_ISSOCK, "a socket"))  # fmt: skip
FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class Refused(Exception):
    """A submission's file that is not read: not a regular file, too large, or unreadable; the message says which."""


def submissions_in(path: Path) -> list[Path]:
    """The `.py` entries of a folder (one submission each, sorted by name; one that `read` refuses is graded 0 with
    the reason), or a file: one named on the command line is followed if it is a link (the instructor named it)."""
    if (path := Path(path)).is_dir():
        found = sorted(p for p in path.glob("*.py") if not p.name.startswith("."))
        if found:
            return found
        raise InputError(f"submission: the folder {path} holds no .py files")
    if not path.exists():  # a link that leads nowhere too: the instructor named a file that is not there
        raise InputError(f"submission: no file or folder {path}")
    return [Path(os.path.realpath(path))]


def read(path: Path, cap: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file `path` (a link is not followed), at most `cap` of them; `Refused` otherwise."""
    path = Path(path)
    try:
        _check(path, os.lstat(path), cap)
        fd = os.open(path, FLAGS)
    except OSError as e:
        raise Refused(f"cannot read {shown_name(path.name)}: {e.strerror}") from None
    try:
        _check(path, os.fstat(fd), cap)  # replaced between the lstat and the open
        chunks, size = [], 0
        while size <= cap and (chunk := os.read(fd, min(cap + 1 - size, 1 << 20))):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise Refused(f"cannot read {shown_name(path.name)}: {e.strerror}") from None
    finally:
        os.close(fd)
    if size > cap:  # grown since the fstat
        raise Refused(_too_big(path, size, cap))
    return b"".join(chunks)


def refusal(path: Path, cap: int = MAX_BYTES) -> str:
    """ "" for a file `read` takes, else why not in one line ("not run: mallory.py is a named pipe (FIFO), …")."""
    try:
        read(path, cap)
    except Refused as e:
        return f"not run: {e}"
    return ""


def _check(path: Path, st: os.stat_result, cap: int) -> None:
    """Refused unless `st` is a regular file of at most `cap` bytes."""
    if not stat.S_ISREG(st.st_mode):
        what = next((kind for test, kind in KINDS if test(st.st_mode)), "not a regular file")
        raise Refused(f"{shown_name(path.name)} is {what}, not a regular file")
    if st.st_size > cap:
        raise Refused(_too_big(path, st.st_size, cap))


def _too_big(path: Path, size: int, cap: int) -> str:
    return f"{shown_name(path.name)} is {size:,} bytes, larger than the {human_bytes(cap)} a submission may be"
