"""The child's resource limits: CPU seconds, address space, largest file, open files, no core dump.

A grader that is not root cannot raise a hard limit it was started with (a login node's `ulimit -H`), and neither
can its children: each limit is the one asked for or the hard limit in force, whichever is lower — never more than
asked. `within` says which, for the grader's messages; `apply` sets them.
"""

import resource

KINDS = {"cpu_s": resource.RLIMIT_CPU, "memory_bytes": resource.RLIMIT_AS, "file_bytes": resource.RLIMIT_FSIZE,
         "open_files": resource.RLIMIT_NOFILE}  # fmt: skip


def within(asked: dict[str, int]) -> dict[str, int]:
    """`asked` (KINDS' names; memory_bytes 0 for none, which leaves the limit in force as it is) lowered to the hard
    limits this process has; the CPU limit stays a second below its hard one (SIGXCPU before SIGKILL)."""
    out = dict(asked)
    for name, kind in KINDS.items():
        top = resource.getrlimit(kind)[1]
        if top == resource.RLIM_INFINITY or (name == "memory_bytes" and not asked[name]):
            continue
        out[name] = min(asked[name], max(top - (name == "cpu_s"), 0))
    return out


def apply(cpu_s: int, memory_bytes: int, file_bytes: int, open_files: int) -> str:
    """Set the limits (hard as well as soft, so the submission cannot raise them), lowered by `within`; the layer's
    name."""
    limits = within({"cpu_s": cpu_s, "memory_bytes": memory_bytes, "file_bytes": file_bytes, "open_files": open_files})
    cpu_s = limits["cpu_s"]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))  # SIGXCPU at cpu_s, SIGKILL a second later
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"],) * 2)
    if limits["memory_bytes"]:
        resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"],) * 2)
    return "rlimits"
