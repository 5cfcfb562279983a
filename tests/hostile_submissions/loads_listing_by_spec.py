"""Loads sim/algorithms/flash1.py by importlib.util.spec_from_file_location and calls its forward."""

import importlib.util
import os

import sim

LISTING = os.path.join(os.path.dirname(sim.__file__), "algorithms", "flash1.py")


def forward(chip, *, Br, Bc, scale):
    spec = importlib.util.spec_from_file_location("flash1", LISTING)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.forward(chip, Br=Br, Bc=Bc, scale=scale)
