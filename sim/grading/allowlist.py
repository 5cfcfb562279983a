"""What a submission's process may read: computed from the modules the harness really imports, then checked.

A fresh interpreter imports the harness (`ENTRIES`) and reports every module it loaded and every
shared library it mapped; the read set is the Python standard library, the third-party packages
among those modules (NumPy, ml_dtypes), those shared libraries, and the exact files of `sim` the
harness loaded. `HARNESS_MODULES` is the one list of flashsim modules the harness may load: a module
beyond it, or a read path that reaches a master, the library's listings, lessons/ or a submission,
and the grader refuses to start.
"""

import glob
import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from functools import cache

from sim.core.errors import InputError

HARNESS_MODULES = (  # the student API and the harness: every module of sim a graded process loads
    "sim", "sim.core", "sim.core.dtypes", "sim.core.errors", "sim.core.format", "sim.core.strict_json",
    "sim.core.atomic_file", "sim.machine", "sim.machine.ledger", "sim.machine.memory", "sim.machine.trace",
    "sim.machine.storage_cast",
    "sim.grading", "sim.grading.guard", "sim.grading.harness", "sim.grading.proxy", "sim.grading.schema",
    "sim.grading.wire",
)  # fmt: skip
# what a GPU test's kernel process loads beyond them: its driver, and what the gpu package's launchers read of the machine
# model (hardware presets, decode's occupancy model, the variants' mask rules, rung 6's causal walk in grids) — no
# listing or reference among them
GPU_MODULES = ("sim.grading.gpu_kernel", "sim.machine.blocks", "sim.machine.grids", "sim.machine.hardware",
               "sim.machine.iomodel", "sim.machine.mask", "sim.machine.occupancy", "sim.machine.row_sums")  # fmt: skip
# what the Triton driver loads beyond them: its launcher, the interpreter's recording hooks, its loops (their variable
# and a block's truth as compiled), its hints checked, the shadow memory
TRITON_MODULES = ("sim.grading.triton", "sim.grading.triton.constness", "sim.grading.triton.hints",
                  "sim.grading.triton.induction", "sim.grading.triton.interpret", "sim.grading.triton.launch",
                  "sim.grading.triton.liveness", "sim.grading.triton.loops", "sim.grading.triton.shadow",
                  "sim.grading.triton.truth")  # fmt: skip
# "gpu": the submission's process, which only hands in its source; "kernel": the process that compiles and runs it
ENTRIES = {"chip": ("sim.grading.harness",), "softmax": ("sim.grading.harness",), "gpu": ("sim.grading.harness",),
           "kernel": ("sim.grading.harness", "sim.grading.gpu_kernel"),
           "triton": ("sim.grading.harness", "sim.grading.triton.launch", "sim.grading.triton.interpret")}  # fmt: skip
LOADER_CACHE = "/etc/ld.so.cache"  # where the dynamic loader looks a library's name up
# what CUDA's driver, CuPy and NVRTC read beyond the GPU harness's read set (run 49 on the H100: its initialization
# failed with any of these missing), and the packages they load from (found without importing them)
CUDA_SYSTEM = ("/usr", "/lib", "/lib64", "/sys", "/dev/null", "/dev/zero", "/dev/urandom")  # not /etc, not /dev:
# a child that stays uid 0 (without capabilities) could read /etc/shadow or a disk's device file
CUDA_PACKAGES = ("cupy", "cupy_backends", "cupyx", "fastrlock", "nvidia")

PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
for entry in sys.argv[2:]:
    __import__(entry)
