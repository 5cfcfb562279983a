"""The submission's process: guard it, import the submission, run each test the grader sends, report back.

Started by `sim.grading.sandbox` as `python -I -B` with two pipe descriptors, already confined. The grader's first
message says which modules and paths are off limits and which file to import; each later one is a
test for a driver: "chip" (a function run on a proxy chip), "update"/"merge" (the online softmax's
functions on arrays), "gpu" (a CUDA device function's source, which the grader compiles into the readable kernel
and runs in a process of its own), "triton" (a Triton kernel run by Triton's interpreter, `sim.grading.triton`).
"""

import ctypes
import errno
import importlib.util
import os
import traceback
import tracemalloc
import warnings

import numpy as np

from sim.grading import guard, schema
from sim.grading.proxy import Link, ProxyChip

MSEAL = 462  # the same number on x86_64 and aarch64
KERNELS_OWN = ("[vdso]", "[vvar]", "[vvar_vclock]", "[vsyscall]")  # the kernel's own pages: `seal` leaves them


def main(fd_in: int, fd_out: int, layers: list[str], ms: float, maps: int) -> None:
    """Say which walls are up (before any of the submission runs), then serve the grader until bye or EOF; `maps`:
    this process's /proc/self/maps, opened before the walls (`seal`)."""
    link = Link(fd_in, fd_out)
    link.post({"op": "confined", "layers": layers, "ms": ms})
    hello, _ = link.receive()
    os.environ.update(hello.get("environment", {}))  # before the submission imports anything (TRITON_INTERPRET)
    guard.purge(hello["forbid"])
    own = [(os.path.dirname(os.path.realpath(hello["file"])) + os.sep, None)]
    rules = [tuple(r) for r in hello["denied"]] + [(p, None) for p in guard.readable()] + own
    guard.install(
        lambda what, detail: link.post({"op": "violation", "what": what, "detail": detail}), hello["forbid"], rules
    )
    if hello.get("seal"):
        seal(maps)
    else:
        os.close(maps)
    warnings.simplefilter("ignore")  # NumPy's overflow warnings would print the submission's lines, nothing more
    try:
        spec = importlib.util.spec_from_file_location("submission", hello["file"])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except BaseException as e:
        link.post({"op": "import_failed", **describe(e, hello["file"])})
        return
    link.post({"op": "ready"})
    for header, arrays in link.messages():
        run_test(module, header, arrays, link, hello["file"])


def seal(maps: int) -> None:
    """mseal (Linux 6.10+) every mapping the process holds at the mark, its libraries, heap and arenas alike, as
    /proc/self/maps lists them through `maps` (opened before the walls went up; closed here): no munmap, mremap or
    mmap MAP_FIXED can then take pages out of the count VmHWM starts from. The stack too (sealed, it still grows: a
    pickle 1,400 lists deep took it from 132 KiB to 252 KiB), not the kernel's own pages. A kernel without mseal
    leaves the grader's RssFile check alone against that."""
    os.lseek(maps, 0, os.SEEK_SET)
    listing = b"".join(iter(lambda: os.read(maps, 1 << 16), b""))
    os.close(maps)
    libc = ctypes.CDLL(None, use_errno=True)  # (not confine.syscall: the harness's read set stays as it is)
    for line in listing.decode(errors="replace").splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] in KERNELS_OWN:
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        args = (ctypes.c_long(MSEAL), ctypes.c_ulong(start), ctypes.c_ulong(end - start), ctypes.c_ulong(0))
        if libc.syscall(*args) == -1 and ctypes.get_errno() == errno.ENOSYS:
            return  # no mseal here; another error is that range's alone


