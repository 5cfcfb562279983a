"""Tests marked `gpu` skip, with the reason, where CuPy or a CUDA GPU is missing (CI has none)."""

import pytest

import gpu


def pytest_collection_modifyitems(config, items):
    ok, reason = gpu.available()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"needs CuPy and an NVIDIA GPU: {reason}")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
