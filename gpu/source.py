"""Kernel sources: a `gpu/kernels/*.cu` file with its `#define`s in front and each header it includes (common.cuh,
hopper.cuh) in place of its #include line, compiled once per file and define set through NVRTC."""

import functools
import re
from pathlib import Path

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