def run_test(module, header: dict, arrays: list, link: Link, file: str) -> None:
    """Run one test's driver; send "done" with its results and memory peak, or "raised" with what went wrong."""
    if header.get("trace_memory"):
        tracemalloc.start()
    try:
        results = DRIVERS[header["driver"]](module, header, arrays, link)
        peak = tracemalloc.get_traced_memory()[1] if tracemalloc.is_tracing() else None
    except BaseException as e:
        tracemalloc.stop()
        link.post({"op": "raised", **describe(e, file)})
        return
    tracemalloc.stop()
    if isinstance(results, str):  # the GPU driver's: CUDA source, compiled and run where this process cannot reach
        link.post({"op": "done", "peak": peak, "source": results})
        return
    try:
        arrays = [np.asarray(r, dtype=np.float64) for r in results]
    except (TypeError, ValueError) as e:
        link.post(
            {"op": "raised", "type": "TypeError", "message": f"returned something that is not arrays of numbers ({e})"}
        )
        return
    link.post({"op": "done", "peak": peak}, arrays)


def entry(module, name: str):
    """The submission's function `name`, or a clear error."""
    fn = getattr(module, name, None)
    if not callable(fn):
        raise NameError(f"the submission defines no function {name}()")
    return fn


def chip_driver(module, header: dict, arrays: list, link: Link) -> list:
    """Call the entry function on a proxy chip; its results are what the grader's HBM holds afterwards."""
    chip = ProxyChip(link, header["sram_bytes"], header["tensors"])
    entry(module, header["entry"])(chip, **header["kwargs"])
    return []


def update_driver(module, header: dict, arrays: list, link: Link) -> list:
    """Fold `update(m, ℓ, x)` over the columns of X, from the empty state, each column loaded from the grader and
    each state stored back to it before the next (`sim.grading.stream`); return the final (m, ℓ)."""
    rows, length = header["shape"]
    m, ℓ = np.full(rows, -np.inf), np.zeros(rows)
    update = entry(module, "update")
    for t in range(length):
        _, (x,) = link.request({"op": "load", "buf": "x", "tensor": "X", "cols": [t, t + 1]})
        m, ℓ = update(m, ℓ, x)
        state = np.stack([np.asarray(m, dtype=np.float64), np.asarray(ℓ, dtype=np.float64)])
        link.post({"op": "store", "tensor": "state", "buf": "x", "cols": [t, t + 1]}, [state])
    return [m, ℓ]


def merge_driver(module, header: dict, arrays: list, link: Link) -> list:
    """`merge(m₁, ℓ₁, m₂, ℓ₂)` of two partial states."""
    return list(entry(module, "merge")(*(a.copy() for a in arrays)))


def gpu_driver(module, header: dict, arrays: list, link: Link) -> str:
    """The CUDA source of the submission's device function: a str of at most `schema.MAX_SOURCE` characters. The
    grader compiles and runs it in another process, one that never imports the submission (`kernel_run`)."""
    source, name = entry(module, header["entry"])(), header["entry"]
    if not isinstance(source, str):
        raise TypeError(f"{name}() returned {type(source).__name__}; it must return the CUDA source as a str")
    if len(source) > schema.MAX_SOURCE:
        raise ValueError(f"{name}() returned {len(source):,} characters of CUDA source; at most {schema.MAX_SOURCE:,}")
    return source


def triton_driver(module, header: dict, arrays: list, link: Link) -> list:
    """Run the submission's Triton kernels under the interpreter, every load and store recorded."""
    from sim.grading.triton import launch

    return launch.run(module, header, arrays)


DRIVERS = {
    "chip": chip_driver,
    "update": update_driver,
    "merge": merge_driver,
    "gpu": gpu_driver,
    "triton": triton_driver,
}


def describe(e: BaseException, file: str) -> dict:
    """The exception's type, its message's first line and the submission's line that raised it
    (read from the traceback's frames; no source file is opened)."""
    where = ""
    for frame, line in traceback.walk_tb(e.__traceback__):
        if frame.f_code.co_filename == file:
            where = f"line {line}, in {frame.f_code.co_name}"
    if isinstance(e, SystemExit):
        return {"type": "SystemExit", "message": f"called sys.exit({e.code!r})", "where": where}
    text = str(e).strip()
    return {"type": type(e).__name__, "message": text.splitlines()[0][:300] if text else "", "where": where}
