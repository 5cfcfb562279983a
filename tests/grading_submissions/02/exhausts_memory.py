"""Asks for 64 GiB."""

import numpy as np


def forward(chip, *, Br, Bc, scale):
    hog = np.ones((1 << 33,))
    return hog.sum()
