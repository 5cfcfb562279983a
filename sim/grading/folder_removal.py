"""A child's folder removed however deep it goes: one descriptor open at a time, no recursion, never a raise.

A submission may nest thousands of folders (`mkdir a; chdir a` in a loop): `shutil.rmtree` recurses once per level
(RecursionError, not OSError: `ignore_errors` does not catch it) and a path that long exceeds PATH_MAX. Here the
walk goes down by name relative to the open folder and back up through "..", checked against the device and inode
it came down from; links are never followed. What cannot be removed is said once on stderr.
"""

import os
import stat
import sys

FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_WARNED: list[str] = []  # the first folder left behind, said once


def remove(top: str) -> bool:
    """Remove the folder `top` and all in it; whether it is gone (if not, a line on stderr, once a run)."""
    try:
        _remove(top)
    except (OSError, ValueError) as e:  # a folder that changed under the walk, or a permission refused
        if not os.path.lexists(top):
            return True
        if not _WARNED:
            _WARNED.append(top)
            print(f"flashsim: could not remove a submission's folder {top} ({e}); remove it by hand", file=sys.stderr)
        return False
    return True


def _remove(top: str) -> None:
    """The walk: clear the open folder's files; enter its first subfolder; when empty, go up and remove it."""
    _writable(top)
    try:
        fd = os.open(top, FLAGS)
    except FileNotFoundError:
        return
    names: list[str] = []  # the subfolders entered, from `top` down
    chain = [_id(os.fstat(fd))]  # their (device, inode), to check each ".." against
    try:
        while True:
            sub = _clear(fd)
            if sub is not None:
                _writable(sub, fd)  # each folder entered is its owner's to empty
                inner = os.open(sub, FLAGS, dir_fd=fd)
                os.close(fd)
                fd = inner
                names.append(sub)
                chain.append(_id(os.fstat(fd)))
                continue
            if not names:
                break
            outer = os.open("..", FLAGS, dir_fd=fd)
            os.close(fd)
            fd = outer
            chain.pop()
            if _id(os.fstat(fd)) != chain[-1]:
                raise ValueError("a folder was moved while it was removed")
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(top)


def _clear(fd: int) -> str | None:
    """Unlink every entry of the open folder but its subfolders; the first subfolder's name, if any."""
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                return entry.name
            os.unlink(entry.name, dir_fd=fd)
    return None


def _writable(name: str, fd: int | None = None) -> None:
    """A folder the child closed to its owner (chmod 0, same uid): opened to it again, if it can be."""
    try:
        if stat.S_IMODE(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode) & 0o700 != 0o700:
            os.chmod(name, 0o700, dir_fd=fd)
    except OSError:
        pass


def _id(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino
