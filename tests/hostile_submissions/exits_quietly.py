"""Ends its process with os._exit(0) in the middle of the test, as if it had finished."""

import os


def forward(chip, *, Br, Bc, scale):
    os._exit(0)
