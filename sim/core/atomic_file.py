"""The one way flashsim writes a file: a regular file is written to a temporary file beside it and renamed over
it, so that a failed or interrupted write leaves the old file whole; a device, a pipe or /dev/stdout is written
directly (renaming over it would replace the device with a file)."""

import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path


def special(path: str | Path) -> bool:
    """Whether `path` is a device, a pipe or a socket, or names one through /dev or /proc (/dev/stdout is the
    terminal, a pipe or a file opened by the shell: never replaced)."""
    if os.path.abspath(path).startswith(("/dev/", "/proc/")):
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


@contextmanager
def target(path: str | Path):
    """Yield the path a writer should write to (a temporary one beside `path`, or `path` itself where it is a
    device or a pipe); on success the temporary file replaces `path`, on failure it is removed."""
    path = Path(path)
    if special(path):
        with _named(path):
            yield path
        return
    with _named(path):
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        with _named(path):
            yield Path(tmp)
            mode = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else 0o666 & ~_umask()
            os.chmod(tmp, mode)
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def _named(path: Path):
    """An OSError raised inside names `path` (a failed write to /dev/full names no file of its own)."""
    try:
        yield
    except OSError as e:
        if e.filename is None or str(e.filename).startswith(str(path.parent / f".{path.name}.")):
            raise OSError(e.errno, e.strerror or str(e), str(path)) from None
        raise


@contextmanager
def open_atomic(path: str | Path, mode: str = "w", encoding: str | None = "utf-8"):
    """`open(path, mode)` through `target`: the file appears whole or not at all."""
    with target(path) as where, open(where, mode, encoding=None if "b" in mode else encoding) as f:
        yield f
        if where != Path(path):  # a regular file: on the disk before the rename makes it the file (a crash
            f.flush()  # leaves the old one or the new, never an empty one)
            os.fsync(f.fileno())


def write_text(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    with open_atomic(path) as f:
        f.write(text)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
