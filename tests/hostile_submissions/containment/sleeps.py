"""Sleeps in its test: what is left of it when the grader is killed outright."""

import time


def forward(chip, *, Br, Bc, scale):
    time.sleep(120)
