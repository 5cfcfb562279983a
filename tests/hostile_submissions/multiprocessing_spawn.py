"""Starts a new Python through multiprocessing's spawn context, in a new session."""

import multiprocessing
import os


def forward(chip, *, Br, Bc, scale):
    process = multiprocessing.get_context("spawn").Process(target=os.setsid)
    process.start()
    process.join()
