"""Tests marked `gpu` skip, with the reason, where CuPy or a CUDA GPU is missing (CI has none); Triton interprets."""

import os

import pytest

import gpu

# Triton's language makes its own @triton.jit functions (tl.zeros, …) interpreted or compiled once, when first
# imported: a test process imports it only as a submission's process does, under the interpreter (the grader's compile
# check, and a test that compiles, run in processes of their own)
os.environ["TRITON_INTERPRET"] = "1"


def pytest_collection_modifyitems(config, items):
    ok, reason = gpu.available()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"needs CuPy and an NVIDIA GPU: {reason}")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
