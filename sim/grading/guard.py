"""What a submission's process may not touch: the instructor solutions, the library's own listings, other processes.

Installed by the harness before the submission is imported: the library's solution modules are
dropped from `sys.modules` (so importing them again must open their files), and an audit hook
(`sys.addaudithook`) refuses `open` of a denied path and `import` of a denied module, and tells the
grader at once. Audit hooks are not a sandbox — code that means to can get around them (ctypes,
for one) — so this is a tripwire; the bytes and the output the grader scores never come from here.
"""

import os
import sys

SOLUTION_MODULES = (
    "sim.algorithms",
    "sim.api.entry",
    "sim.api.reference",
)  # the library's own answers, for every assignment
PROCESS_EVENTS = frozenset(
    ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "pty.spawn")
)


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
    """Refuse (and `report(what, detail)`) imports of `modules`, opens the path rules deny, and new processes.

    `rules` are (path prefix, what reading it means) pairs, or (prefix, None) for a place the submission
    may read; the longest prefix that matches a path decides, so an allowed folder inside a denied one
    (the submission's own directory, the Python installation) stays readable, and the reverse.
    """
    modules = tuple(modules)
    rules = tuple(sorted(rules, key=lambda r: len(r[0]), reverse=True))

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            target = args[0]
            if isinstance(target, int) or target is None:
                return
            path = os.path.realpath(os.fsdecode(target))
            what = next((w for prefix, w in rules if path.startswith(prefix)), None)
            if what is not None:
                report(what, path)
                raise PermissionError(f"flashsim grade: a submission may not read {path} ({what})")
        elif event == "import":
            name = args[0]
            if any(name == m or name.startswith(m + ".") for m in modules):
                report("imported the library's solution", name)
                raise ImportError(f"flashsim grade: a submission may not import {name} (the library's own solution)")
        elif event in PROCESS_EVENTS:
            raise PermissionError(f"flashsim grade: a submission may not start processes ({event})")

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