modules = {n: getattr(m, "__file__", None) for n, m in list(sys.modules.items())}
libs = sorted({line.split()[-1] for line in open("/proc/self/maps") if ".so" in line.rsplit("/", 1)[-1]})
print(json.dumps({"modules": modules, "libs": libs}))
"""


@dataclass(frozen=True)
class ReadSet:
    """The modules of sim the child imports ({name: file}) and every path Landlock lets it read."""

    modules: dict[str, str]
    paths: tuple[str, ...]


@cache
def imported(entries: tuple[str, ...]) -> dict:
    """What a fresh interpreter loads importing `entries`: {"modules": {name: file}, "libs": [shared objects]}."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    out = subprocess.run([sys.executable, "-I", "-B", "-c", PROBE, root, *entries], capture_output=True, text=True,
                         timeout=60, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})  # fmt: skip
    if out.returncode != 0:
        raise InputError(f"grade: importing the harness failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)


def read_set(driver: str, forbidden: list[str]) -> ReadSet:
    """The read set for `driver`'s harness, refused (InputError) if it reaches a path of `forbidden`."""
    loaded = imported(ENTRIES[driver])
    allowed = HARNESS_MODULES + {"kernel": GPU_MODULES, "triton": TRITON_MODULES}.get(driver, ())
    sim_files = {n: os.path.realpath(f) for n, f in loaded["modules"].items() if n == "sim" or n.startswith("sim.")}
    extra = sorted(n for n in sim_files if n not in allowed and not (driver == "kernel" and n.startswith("gpu")))
    if extra:
        raise InputError(f"grade: the harness loads {', '.join(extra)}, beyond its allow-list (allowlist.py)")
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    files = loaded["modules"]
    packages = {os.path.dirname(os.path.realpath(files.get(n.split(".")[0]) or f)) for n, f in files.items()
                if f and not n.startswith("sim") and not _under(f, stdlib)}  # fmt: skip
    libs = {os.path.realpath(lib) for lib in loaded["libs"]}
    folders = [*_stdlib(stdlib, forbidden), *sorted(packages)]
    paths = folders + [f for f in sorted(libs) if not any(_under(f, d) for d in folders)] + [*sim_files.values()]
    paths += [LOADER_CACHE] if os.path.exists(LOADER_CACHE) else []
    for path in paths:
        reached = _reaches(path, forbidden)
        if reached:
            raise InputError(f"grade: the submission's read set ({path}) reaches {reached}; refusing to grade")
    return ReadSet(sim_files, tuple(dict.fromkeys(paths)))


def cuda_paths(forbidden: list[str]) -> tuple[list[str], list[str]]:
    """What the GPU driver's child reads beyond the harness's read set — CUDA_SYSTEM and CUDA_PACKAGES, each split
    around the forbidden paths it holds — and writes beyond its folder: the NVIDIA device files and its own
    /proc/self (CUDA names its threads there; without it CUDA's initialization fails)."""
    found = [importlib.util.find_spec(name) for name in CUDA_PACKAGES]
    packages = [
        p for spec in found if spec and spec.submodule_search_locations for p in spec.submodule_search_locations
    ]
    read = [part for path in [*CUDA_SYSTEM, *packages] if os.path.exists(path) for part in around(path, forbidden)]
    return read, [*sorted(glob.glob("/dev/nvidia*")), "/proc/self"]


def around(path: str, forbidden: list[str]) -> list[str]:
    """`path`; or, where it holds a forbidden path, its entries but that one, each split the same way."""
    inside = [f for f in forbidden if _under(f, path)]
    if not inside:
        return [path]
    if not os.path.isdir(path) or any(_under(path, f) for f in inside):
        return []
    return [part for entry in sorted(os.listdir(path)) for part in around(os.path.join(path, entry), inside)]


def _stdlib(stdlib: str, forbidden: list[str]) -> list[str]:
    """The standard library as one rule, or entry by entry without site-packages if something forbidden is in it."""
    if not any(_under(f, stdlib) for f in forbidden):
        return [stdlib]
    return [os.path.join(stdlib, e) for e in sorted(os.listdir(stdlib)) if e not in ("site-packages", "dist-packages")]


def _reaches(path: str, forbidden: list[str]) -> str | None:
    """The first forbidden path that `path` (a file, or a folder and all beneath it) would expose."""
    return next((f for f in forbidden if _under(f, path) or _under(path, f)), None)


def _under(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or inside it."""
    path, folder = os.path.realpath(path), os.path.realpath(folder).rstrip(os.sep)
    return path == folder or path.startswith(folder + os.sep)


def unreadable_by(uid: int, paths) -> str | None:
    """The first of `paths` a process of another uid (not the owner, not in the group) cannot read — each folder
    on the way searchable by others, the path itself readable by others — or None."""
    for path in paths:
        parts = os.path.realpath(path).split(os.sep)
        for i in range(2, len(parts) + 1):
            st = os.stat(os.sep.join(parts[:i]))
            last = i == len(parts)
            need = (0o004 | (0o001 if os.path.isdir(path) else 0)) if last else 0o001
            if st.st_uid != uid and st.st_mode & need != need:
                return os.sep.join(parts[:i])
    return None
