"""Starts a Python thread (threading.Thread): the grader's line must say what was refused."""

import threading
import time


def forward(chip, *, Br, Bc, scale):
    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
    raise RuntimeError("a thread started")
