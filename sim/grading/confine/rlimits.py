"""The child's resource limits: CPU seconds, address space, largest file, open files, no core dump."""

import resource


def apply(cpu_s: int, memory_bytes: int, file_bytes: int, open_files: int) -> str:
    """Set the limits (hard as well as soft, so the submission cannot raise them); the layer's name."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))  # SIGXCPU at cpu_s, SIGKILL a second later
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    return "rlimits"
