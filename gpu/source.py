"""Kernel sources: a `gpu/kernels/*.cu` file with its `#define`s in front and each header it includes (common.cuh,
hopper.cuh) in place of its #include line, compiled once per file and define set through NVRTC; and a launch worked
out ahead (`Launch`), whose arguments that are the same every call are converted for CuPy once (`by_value`)."""

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpu import device
from gpu.registry import KernelSpec

KERNEL_DIR = Path(__file__).parent / "kernels"
INCLUDE = re.compile(r'^#include "(\w+\.cuh)".*$', re.MULTILINE)


def render(file: str, defines: dict[str, int]) -> str:
    """The source NVRTC (or `nvcc -ptx`) compiles: the `#define` lines, then the kernel file with its headers inlined."""
    head = "".join(f"#define {name} {value}\n" for name, value in defines.items())
    return head + INCLUDE.sub(lambda line: (KERNEL_DIR / line[1]).read_text(), (KERNEL_DIR / file).read_text())


@functools.cache
def _module(file: str, define_items: tuple, arch: str | None):
    options = ("--std=c++17",) + ((f"-arch={arch}",) if arch else ())
    return device.require().RawModule(code=render(file, dict(define_items)), options=options)


def function(spec: KernelSpec, defines: dict[str, int], smem: int = 0):
    """The compiled kernel (one module per file and define set), allowed `smem` bytes of dynamic shared memory.

    Cached whole, attribute included: a call costs a dictionary lookup, not a driver call."""
    return _function(spec.file, spec.function, tuple(sorted(defines.items())), spec.arch, smem)


@functools.cache
def _function(file: str, name: str, define_items: tuple, arch: str | None, smem: int):
    fn = _module(file, define_items, arch).get_function(name)
    if smem > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = smem
    return fn


def by_value(x):
    """x (a NumPy scalar, or a one-element NumPy array such as a tensor map) converted once into what CuPy's launch
    passes by value. A launch converts every such argument anew (CuPy 14: ~1.2 µs a scalar, ~3.4 µs a tensor map,
    whose address it reads through __array_interface__), but passes one already converted (a CPointer) straight
    through; the bytes are copied into the launch when it is queued, so one converted argument serves every launch.
    Where this CuPy has no such converters (or there is no CuPy: the CPU tests' fakes), x itself."""
    converters = _converters()
    if converters is None:
        return x
    scalar, array = converters
    return array(x) if isinstance(x, np.ndarray) else scalar(x)


@functools.cache
def _converters():
    try:
        from cupy._core._scalar import CScalar
        from cupy.cuda.function import CNumpyArray
    except ImportError:
        return None
    return CScalar, CNumpyArray


@dataclass(frozen=True)
class Launch:
    """One kernel launch worked out ahead from what does not change between calls of one shape (`launch` makes it):
    the compiled build, its dynamic shared memory, the grid, the threads, and the arguments after the pointers
    (`scalars`, converted once by `by_value`)."""

    fn: object
    smem: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    scalars: tuple = ()

    def __call__(self, pointers: tuple, extra: tuple = ()) -> None:
        """Launch on the current stream with arguments (*pointers, *scalars, *extra)."""
        self.fn(self.grid, self.block, (*pointers, *self.scalars, *extra), shared_mem=self.smem)


def launch(spec: KernelSpec, defines: dict[str, int], smem: int, grid: tuple, block: tuple, scalars=()) -> Launch:
    """The Launch of `spec` built with `defines` (compiled now, on the current device, if it was not yet)."""
    return Launch(function(spec, defines, smem), smem, grid, block, tuple(map(by_value, scalars)))
