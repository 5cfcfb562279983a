"""Fills the disk with many files, each under the size limit a single file has."""

import os


def forward(chip, *, Br, Bc, scale):
    folder = os.path.dirname(os.path.abspath(__file__))
    for i in range(1000):
        with open(os.path.join(folder, f"f{i}"), "wb") as f:
            f.write(b"\0" * ((1 << 20) - 1))
