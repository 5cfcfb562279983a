"""What a submission's process may not touch: the instructor solutions, the library's own listings, other processes.

Installed by the harness before the submission is imported: the library's solution modules are
dropped from `sys.modules` (so importing them again must open their files), and an audit hook
(`sys.addaudithook`) refuses `import` of a denied module and every audited event on a denied path (`open`,
listing a folder, `chdir`, glob, shutil's copies, `ctypes.dlopen`, … : `PATH_EVENTS`), and tells the grader at
once. Python audits no `stat` (nor `os.path.exists`, `access`, `readlink`…), and Landlock refuses none of them, so
`posix`'s functions that reach a path unaudited (`METADATA`) are replaced by ones that put the same question
first, and a second `posix` (a fresh module, another interpreter) is refused. Audit hooks are not a sandbox — a C
function called through ctypes, or code that walks the guard's own objects, goes past them — so this is a
tripwire; the kernel's walls refuse, and the bytes and the output the grader scores never come from here.
"""

import _imp
import _thread
import os
import posix
import sys
from importlib.machinery import ModuleSpec
from operator import index

SOLUTION_MODULES = (
    "sim.algorithms",
    "sim.api.entry",
    "sim.api.reference",
)  # the library's own answers, for every assignment
SOLUTIONS = "tried to read the instructor solutions"
OTHERS = "tried to read other submissions"
LISTING = "imported the library's solution"
WHAT = frozenset((SOLUTIONS, OTHERS, LISTING))  # every violation the guard reports is one of these
MAX_DETAIL = 300  # characters of the path or module a violation names
PATH_EVENTS = frozenset(  # audited events (Python 3.11's table) whose str, bytes or pathlib arguments are paths
    ("open", "os.listdir", "os.scandir", "os.chdir", "os.walk", "os.fwalk", "glob.glob", "glob.glob/2",
     "pathlib.Path.glob", "pathlib.Path.rglob", "os.link", "os.symlink", "os.rename", "os.remove", "os.rmdir",
     "os.mkdir", "os.chmod", "os.chown", "os.chflags", "os.truncate", "os.utime", "os.listxattr", "os.getxattr",
     "os.setxattr", "os.removexattr", "shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.copytree",
     "shutil.move", "shutil.rmtree", "shutil.chown", "shutil.make_archive", "shutil.unpack_archive",
     "ctypes.dlopen", "sqlite3.connect", "tempfile.mkstemp", "tempfile.mkdtemp")
)  # fmt: skip
PROCESS_EVENTS = frozenset(
    ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "pty.spawn")
)
METADATA = ("stat", "lstat", "access", "readlink", "statvfs", "pathconf", "mkfifo", "mknod", "chroot", "open")
# posix's functions that reach a path with no audit event (open's event leaves out its dir_fd): each tells whether a
# file exists (its size, its date), and Landlock refuses none of them
FRESH = (posix.__name__, "_imp")  # builtin modules a submission may not create again: a second posix is unwatched
AT_FDCWD = -100  # <fcntl.h>: a dir_fd that means the working folder
SUPPORTS = ("supports_dir_fd", "supports_fd", "supports_follow_symlinks", "supports_effective_ids")  # os's sets


def denied_paths(modules) -> list[str]:
    """The files (and package folders) of `modules` and their compiled copies, as path prefixes."""
    import importlib.util

    out = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = os.path.realpath(spec.origin)
        if spec.submodule_search_locations:  # a package: its whole folder
            out.append(os.path.dirname(origin) + os.sep)
        else:
            stem = os.path.splitext(os.path.basename(origin))[0]
            out += [origin, os.path.join(os.path.dirname(origin), "__pycache__", stem + ".")]
    return out


def purge(modules) -> None:
    """Forget `modules` (and their submodules), and every name other `sim` modules hold that leads to them —
    directly, or through a dict, list, tuple or object (a registry of the listings, say)."""

    def denied(name) -> bool:
        return isinstance(name, str) and any(name == m or name.startswith(m + ".") for m in modules)

    def leads_there(value, depth: int = 0) -> bool:
        if type(value) is type(sys):
            return denied(value.__name__)
        if callable(value) and denied(getattr(value, "__module__", None)):
            return True
        if depth >= 3 or isinstance(value, str | bytes | type):
            return False
        if isinstance(value, dict):
            return any(leads_there(v, depth + 1) for v in value.values())
        if isinstance(value, list | tuple | set | frozenset):
            return any(leads_there(v, depth + 1) for v in value)
        fields = getattr(value, "__dataclass_fields__", None) or getattr(value, "__dict__", {})
        return any(leads_there(getattr(value, f, None), depth + 1) for f in list(fields))

    for name in [n for n in sys.modules if denied(n)]:
        del sys.modules[name]
    for name, module in list(sys.modules.items()):
        if name == "sim" or name.startswith("sim."):
            for attr, value in list(vars(module).items()):
                if not attr.startswith("__") and leads_there(value):
                    delattr(module, attr)


