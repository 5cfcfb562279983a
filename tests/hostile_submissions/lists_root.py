"""Lists / to look around the machine."""

import os


def forward(chip, *, Br, Bc, scale):
    os.listdir("/")
