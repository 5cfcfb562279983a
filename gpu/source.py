"""Kernel sources: read a `gpu/kernels/*.cu` file, prepend its `#define`s, compile it once through NVRTC."""

import functools
from pathlib import Path

from gpu import device, tiling

KERNEL_DIR = Path(__file__).parent / "kernels"


def render(kernel: str, defines: dict[str, int]) -> str:
    """The source NVRTC (or `nvcc -ptx`) compiles: the `#define` lines, then the kernel file."""
    head = "".join(f"#define {name} {value}\n" for name, value in defines.items())
    return head + (KERNEL_DIR / tiling.KERNEL_FILES[kernel]).read_text()


@functools.cache
def _compiled(kernel: str, define_items: tuple):
    cupy = device.require()
    module = cupy.RawModule(code=render(kernel, dict(define_items)), options=("--std=c++17",))
    return module.get_function(tiling.KERNEL_FUNCTIONS[kernel])


def function(kernel: str, defines: dict[str, int], smem: int):
    """The compiled kernel (cached per define set), allowed `smem` bytes of dynamic shared memory."""
    fn = _compiled(kernel, tuple(sorted(defines.items())))
    if smem > 48 * 1024 and smem > fn.max_dynamic_shared_size_bytes:
        fn.max_dynamic_shared_size_bytes = smem
    return fn
