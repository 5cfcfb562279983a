"""Assignment 5's kernel: the student's online-softmax device function inside the readable FlashAttention-2 kernel.

`splice` replaces line 9 of `gpu/kernels/01_flash2_readable.cu` (the per-row online-softmax
update) with a call to the student's `online_softmax_row`, defined just before the kernel; the rest
of the kernel is the project's own. The submission's process only hands in that source (`harness.gpu_driver`);
`main` serves the grader in a child of its own that never imports the submission (`sim.grading.kernel_run`), where
`run` compiles and launches it with CuPy; the grader compares O and L with the float64 reference.
"""

import mmap
import re
import resource

import numpy as np

from gpu import registry, source, tiling
from sim.core.errors import InputError

LINE_9 = "        // line 9:"
AFTER = "        __syncthreads();\n        // line 10:"
KERNEL = 'extern "C" __global__'
CALL = (
    "        // line 9, the student's: one thread per row updates (m_i, ℓ_i), turns S_ij's row into P̃_ij, sets the rescale\n"
    "        for (int r = tid; r < rows; r += NTHREADS) online_softmax_row(S_ij + r * BC, BC, m_i + r, l_i + r, rescale + r);\n"
)
TILES = tiling.Tiles(block_rows=32, block_cols=32, warps=4)
COMPILE_BYTES = 2 << 30  # NVRTC's room for the readable kernel and a student's function: see gpu/NOTES run 53
READABLE = registry.FORWARD[1]


def template() -> str:
    """The readable kernel's source, as the project ships it, with the helpers it includes (common.cuh) inlined."""
    return source.render(READABLE.file, {})


def splice(kernel: str, device_function: str) -> str:
    """The kernel with line 9 replaced by a call to `device_function` (CUDA source defining online_softmax_row)."""
    start, end, at = kernel.find(LINE_9), kernel.find(AFTER), kernel.find(KERNEL)
    if min(start, end, at) < 0 or not start < end:
        raise InputError(f"gpu kernel: line 9 or the kernel's entry point was not found in {READABLE.file}")
    if not isinstance(device_function, str) or "online_softmax_row" not in device_function:
        raise InputError("online_softmax_row_source() must return CUDA source that defines online_softmax_row")
    refuse_directives(device_function)
    return kernel[:at] + device_function + "\n\n" + kernel[at:start] + CALL + kernel[end:]


def refuse_directives(source: str) -> None:
    """ValueError naming the first line that reaches the preprocessor: an #include (of /dev/zero, a master), a
    #define that doubles 40 times, a line spliced by a backslash; only `#pragma unroll [N]` lines may use '#'."""
    for n, line in enumerate(source.split("\n"), 1):
        pragma = re.fullmatch(r"\s*#\s*pragma\s+unroll(\s+\d+)?\s*", line)
        found = next((s for s in ("#", "%:", "??=", "_Pragma", "\\") if s in line), None) if not pragma else None
        if found:
            raise ValueError(f"line {n} of the source holds {found!r}: a device function needs no preprocessor "
                             "(only '#pragma unroll' lines may use '#')")  # fmt: skip


def launch_settings(problem) -> dict:
    """What the kernel's process needs, beside the source and Q, K, V, to build and launch the kernel for one test."""
    c = problem.case
    return {"causal": c["causal"], "scale": c["scale"]}


def run(device_function: str, header: dict, arrays: list) -> list[np.ndarray]:
    """Compile the spliced kernel, run it on q, k, v (N, d)/(Nk, d); return [O, L] as float64."""
    q, k, v = arrays
    N, d = q.shape
    defines = READABLE.defines(d, str(q.dtype), TILES)
    code = "".join(f"#define {n} {x}\n" for n, x in defines.items()) + splice(template(), device_function)
    fn = compile_capped(code)
    import cupy

    smem = READABLE.smem(d, TILES)
    if smem > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = smem
    Q, K, V = (cupy.asarray(x) for x in (q, k, v))
    O = cupy.zeros_like(Q)
    L = cupy.zeros(N, dtype=cupy.float32)
    grid = (-(-N // TILES.block_rows), 1, 1)
    args = (Q, K, V, O, L, np.int32(N), np.int32(k.shape[0]), np.float32(header["scale"]), np.int32(header["causal"]))
    fn(grid, (TILES.threads, 1, 1), args, shared_mem=smem)
    cupy.cuda.runtime.deviceSynchronize()
    return [O.get().astype(np.float64), L.get().astype(np.float64)]


def compile_capped(code: str):
    """The kernel's function, compiled by NVRTC with the address space capped COMPILE_BYTES above what the process
    has mapped once CUDA is up (the kernel's process has no cap of its own: CUDA maps far more than it uses); a
    template that instantiates itself without end fails there instead of taking the machine's memory."""
    import cupy

    cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(1))  # CUDA's context first: its own mappings are made now
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * mmap.PAGESIZE
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = mapped + COMPILE_BYTES if hard == resource.RLIM_INFINITY else min(mapped + COMPILE_BYTES, hard)  # (−1)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        return cupy.RawModule(code=code, options=("--std=c++17",)).get_function(READABLE.function)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def main(fd_in: int, fd_out: int, layers: list[str], ms: float, maps: int) -> None:
    """The kernel's process (sandbox's kernel mode): say which walls are up, then compile and run each source the
    grader sends on the test's Q, K, V and send back O and L, until bye or EOF. It imports no submission (and seals
    nothing: `maps` is closed)."""
    import os

    os.close(maps)
    from sim.grading.harness import describe
    from sim.grading.proxy import Link

    link = Link(fd_in, fd_out)
    link.post({"op": "confined", "layers": layers, "ms": ms})
    for header, arrays in link.messages():
        try:
            results = run(header["source"], header, arrays)
        except BaseException as e:  # a compile error, CUDA's: the test's feedback
            link.post({"op": "raised", **describe(e, "")})
            continue
        link.post({"op": "done"}, results)
