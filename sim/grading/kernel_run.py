"""A GPU test's kernel, compiled and run by a child of its own that never imports the submission.

The submission's process only hands in its CUDA source: `harness.gpu_driver` sends a str of at most
`schema.MAX_SOURCE` characters, and the schema checks it again here; that process has a CPU assignment's walls (no
thread, no device file, its address space capped). The source and the test's Q, K, V then go to a second child of
the same sandbox with the run's kernel walls (`Isolation.kernel`: Landlock with CUDA's paths, seccomp with its
threads, no address-space cap: NVRTC compiles the student's source), started in kernel mode (`gpu_kernel.main`),
which sends back O and L. Whatever the submission's Python replaces in its own process (the harness's drivers,
`gpu_kernel.run`, CuPy's functions), it is not that process; and as for any child, seccomp and Landlock keep it
from tracing, signalling or reading another.
"""

from sim.grading import gpu_kernel, isolation, sandbox
from sim.grading.problem import Problem

START_S = 5.0  # seconds beyond the test's time to start the kernel's process and confine it


def run(child: sandbox.Child, reply: dict, walls, problem: Problem, limits: sandbox.Limits, wall_s: float):
    """The kernel's process's answer (its header and arrays: "done" with O and L, or "raised") for the source in the
    submission's `reply`; ChildDied where there is no source (the submission's process is ended), or where the
    kernel's process dies, runs over or is not confined as the run's probe was."""
    if "source" not in reply:  # a harness the submission changed: only the source is ever taken from it
        child.kill("protocol")
        raise sandbox.ChildDied("malformed message: done carries no CUDA source (a GPU test's answer is its source)")
    kernel = sandbox.Child(None, isolation.kernel_limits(limits), {**walls.kernel.settings, "kernel": True})
    try:
        header, _ = kernel.exchange({}, wall_s=kernel.limits.wall_s + START_S)
        if header["op"] != "confined" or header["layers"] != list(walls.kernel.layers):
            raise sandbox.ChildDied(f"was not confined as the run's probe was ({header.get('layers', header['op'])})")
        request = {"op": "kernel", "source": reply["source"], **gpu_kernel.launch_settings(problem)}
        return kernel.exchange(request, list(problem.inputs.values()), wall_s=wall_s)
    except sandbox.ChildDied as e:
        raise sandbox.ChildDied(f"the kernel's process {e}") from None
    finally:
        kernel.close()
