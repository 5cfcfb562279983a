"""An io.FileIO whose __fspath__ names an allowed file when checked and the master when opened."""

import io
import os

import sim

MASTER = os.path.join(os.path.dirname(os.path.dirname(sim.__file__)), "lessons", "assignments", "02_flash1_forward.py")


class Shifty:
    calls = 0

    def __fspath__(self):
        Shifty.calls += 1
        return os.path.abspath(__file__) if Shifty.calls == 1 else MASTER


def forward(chip, *, Br, Bc, scale):
    io.FileIO(Shifty()).read()
