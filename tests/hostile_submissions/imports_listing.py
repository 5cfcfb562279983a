"""Imports the library's listing of Algorithm 1 at the top of the file."""

from sim.algorithms import flash1


def forward(chip, *, Br, Bc, scale):
    flash1.forward(chip, Br=Br, Bc=Bc, scale=scale)
