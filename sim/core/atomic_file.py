"""The one way flashsim writes a file: a regular file is written to a temporary file beside it and renamed over
it, so that a failed or interrupted write leaves the old file whole; a device, a pipe or /dev/stdout is written
directly (renaming over it would replace the device with a file). A pipe with no reader is refused after a short
grace (READER_WAIT), never waited on for ever; a command's output pipe is opened before its work (`hold_pipe`).
`read_regular` reads a file the user named: a regular file of bounded size, nothing else."""

import errno
import os
import stat
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from sim.core.errors import InputError

READER_WAIT = 2.0  # seconds a pipe with no reader is given for one before it is refused
HELD: dict[str, int] = {}  # pipes opened by `hold_pipe` before the work, by path: written through copies (`_held`)
KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
         (stat.S_ISFIFO, "a pipe"), (stat.S_ISSOCK, "a socket"))  # fmt: skip


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
        with _named(path), _held(path):
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
    """An OSError raised inside names `path` (a failed write to /dev/full names no file of its own); a pipe whose
    reader left is said in one line (click would take its EPIPE for stdout's and end the command silently)."""
    try:
        yield
    except BrokenPipeError:
        raise InputError(f"{path}: the pipe's reader left before the output was written whole") from None
    except OSError as e:
        if e.filename is None or str(e.filename).startswith(str(path.parent / f".{path.name}.")):
            raise OSError(e.errno, e.strerror or str(e), str(path)) from None
        raise


@contextmanager
def open_atomic(path: str | Path, mode: str = "w", encoding: str | None = "utf-8"):
    """`open(path, mode)` through `target`: the file appears whole or not at all."""
    encoding = None if "b" in mode else encoding
    if special(path):
        with _named(Path(path)), _held(path, mode) as fd, open(os.dup(fd), mode, encoding=encoding) as f:
            yield f
        return
    with target(path) as where, open(where, mode, encoding=encoding) as f:
        yield f
        if where != Path(path):  # a regular file: on the disk before the rename makes it the file (a crash
            f.flush()  # leaves the old one or the new, never an empty one)
            os.fsync(f.fileno())


def hold_pipe(path: str | Path) -> None:
    """Open the pipe `path` for writing now, before any work (refused in one line if no reader comes within
    READER_WAIT), and keep it open for the command's write: closing it would end the reader's input."""
    if stat.S_ISFIFO(os.stat(path).st_mode) and str(path) not in HELD:
        HELD[str(path)] = _open_special(path)


@contextmanager
def pipes_held():
    """A command's span: pipes `hold_pipe` opened are closed at its end (their reader's end of input), written or
    not (the command failed)."""
    try:
        yield
    finally:
        while HELD:
            os.close(HELD.popitem()[1])


@contextmanager
def _held(path: str | Path, mode: str = "w"):
    """A device or a pipe open for writing as `open(path, mode)` would (a blocking descriptor, opened without
    blocking; a pipe `hold_pipe` opened, a copy of it: held to the command's end, it serves each option that names
    it), closed after: the writer writes through it."""
    held = HELD.get(str(path)) if "w" in mode else None
    fd = _open_special(path, mode) if held is None else os.dup(held)
    try:
        yield fd
    finally:
        os.close(fd)


def _open_special(path: str | Path, mode: str = "w") -> int:
    """`open(path, mode)`'s descriptor, opened without blocking: a pipe with no reader (ENXIO) is given
    READER_WAIT seconds for one to open it (a reader started beside the command), then refused in one line."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY  # open(path, "w")'s, without blocking
    flags |= (os.O_TRUNC if "w" in mode else 0) | (os.O_APPEND if "a" in mode else 0)
    deadline = time.monotonic() + READER_WAIT
    while True:
        try:
            fd = os.open(path, flags, 0o666)
            break
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            if time.monotonic() > deadline:  # opening it blocking would wait for ever
                raise OSError(e.errno, "no reader on the pipe", str(path)) from None
            time.sleep(0.02)
    os.set_blocking(fd, True)
    return fd


def write_text(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    with open_atomic(path) as f:
        f.write(text)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def kind(mode: int) -> str:
    """What a file of stat mode `mode` is, in words ("a pipe", "a character device")."""
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def read_regular(path: str | Path, most: int, what: str, too_big: str = "more than any it could be") -> bytes:
    """The bytes of the regular file at `path`; refused in one line (`what: …`) where it is anything else (a device
    such as /dev/zero never ends, a pipe blocks: checked before it is opened, opened without blocking, checked again
    once open) or holds more than `most` bytes (said with `too_big`)."""
    try:
        if not stat.S_ISREG(mode := os.stat(path).st_mode):
            raise InputError(f"{what}: {str(path)!r} is {kind(mode)}, not a regular file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        raise InputError(f"{what}: cannot read {str(path)!r}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(mode := os.fstat(fd).st_mode):  # replaced between the stat and the open
            raise InputError(f"{what}: {str(path)!r} is {kind(mode)}, not a regular file")
        chunks, size = [], 0
        try:
            while size <= most and (chunk := f.read(min(most + 1 - size, 2**24))):  # never a buffer of `most`
                chunks.append(chunk)
                size += len(chunk)
        except OSError as e:
            raise InputError(f"{what}: cannot read {str(path)!r}: {e.strerror}") from None
    data = b"".join(chunks)
    if len(data) > most:
        raise InputError(f"{what}: {str(path)!r} holds more than {most:,} bytes, {too_big}")
    return data
