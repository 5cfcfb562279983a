"""Which walls this machine can put around a submission, found once per grading run by a probe child.

The grader computes the read set (`allowlist`), picks the uid the children run as, then starts one
confined child that tries what the walls must stop (opening a file outside the read set, forking)
and reports the layers that held. Without Landlock or seccomp the grader refuses to grade unless the
instructor passes --allow-weak-isolation (then every report and the CSV say so); a self-check warns.
"""

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace

from sim.core.errors import InputError
from sim.grading import allowlist, confine, sandbox, spec

NOBODY = 65534  # the uid (and gid) a root grader's children become, where they can read what they need
WEAK = "graded without kernel isolation"
WITHOUT: frozenset = frozenset()  # layers to treat as missing: how the tests simulate an older kernel


@dataclass(frozen=True)
class Isolation:
    """The layers every child of this run gets, and the settings they share; for a GPU assignment, `kernel`: the
    walls of the process that compiles and runs a test's kernel (CUDA's paths, threads and address space), while
    the submission's own process, which only hands in its source, gets a CPU assignment's."""

    layers: tuple[str, ...]
    missing: tuple[str, ...]  # kernel layers (landlock, seccomp) not in force, here or in `kernel`
    settings: dict
    stays_root: str = ""  # why a root grader's children stay uid 0 (without capabilities), if they do
    kernel: "Isolation | None" = None

    @property
    def weak(self) -> bool:
        return bool(self.missing)

    def line(self) -> str:
        """`isolation: landlock ABI 7 (files, tcp, …) · seccomp · uid 65534`, or what is missing; a GPU
        assignment's adds its kernel process's seccomp."""
        shown = [layer for layer in self.layers if layer != "rlimits"]
        who = shown[0] + (f" ({self.stays_root})" if self.stays_root else "")
        text = "isolation: " + " · ".join([*shown[1:], who, "rlimits"])
        if self.kernel:
            text += "; the kernel's process: " + " · ".join(x for x in self.kernel.layers if x.startswith("seccomp"))
        return text + (f" — {WEAK} (no {' or '.join(self.missing)})" if self.missing else "")


def prepare(driver: str, forbidden: list[str], limits, *, allow_weak: bool, self_check: bool) -> Isolation:
    """The run's isolation, probed; InputError if a kernel layer is missing and neither flag allows that."""
    kinds = [driver, "kernel"] if driver == "gpu" else [driver]  # a GPU test's kernel: a process of its own
    reads = {kind: allowlist.read_set(kind, forbidden) for kind in kinds}
    cuda_read, cuda_write = allowlist.cuda_paths(forbidden) if driver == "gpu" else ([], [])
    reachable = [*(p for r in reads.values() for p in r.paths), *cuda_read, tempfile.gettempdir()]  # and its folder
    closed = allowlist.unreadable_by(NOBODY, reachable) if os.geteuid() == 0 else None
    uid = NOBODY if os.geteuid() == 0 and closed is None else None
    walls = []
    for kind in kinds:
        cuda = kind == "kernel"
        settings = {"root": sandbox.SIM_ROOT, "modules": reads[kind].modules, "uid": uid,
                    "read": [*reads[kind].paths, *(cuda_read if cuda else [])], "write_extra": cuda_write if cuda else [],
                    "without": sorted(WITHOUT), "read_only": "memory" in spec.DRIVERS.get(kind, ()),  # no matrix in files
                    "packages": ["gpu"] if cuda else [], "cuda": cuda,
                    "preload": list(allowlist.ENTRIES[kind][1:]) if kind == "triton" else [],
                    "environment": {"TRITON_INTERPRET": "1"} if kind == "triton" else {}}  # fmt: skip
        walls.append((probe(settings, kernel_limits(limits) if cuda else limits, forbidden), settings))
    missing = tuple(dict.fromkeys(m for layers, _ in walls for m in confine.missing(layers)))
    if missing and not (allow_weak or self_check):
        raise InputError(
            f"grade: this machine cannot confine submissions (no {' or '.join(missing)}: Linux ≥ 5.13 with Landlock "
            "enabled, and seccomp); pass --allow-weak-isolation to grade anyway, every report saying so"
        )
    why = f"{closed} is closed to uid {NOBODY}" if closed else ""
    kernel = Isolation(tuple(walls[1][0]), missing, walls[1][1], why) if driver == "gpu" else None
    return Isolation(tuple(walls[0][0]), missing, walls[0][1], why, kernel)


def kernel_limits(limits):
    """A GPU test's kernel process's limits: the instructor's, but no address-space cap (CUDA maps far more than it
    uses)."""
    return replace(limits, memory_bytes=0)


def probe(settings: dict, limits, forbidden: list[str]) -> list[str]:
    """Start one confined child, in a folder of its own as every child has, that does nothing but test its walls;
    the layers that held."""
    outside = [f for f in forbidden if os.path.isfile(f)] + ["/etc/passwd", sys.executable]
    # a file only Landlock keeps from it: outside the read set, readable by anyone (so no file mode stops it first)
    denied = next(
        (f for f in outside if os.path.isfile(f) and allowlist.unreadable_by(NOBODY, [f]) is None), outside[0]
    )
    with tempfile.TemporaryDirectory(prefix="flashsim-probe-") as folder:
        if settings["uid"] is not None:
            os.chown(folder, settings["uid"], settings["uid"])
        args = {**settings, "probe": True, "probe_denied": denied, "cpu_s": limits.cpu_s,
                "write": [folder, *settings["write_extra"]],
                "memory_bytes": limits.memory_bytes, "file_bytes": limits.file_bytes, "open_files": limits.open_files,
                "tmpfs_bytes": limits.tmpfs_bytes}  # fmt: skip
        out = subprocess.run([sys.executable, "-I", "-B", "-c", sandbox.BOOTSTRAP, json.dumps(args), "-1", "-1"],
                             capture_output=True, text=True, timeout=60, cwd=folder,
                             env={"PATH": os.environ.get("PATH", "")})  # fmt: skip
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no message"])[-1]
        raise InputError(f"grade: a confined process could not start here ({last[:200]})")
    return json.loads(out.stdout)
