"""Fills its own folder with one file far over the size a submission may write."""

import os


def forward(chip, *, Br, Bc, scale):
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "big"), "wb") as f:
        for _ in range(64):
            f.write(b"\0" * (1 << 20))
