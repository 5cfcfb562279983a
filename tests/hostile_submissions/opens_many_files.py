"""Opens descriptors until the system refuses."""

import os


def forward(chip, *, Br, Bc, scale):
    return [os.open(os.path.abspath(__file__), os.O_RDONLY) for _ in range(10_000)]
