"""Calls the simulator's own listing of Algorithm 1."""

from sim.algorithms import flash1


def forward(chip, *, Br, Bc, scale):
    flash1.forward(chip, Br=Br, Bc=Bc, scale=scale, causal=False)