def install(report, modules, rules: list[tuple[str, str | None]]) -> None:
    """Refuse (and `report(what, detail)`) imports of `modules`, events on the paths the rules deny, new processes;
    watch `METADATA`'s functions the same way.

    `rules` are (path prefix, what reading it means) pairs, or (prefix, None) for a place the submission
    may read; the longest prefix that matches a path decides, so an allowed folder inside a denied one
    (the submission's own directory, the Python installation) stays readable, and the reverse.
    """
    modules = tuple(modules)
    rules = tuple(sorted(rules, key=lambda r: len(r[0]), reverse=True))
    busy = _thread._local()  # set while a path is resolved: realpath's own lstat and readlink go unwatched

    def denied(arg, dir_fd=None) -> tuple[str | None, str]:
        """What reaching `arg` (from `dir_fd`'s folder) means (None: allowed, or not a path) and its real path."""
        if arg is None or isinstance(arg, int | bool):
            return None, ""
        busy.on = True
        try:
            path = os.fsdecode(arg)
            if dir_fd not in (None, AT_FDCWD) and not path.startswith(os.sep):
                path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
            path = os.path.realpath(path)
        except (TypeError, ValueError, UnicodeError, OSError):  # not a path, or a NUL byte: Python refuses it first
            return None, ""
        finally:
            busy.on = False
        return next((w for prefix, w in rules if (path + os.sep).startswith(prefix)), None), path  # a folder too

    def check(event: str, arg, dir_fd=None) -> None:
        what, path = denied(arg, dir_fd)
        if what is not None:
            report(what, path[:MAX_DETAIL])
            verb = "read" if event == "open" else f"reach ({event})"
            raise PermissionError(f"flashsim grade: a submission may not {verb} {path[:MAX_DETAIL]} ({what})")

    def hook(event: str, args: tuple) -> None:
        if event in PATH_EVENTS:
            for arg in args[:1] if event == "open" else args:  # open's mode and flags are no paths
                check(event, arg)
        elif event == "import":
            name = args[0]
            if any(name == m or name.startswith(m + ".") for m in modules):
                report(LISTING, name[:MAX_DETAIL])
                raise ImportError(f"flashsim grade: a submission may not import {name} (the library's own solution)")
        elif event in PROCESS_EVENTS:
            raise PermissionError(f"flashsim grade: a submission may not start processes ({event})")
        elif event == "cpython.PyInterpreterState_New":  # its own posix, and no hook
            raise PermissionError("flashsim grade: a submission may not start another interpreter")

    def plain(arg):
        """A path as an exact str or bytes (a path-like object asked once), so the check and the call see one path."""
        arg = fspath(arg) if isinstance(arg, PathLike) else arg
        return "".join((arg,)) if isinstance(arg, str) else b"".join((arg,)) if isinstance(arg, bytes) else arg

    def watched(original):
        """`original`, its path (relative to its dir_fd, if given) checked first."""

        def call(*args, **kwargs):
            if args:
                args = (plain(args[0]), *args[1:])
            elif "path" in kwargs:
                kwargs["path"] = plain(kwargs["path"])
            if kwargs.get("dir_fd") is not None:
                kwargs["dir_fd"] = index(kwargs["dir_fd"])
            if not getattr(busy, "on", False):
                check(f"os.{original.__name__}", args[0] if args else kwargs.get("path"), kwargs.get("dir_fd"))
            return original(*args, **kwargs)

        call.__name__ = call.__qualname__ = original.__name__
        return call

    def create_builtin(spec):
        """`_imp.create_builtin`, but never a second `FRESH` module."""
        name = getattr(spec, "name", None)
        if type(name) is not str or name in FRESH:
            raise ImportError(f"flashsim grade: a submission may not create the module {name!r} again")
        return create(ModuleSpec(name, None, origin="built-in"))  # a spec of ours: its name is read once

    fspath, PathLike, create = os.fspath, os.PathLike, _imp.create_builtin
    for name in METADATA:
        original = getattr(posix, name)
        wrapper = watched(original)
        for module in (posix, os):
            setattr(module, name, wrapper)
        for supports in (getattr(os, s) for s in SUPPORTS):
            if original in supports:
                supports.discard(original)
                supports.add(wrapper)
    _imp.create_builtin = create_builtin
    sys.addaudithook(hook)


def readable() -> list[str]:
    """What the submission's process must read to run: its Python, site-packages, flashsim's own packages."""
    import site

    import sim

    package = os.path.dirname(os.path.realpath(sim.__file__))
    places = {
        sys.prefix,
        sys.base_prefix,
        *site.getsitepackages(),
        package,
        os.path.join(os.path.dirname(package), "gpu"),
    }
    return sorted(os.path.realpath(p) + os.sep for p in places)
